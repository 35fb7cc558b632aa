"""What one run of an example did: raised, produced non-finite values, drifted from the float32
reference, emitted a deprecation warning, or ran clean.

A run is classified in that order of severity: an exception wins over non-finite output, which
wins over a large error against the reference, which wins over a deprecation warning.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

#: Outcome kinds, most severe first.
RAISED = "raised"
NONFINITE = "nonfinite"
WRONG = "wrong"
WARNED = "warned"
CLEAN = "clean"
KINDS = (RAISED, NONFINITE, WRONG, WARNED, CLEAN)

#: Relative error (max |a - b| / max |reference|) above which a run counts as wrong. Half
#: precision carries 3 (float16) or 2 (bfloat16) significant digits, so a few chained ops
#: stay well under 5%; the hazards the rules describe give errors of order 1 or more.
DEFAULT_TOLERANCE = 0.05

_WARNING_KINDS = (FutureWarning, DeprecationWarning)

Results = Mapping[str, Any]  # name -> torch.Tensor


@dataclass(frozen=True)
class Outcome:
    kind: str
    detail: str = ""
    #: Relative error against the float32 reference, when both ran to the end.
    error: float | None = None

    def describe(self) -> str:
        text = self.kind
        if self.detail:
            text += f": {self.detail}"
        if self.error is not None and self.kind in (WRONG, CLEAN, WARNED):
            text += f" (error {self.error:.2g})"
        return text

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "detail": self.detail, "error": self.error}


@dataclass(frozen=True)
class Expectation:
    """``"raised: <start of the message>"``, ``"nonfinite"``, ``"wrong"``, ``"warned: <text>"``
    or ``"clean"``, as written in a case's ``EXPECTED`` table."""

    kind: str
    text: str = ""

    @classmethod
    def parse(cls, spec: str) -> Expectation:
        kind, _, text = spec.partition(":")
        kind = kind.strip()
        if kind not in KINDS:
            raise ValueError(f"unknown outcome {kind!r} in expectation {spec!r}")
        return cls(kind, text.strip())

    def matches(self, outcome: Outcome) -> bool:
        return outcome.kind == self.kind and self.text in outcome.detail

    def __str__(self) -> str:
        return f"{self.kind}: {self.text}" if self.text else self.kind


class ReferenceFailed(Exception):
    """The float32 reference itself raised or produced non-finite values: the case is broken."""


def first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")


def run_reference(run: Callable[[], Results]) -> Results:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the bad example's own run reports its warnings
            results = run()
    except Exception as exc:
        raise ReferenceFailed(f"float32 reference raised {first_line(exc)}") from exc
    bad = _first_nonfinite(results)
    if bad is not None:
        raise ReferenceFailed(f"float32 reference has non-finite values in {bad!r}")
    return results


def classify(
    run: Callable[[], Results],
    reference: Results,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    synchronize: Callable[[], None] = lambda: None,
) -> Outcome:
    """Run ``run`` once and compare what it returns with ``reference``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            results = run()
            synchronize()  # CUDA reports kernel errors asynchronously
        except Exception as exc:
            return Outcome(RAISED, first_line(exc))
    nonfinite = _first_nonfinite(results)
    if nonfinite is not None:
        return Outcome(NONFINITE, f"{nonfinite} has inf or NaN")
    error, worst = relative_error(results, reference)
    if error > tolerance:
        return Outcome(WRONG, f"{worst} is off by {error:.3g} (tolerance {tolerance:g})", error)
    deprecations = [w for w in caught if issubclass(w.category, _WARNING_KINDS)]
    if deprecations:
        warning = deprecations[0]
        text = str(warning.message).strip().splitlines()[0]
        return Outcome(WARNED, f"{warning.category.__name__}: {text}", error)
    return Outcome(CLEAN, "", error)


def relative_error(results: Results, reference: Results) -> tuple[float, str]:
    """The largest max|a - b| / max|b| over the named tensors, and the name it came from."""
    if set(results) != set(reference):
        raise ReferenceFailed(
            f"run returned {sorted(results)} but the reference returned {sorted(reference)}"
        )
    worst_error, worst_name = 0.0, ""
    for name, value in results.items():
        error = _tensor_error(value, reference[name])
        if error > worst_error or not worst_name:
            worst_error, worst_name = error, name
    return worst_error, worst_name


def _tensor_error(value: Any, expected: Any) -> float:
    actual = value.detach().double().cpu()
    wanted = expected.detach().double().cpu()
    if actual.shape != wanted.shape:
        return math.inf
    scale = float(wanted.abs().max()) if wanted.numel() else 0.0
    difference = float((actual - wanted).abs().max()) if wanted.numel() else 0.0
    return difference / scale if scale > 0 else difference


def _first_nonfinite(results: Results) -> str | None:
    for name, value in results.items():
        if value.is_floating_point() and not bool(value.detach().isfinite().all()):
            return name
    return None
