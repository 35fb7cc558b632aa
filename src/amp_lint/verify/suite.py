"""Run every case's bad and fixed example on each device and dtype and judge the outcomes.

Each row compares a run under ``torch.autocast(device, dtype)`` with the bad example's own
float32 run (autocast disabled) on the same device: the bad example must do what its case
expects, and the fixed example must run clean against that same reference.
"""

from __future__ import annotations

import datetime
import json
import platform
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amp_lint import __version__
from amp_lint.verify.cases import RuntimeCase
from amp_lint.verify.outcomes import (
    CLEAN,
    Expectation,
    Outcome,
    ReferenceFailed,
    Results,
    classify,
    run_reference,
)

SEED = 0


@dataclass(frozen=True)
class Row:
    case: RuntimeCase
    device: str
    dtype: str
    expected: Expectation
    bad: Outcome
    fixed: Outcome

    @property
    def ok(self) -> bool:
        return self.expected.matches(self.bad) and self.fixed.kind == CLEAN

    def as_json(self) -> dict[str, Any]:
        return {
            "rule": self.case.rule,
            "case": self.case.name,
            "device": self.device,
            "dtype": self.dtype,
            "expected": str(self.expected),
            "bad": self.bad.as_json(),
            "fixed": self.fixed.as_json(),
            "ok": self.ok,
        }


def available_devices(torch: Any) -> list[str]:
    return ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]


def run_case(case: RuntimeCase, device: str, dtype: str) -> Row:
    import torch

    autocast_dtype = getattr(torch, dtype)
    synchronize = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    with float32_means_float32(torch):
        try:
            reference = run_reference(_seeded(torch, case.bad.run, device, None))
        except ReferenceFailed as failure:
            broken = Outcome("invalid", str(failure))
            return Row(case, device, dtype, case.expectation(device, dtype), broken, broken)
        bad, fixed = (
            classify(
                _seeded(torch, module.run, device, autocast_dtype),
                reference,
                tolerance=case.tolerance,
                synchronize=synchronize,
            )
            for module in (case.bad, case.fixed)
        )
    return Row(case, device, dtype, case.expectation(device, dtype), bad, fixed)


def run_suite(
    cases: Iterable[RuntimeCase],
    devices: Iterable[str],
    dtypes: Iterable[str],
    progress: Callable[[Row], None] = lambda row: None,
) -> list[Row]:
    rows = []
    dtypes = list(dtypes)
    for device in devices:
        for case in cases:
            if device not in case.devices:
                continue
            for dtype in dtypes:
                row = run_case(case, device, dtype)
                progress(row)
                rows.append(row)
    return rows


def _seeded(torch: Any, run: Callable[..., Results], *args: Any) -> Callable[[], Results]:
    def seeded_run() -> Results:
        torch.manual_seed(SEED)  # same weights and inputs for the bad, fixed and reference runs
        results: Results = run(*args)
        return results

    return seeded_run


@contextmanager
def float32_means_float32(torch: Any) -> Iterator[None]:
    """TF32 convolutions (cuDNN's default on Ampere and later) would make the float32
    reference itself a reduced-precision run."""
    saved = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


# The report


def environment(torch: Any, device: str) -> dict[str, str]:
    info = {
        "amp_lint": __version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "device": device,
        "processor": _processor_name(),
        "date": datetime.date.today().isoformat(),
    }
    if device == "cuda":
        info["gpu"] = torch.cuda.get_device_name(0)
        info["cuda"] = str(torch.version.cuda)
    return info


def report_name(env: dict[str, str]) -> str:
    """``cuda-nvidia-h100-80gb-hbm3-torch-2.11.0.json``, ``cpu-torch-2.13.0.json``: one report per
    device kind, GPU model and torch version (the local-build suffix ``+cpu`` dropped)."""
    parts = [env["device"]]
    if "gpu" in env:
        parts.append(_slug(env["gpu"]))
    parts += ["torch", env["torch"].split("+", 1)[0]]
    return "-".join(parts) + ".json"


def report(rows: list[Row], env: dict[str, str], extra: dict[str, Any] | None = None) -> str:
    cases = {row.case.name: row.case for row in rows}
    document: dict[str, Any] = {
        "environment": env,
        "cases": {
            name: {
                "rule": case.rule,
                "title": case.title,
                "why": case.why,
                "file": Path(case.bad.__file__ or "").name,
                "fixed_by": "hand (the rule has no autofix)" if case.hand_fixed else "amp-lint",
            }
            for name, case in sorted(cases.items())
        },
        "rows": [row.as_json() for row in rows],
    }
    document.update(extra or {})
    return json.dumps(document, indent=2) + "\n"


def write_report(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _slug(text: str) -> str:
    return "-".join("".join(c if c.isalnum() else " " for c in text.lower()).split())


def _processor_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
