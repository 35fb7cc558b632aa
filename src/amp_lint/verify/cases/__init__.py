"""The runnable examples: one module per hazard, beside its autofixed copy.

``amp001_masked_float32_source.py`` is the bad example and ``amp001_masked_float32_source.fixed.py``
is what ``amp-lint check --fix --unsafe-fixes`` makes of it (committed, so that the GPU machines,
which have torch but no libcst, run exactly what the fixer writes; a test keeps it current).

A case module defines:

* ``RULE``: the code of the rule that flags it; ``TITLE``: one line;
* ``EXPECTED``: ``{"cpu/float16": "raised: <start of message>", "cuda/bfloat16": "clean", ...}``,
  the outcome of the bad example on each device and dtype (see outcomes.Expectation);
* optionally ``DEVICES`` (default both) and ``TOLERANCE`` (default outcomes.DEFAULT_TOLERANCE);
* ``HAND_FIXED = True`` for a rule without an autofix (lint only): its ``.fixed.py`` is then
  written by hand, as the rule's documentation tells users to fix it, and the tests check that
  the fixer leaves the bad example alone and that the rule does not flag the hand-fixed copy;
* ``run(device, dtype)``: builds small deterministic inputs on ``device``, runs the code under
  ``torch.autocast(device, dtype=dtype)`` (autocast disabled when ``dtype`` is None, which gives
  the float32 reference) and returns ``{name: tensor}``.

Its docstring says why the inputs are what they are: they must make the hazard show if it exists.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from amp_lint.verify.outcomes import DEFAULT_TOLERANCE, Expectation

CASES_DIR = Path(__file__).resolve().parent
STAND_INS_DIR = CASES_DIR.parent / "stand_ins"
DEVICES = ("cpu", "cuda")
DTYPES = ("float16", "bfloat16")
FIXED_SUFFIX = ".fixed.py"


@dataclass(frozen=True)
class RuntimeCase:
    name: str
    rule: str
    title: str
    why: str
    devices: tuple[str, ...]
    tolerance: float
    expected: Mapping[str, Expectation]  # "device/dtype" -> expectation
    bad: ModuleType
    fixed: ModuleType
    hand_fixed: bool = False

    def expectation(self, device: str, dtype: str) -> Expectation:
        return self.expected[f"{device}/{dtype}"]


class CaseError(Exception):
    """A case module is malformed (missing name, bad EXPECTED table, no fixed copy)."""


def case_files(directory: Path = CASES_DIR) -> list[Path]:
    return sorted(
        p
        for p in directory.glob("amp*.py")
        if not p.name.endswith(FIXED_SUFFIX) and p.name != "__init__.py"
    )


def fixed_path(bad: Path) -> Path:
    return bad.with_name(bad.name[: -len(".py")] + FIXED_SUFFIX)


def load_cases(directory: Path = CASES_DIR) -> list[RuntimeCase]:
    with stand_ins_importable():
        return [_load_case(path) for path in case_files(directory)]


@contextmanager
def stand_ins_importable() -> Iterator[None]:
    """Make the stand-in packages (``lpips``, ``pytorch_msssim``) importable while cases load.

    The stand-ins reproduce those libraries' arithmetic so that the cases need nothing but
    torch; they shadow a real installation only during the run.
    """
    sys.path.insert(0, str(STAND_INS_DIR))
    try:
        yield
    finally:
        sys.path.remove(str(STAND_INS_DIR))
        for name, module in list(sys.modules.items()):
            if str(getattr(module, "__file__", None) or "").startswith(str(STAND_INS_DIR)):
                del sys.modules[name]  # the cases keep their references; nobody else sees them


def _load_case(path: Path) -> RuntimeCase:
    fixed = fixed_path(path)
    if not fixed.exists():
        raise CaseError(f"{path.name}: no {fixed.name} beside it (run `amp-lint --fix` on a copy)")
    bad_module = _import(path, path.stem)
    fixed_module = _import(fixed, path.stem + "_fixed")
    name = path.stem.split("_", 1)[1].replace("_", "-")
    rule = _attribute(bad_module, "RULE", str)
    if not path.stem.startswith(rule.lower() + "_"):
        raise CaseError(f"{path.name}: RULE is {rule} but the file name says otherwise")
    devices = tuple(getattr(bad_module, "DEVICES", DEVICES))
    table = _attribute(bad_module, "EXPECTED", dict)
    wanted = {f"{device}/{dtype}" for device in devices for dtype in DTYPES}
    if set(table) != wanted:
        raise CaseError(f"{path.name}: EXPECTED must have exactly the keys {sorted(wanted)}")
    try:
        expected = {key: Expectation.parse(spec) for key, spec in table.items()}
    except ValueError as exc:
        raise CaseError(f"{path.name}: {exc}") from exc
    return RuntimeCase(
        name=name,
        rule=rule,
        title=_attribute(bad_module, "TITLE", str),
        why=(bad_module.__doc__ or "").strip(),
        devices=devices,
        tolerance=float(getattr(bad_module, "TOLERANCE", DEFAULT_TOLERANCE)),
        expected=expected,
        bad=bad_module,
        fixed=fixed_module,
        hand_fixed=bool(getattr(bad_module, "HAND_FIXED", False)),
    )


def _import(path: Path, name: str) -> ModuleType:
    module_name = f"amp_lint_verify_case_{name}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise CaseError(f"{path.name}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise CaseError(f"{path.name}: importing it raised {type(exc).__name__}: {exc}") from exc
    if not callable(getattr(module, "run", None)):
        raise CaseError(f"{path.name}: defines no run(device, dtype)")
    return module


def _attribute(module: ModuleType, name: str, kind: type) -> Any:
    value = getattr(module, name, None)
    if not isinstance(value, kind):
        raise CaseError(f"{Path(module.__file__ or '?').name}: {name} must be a {kind.__name__}")
    return value
