"""`amp-lint verify` and the runtime cases it runs, through the real command.

Each case in src/amp_lint/verify/cases/ must be flagged by its rule, and its committed
`.fixed.py` copy must be exactly what `amp-lint check --fix --unsafe-fixes` makes of it (the GPU
machines run the committed copy, having no libcst); `AMP_LINT_REGENERATE=1` rewrites the copies.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from runners import amp_lint

from amp_lint.verify.cases import CASES_DIR, case_files, fixed_path

pytest.importorskip("torch", reason="amp-lint verify needs torch")

REGENERATE = os.environ.get("AMP_LINT_REGENERATE") == "1"
CASE_FILES = case_files()


def rule_of(case: Path) -> str:
    return case.name.split("_", 1)[0].upper()


@pytest.mark.parametrize("case", CASE_FILES, ids=lambda p: p.stem)
def test_case_is_flagged_by_its_rule(case: Path) -> None:
    result = amp_lint(case.parent, "check", "--select", rule_of(case), case.name)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f" {rule_of(case)} " in result.stdout


def hand_fixed(case: Path) -> bool:
    return "\nHAND_FIXED = True" in case.read_text()


@pytest.mark.parametrize("case", CASE_FILES, ids=lambda p: p.stem)
def test_committed_fixed_copy_is_the_fixers_output(case: Path, tmp_path: Path) -> None:
    copy = tmp_path / case.name
    shutil.copyfile(case, copy)
    result = amp_lint(tmp_path, "check", "--fix", "--unsafe-fixes", case.name)
    assert result.returncode in (0, 1), result.stderr
    fixed = fixed_path(case)
    if hand_fixed(case):
        # A lint-only rule: the fixer must leave the file alone; the fixed copy is by hand.
        assert copy.read_bytes() == case.read_bytes()
        shutil.copyfile(fixed, copy)
        rerun = amp_lint(tmp_path, "check", "--select", rule_of(case), case.name)
        assert rerun.returncode == 0, f"the hand-fixed example is flagged:\n{rerun.stdout}"
        return
    if REGENERATE:
        fixed.write_bytes(copy.read_bytes())
    assert copy.read_text() == fixed.read_text(), (
        f"{fixed.name} is stale: run AMP_LINT_REGENERATE=1 python -m pytest {__file__}"
    )
    rerun = amp_lint(tmp_path, "check", "--select", rule_of(case), case.name)
    assert rerun.returncode == 0, f"the fixed example is still flagged:\n{rerun.stdout}"


def test_verify_prints_a_table_and_writes_a_report(tmp_path: Path) -> None:
    result = amp_lint(tmp_path, "verify", "--device", "cpu", "--select", "AMP001,AMP004")
    assert result.returncode == 0, result.stdout + result.stderr
    header = result.stdout.splitlines()[0]
    assert header.split()[:5] == ["rule", "case", "device", "dtype", "bad"]
    assert re.search(
        r"^AMP001 +masked-constant +cpu +float16 +nonfinite: .* clean +yes$", result.stdout, re.M
    )
    assert "8 of 8 rows as expected" in result.stdout
    document = json.loads((tmp_path / "amp-lint-verify.json").read_text())
    assert document["environment"]["torch"].startswith("2.")
    assert {(row["rule"], row["device"], row["dtype"]) for row in document["rows"]} == {
        (rule, "cpu", dtype) for rule in ("AMP001", "AMP004") for dtype in ("float16", "bfloat16")
    }
    assert all(row["ok"] and row["fixed"]["kind"] == "clean" for row in document["rows"])


def test_verify_report_into_a_directory_is_named_by_device_and_torch(tmp_path: Path) -> None:
    result = amp_lint(
        tmp_path,
        "verify",
        "--device",
        "cpu",
        "--select",
        "AMP003",
        "--dtype",
        "bfloat16",
        "--report",
        "out/",
    )
    assert result.returncode == 0, result.stderr
    (report,) = (tmp_path / "out").iterdir()
    assert re.fullmatch(r"cpu-torch-\d+\.\d+\.\d+\.json", report.name)


def test_verify_fails_when_an_expectation_is_broken(tmp_path: Path) -> None:
    cases = tmp_path / "cases"
    shutil.copytree(CASES_DIR, cases, ignore=shutil.ignore_patterns("__pycache__"))
    case = cases / "amp001_masked_constant.py"
    text = case.read_text()
    broken = text.replace('"cpu/float16": "nonfinite"', '"cpu/float16": "clean"')
    assert broken != text
    case.write_text(broken)
    result = amp_lint(tmp_path, "verify", "--device", "cpu", "--cases", str(cases))
    assert result.returncode == 1
    row = r"^AMP001 +masked-constant +cpu +float16 +nonfinite.* NO$"
    assert re.search(row, result.stdout, re.M)
    assert (
        "UNEXPECTED AMP001 masked-constant cpu/float16: expected bad example clean, "
        "got nonfinite: probs has inf or NaN" in result.stderr
    )
    assert not json.loads((tmp_path / "amp-lint-verify.json").read_text())["rows"][0]["ok"]


def test_verify_rejects_a_case_without_its_fixed_copy(tmp_path: Path) -> None:
    cases = tmp_path / "cases"
    cases.mkdir()
    name = "amp004_std_normalisation.py"
    shutil.copyfile(CASES_DIR / name, cases / name)
    result = amp_lint(tmp_path, "verify", "--cases", str(cases))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "amp-lint verify: amp004_std_normalisation.py: no amp004_std_normalisation.fixed.py "
        "beside it (run `amp-lint --fix` on a copy)"
    )


def test_verify_without_torch_says_how_to_install_it(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from amp_lint.cli.main import main\n"
        "sys.exit(main(['verify']))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "pip install './amp-lint[verify]'" in result.stderr
    assert not (tmp_path / "amp-lint-verify.json").exists()


def test_verify_package_imports_no_libcst() -> None:
    code = (
        "import sys; sys.modules['libcst'] = None\n"
        "from amp_lint.verify.command import main\n"
        "sys.exit(main(['--device', 'cpu', '--select', 'AMP003', '--report', sys.argv[1]]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, os.devnull], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
