"""docs/rules/ is generated from the rule classes; it must match what the rules say now."""

from __future__ import annotations

from pathlib import Path

from amp_lint.docs import fix_availability, render_all, render_rule, stale_files
from amp_lint.rules import all_rules

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_committed_rule_docs_are_up_to_date() -> None:
    stale = stale_files(DOCS, render_all(all_rules(), DOCS))
    assert not stale, f"out of date: {stale}; run `python -m amp_lint.docs` and commit the result"


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
        expected.append("## Runtime evidence")
        assert headings == expected
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
