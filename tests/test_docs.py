"""docs/rules/ is generated from the rule classes; it must match what the rules say now."""

from __future__ import annotations

import json
from pathlib import Path

from runners import amp_lint

from amp_lint.pages.evidence import load_reports
from amp_lint.pages.rule_pages import fix_availability, render_all, render_rule, stale_files
from amp_lint.rules import all_rules

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_committed_rule_docs_are_up_to_date() -> None:
    stale = stale_files(DOCS, render_all(all_rules(), DOCS))
    assert not stale, f"out of date: {stale}; run `python -m amp_lint.pages` and commit the result"


def test_rule_page_layout() -> None:
    for rule in all_rules():
        page = render_rule(rule)
        assert page.startswith(f"# {rule.name} ({rule.code})\n\nFix is ")
        headings = [line for line in page.splitlines() if line.startswith("## ")]
        expected = [
            "## What it does",
            "## Why is this bad?",
            "## Example",
            "## Use instead:",
            "## Fix safety",
        ]
        if rule.known_limitations.strip():
            expected.append("## Known limitations")
        if rule.accepts_assumptions:
            expected.append("## Assumed values")
        expected.append("## Runtime evidence")
        assert headings == expected
        if rule.runtime_evidence:
            assert f"amp-lint verify --select {rule.code}" in page


def test_fix_availability_is_read_from_fix_safety() -> None:
    class Probe:
        fix_safety = ""

    def availability(text: str) -> tuple[str, str]:
        Probe.fix_safety = text
        found = fix_availability(Probe)  # type: ignore[arg-type]
        return found.label, found.sentence

    assert availability("The fix is **safe**.") == ("safe", "Fix is always available (safe).")
    assert availability("It is **unsafe**. There is no fix when x.")[0] == "unsafe"
    assert availability("It is **unsafe**. There is no fix when x.")[1].startswith(
        "Fix is sometimes available (unsafe"
    )
    assert availability("* a is **safe**\n* b is **unsafe**")[0] == "safe/unsafe"
    assert availability("There is no fix.") == ("none", "Fix is not available.")


# Rules added after the last GPU run (docs/evidence/cuda-*.json): their CUDA rows are predictions
# in their cases' EXPECTED tables until a GPU machine runs `amp-lint verify --claims --report
# docs/evidence/`. Remove a code once its CUDA rows are committed; the test fails until then.
AWAITING_CUDA_EVIDENCE = frozenset(
    {
        "AMP006",
        *("AMP101", "AMP102", "AMP103", "AMP104", "AMP105"),
        *("AMP201", "AMP202", "AMP203", "AMP204"),
        *("AMP301", "AMP302", "AMP303", "AMP304", "AMP305", "AMP306", "AMP307"),
        "AMP308",
        "AMP309",
        *("AMP310", "AMP311"),
    }
)


def test_every_rule_has_committed_runtime_evidence() -> None:
    reports = load_reports(DOCS / "evidence")
    rows = [row for report in reports for row in report.rows]
    have = {(row["rule"], row["device"], row["dtype"]) for row in rows}
    missing = [
        f"{rule.code} {device}/{dtype}"
        for rule in all_rules()
        if rule.runtime_evidence
        for device in ("cpu", "cuda")
        for dtype in ("float16", "bfloat16")
        if (rule.code, device, dtype) not in have
        and not (device == "cuda" and rule.code in AWAITING_CUDA_EVIDENCE)
    ]
    assert not missing, f"no runtime evidence for {missing}: add a case and run amp-lint verify"
    stale = sorted(code for code in AWAITING_CUDA_EVIDENCE if (code, "cuda", "float16") in have)
    assert not stale, f"CUDA evidence has arrived for {stale}: drop them from the awaiting list"
    broken = [
        f"{row['rule']} {row['case']} {row['device']}/{row['dtype']}"
        for row in rows
        if not row["ok"]
    ]
    assert not broken, f"committed reports contain rows not as documented: {broken}"


def test_documented_examples_are_flagged_by_their_rule_and_fixed_ones_by_none(
    tmp_path: Path,
) -> None:
    """Each rule page's example is flagged by its rule, through the real command, and its
    fixed example by no rule at all: a reader who copies the fix gets a clean file."""
    groups: dict[tuple[str, ...], Path] = {}
    for rule in all_rules():
        folder = groups.setdefault(rule.example_arguments, tmp_path / f"group{len(groups)}")
        folder.mkdir(exist_ok=True)
        (folder / f"{rule.code}_example.py").write_text(rule.example, encoding="utf-8")
        (folder / f"{rule.code}_fixed.py").write_text(rule.fixed_example, encoding="utf-8")
    flagged: dict[str, set[str]] = {}
    for arguments, folder in groups.items():
        result = amp_lint(
            folder, "check", "--no-cache", "--exit-zero", "--extend-select", "AMP900",
            "--output-format", "json", *arguments, ".",
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        for finding in json.loads(result.stdout):
            flagged.setdefault(Path(finding["path"]).name, set()).add(finding["code"])
    wrong = [
        f"{rule.code}: example flagged by {sorted(flagged.get(f'{rule.code}_example.py', ()))}, "
        f"fixed example by {sorted(flagged.get(f'{rule.code}_fixed.py', ()))}"
        for rule in all_rules()
        if rule.code not in flagged.get(f"{rule.code}_example.py", set())
        or flagged.get(f"{rule.code}_fixed.py")
    ]
    assert not wrong, wrong
