"""The runtime suite: every rule's bad example misbehaves under torch.autocast as its case says,
and its autofixed copy runs clean against the float32 reference.

Needs torch and pytest only (no libcst), so it also runs on the GPU machines:

    python -m pytest tests/test_runtime.py -rs

CPU rows run everywhere; CUDA rows skip with a reason where torch sees no GPU. The CPU run is
also compared with the committed report docs/evidence/cpu-torch-<version>.json (outcome kinds
only: error sizes vary between processors), which `amp-lint verify` writes:

    amp-lint verify --device cpu --claims --report docs/evidence/
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
try:
    import amp_lint.verify  # noqa: F401
except ImportError:  # a GPU machine with the repository but no installation
    sys.path.insert(0, str(ROOT / "src"))

torch = pytest.importorskip("torch", reason="the runtime suite needs torch")

from amp_lint.verify.cases import DTYPES, load_cases  # noqa: E402
from amp_lint.verify.suite import Row, environment, report_name, run_case  # noqa: E402

CASES = load_cases()
EVIDENCE = ROOT / "docs" / "evidence"
REGENERATE_HINT = "amp-lint verify --device cpu --claims --report docs/evidence/"


def params() -> list[Any]:
    return [
        pytest.param(case, device, dtype, id=f"{case.rule}-{case.name}-{device}-{dtype}")
        for case in CASES
        for device in case.devices
        for dtype in DTYPES
    ]


@pytest.fixture(scope="module")
def cpu_rows() -> dict[tuple[str, str], Row]:
    return {
        (case.name, dtype): run_case(case, "cpu", dtype)
        for case in CASES
        if "cpu" in case.devices
        for dtype in DTYPES
    }


@pytest.mark.parametrize(("case", "device", "dtype"), params())
def test_bad_example_misbehaves_and_fixed_example_is_clean(
    case: Any, device: str, dtype: str, cpu_rows: dict[tuple[str, str], Row]
) -> None:
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device: the CUDA rows run only on a GPU machine")
    row = cpu_rows[(case.name, dtype)] if device == "cpu" else run_case(case, device, dtype)
    assert row.expected.matches(row.bad), (
        f"{case.rule} {case.name} on {device}/{dtype} with torch {torch.__version__}: "
        f"expected the bad example to give {row.expected}, got {row.bad.describe()}"
    )
    assert row.fixed.kind == "clean", (
        f"{case.rule} {case.name} on {device}/{dtype} with torch {torch.__version__}: "
        f"the fixed example gave {row.fixed.describe()}"
    )


def test_every_rule_with_a_case_covers_both_dtypes_on_cpu() -> None:
    covered = {(case.rule, dtype) for case in CASES if "cpu" in case.devices for dtype in DTYPES}
    assert {rule for rule, _ in covered} == {case.rule for case in CASES}


def test_committed_cpu_report_matches_this_run(cpu_rows: dict[tuple[str, str], Row]) -> None:
    env = environment(torch, "cpu")
    env["devices"] = "cpu"
    path = EVIDENCE / report_name(env)
    rows = list(cpu_rows.values())
    if not path.exists():
        pytest.skip(f"no committed report for torch {torch.__version__}: run {REGENERATE_HINT}")
    committed = json.loads(path.read_text(encoding="utf-8"))["rows"]

    def kinds(row: dict[str, Any]) -> tuple[str, ...]:
        return (
            row["rule"],
            row["case"],
            row["device"],
            row["dtype"],
            row["bad"]["kind"],
            row["fixed"]["kind"],
            row["expected"],
        )

    assert sorted(kinds(r) for r in committed) == sorted(kinds(r.as_json()) for r in rows), (
        f"{path.relative_to(ROOT)} is stale: run {REGENERATE_HINT} and review the diff"
    )
