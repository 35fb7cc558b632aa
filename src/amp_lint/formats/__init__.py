"""Output formats of `amp-lint check` (`--output-format`), as ruff names them: `concise` and
`full` for people; `json`, `json-lines`, `sarif`, `github`, `gitlab` and `junit` for tools."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from amp_lint.findings import Finding, FixSafety

# The `--output-format` values (and `text`, the older name of `concise`) are settings.
from amp_lint.settings.output_formats import ALIASES, OUTPUT_FORMATS

# The formats that carry each fix's text edits (Fix.text_edits), which cost a little to make.
TEXT_EDIT_FORMATS = frozenset({"json", "json-lines", "sarif"})

# Where the rule pages (docs/rules/, made by docs.py) are read: the one base every format
# links to. There is no public site yet, so it is the repository's docs folder.
REPOSITORY_URL = "https://github.com/amp-lint/amp-lint"
RULE_DOCS_URL = f"{REPOSITORY_URL}/blob/main/docs/rules/"


def canonical_format(name: str) -> str:
    """The format an `--output-format` value names (`text` is `concise`)."""
    return ALIASES.get(name, name)


def rule_url(code: str, name: str) -> str:
    """The rule's documentation page (docs.page_name's file in RULE_DOCS_URL)."""
    return f"{RULE_DOCS_URL}{code}-{name}.md"


def shows_fixable(finding: Finding, unsafe_fixes: bool) -> bool:
    """Whether the finding gets ruff's `[*]` marker: its fix is applied by `--fix` (with
    `--unsafe-fixes`, unsafe fixes count too)."""
    fix = finding.fix
    return fix is not None and (unsafe_fixes or fix.safety is FixSafety.SAFE)


@dataclass(frozen=True)
class CodeCount:
    """One line of `--statistics`: how often a rule fired, and how many of those are fixable."""

    code: str
    name: str
    count: int
    safe_fixes: int
    unsafe_fixes: int


def count_by_code(findings: Iterable[Finding]) -> list[CodeCount]:
    """Counts per code, most frequent first, then by code (ruff's order)."""
    findings = list(findings)
    counts = Counter(f.code for f in findings)
    names = {f.code: f.name for f in findings}
    safe = Counter(f.code for f in findings if f.fix and f.fix.safety is FixSafety.SAFE)
    unsafe = Counter(f.code for f in findings if f.fix and f.fix.safety is FixSafety.UNSAFE)
    return [
        CodeCount(code, names[code], count, safe[code], unsafe[code])
        for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    ]


__all__ = [
    "ALIASES",
    "OUTPUT_FORMATS",
    "RULE_DOCS_URL",
    "TEXT_EDIT_FORMATS",
    "CodeCount",
    "canonical_format",
    "count_by_code",
    "rule_url",
    "shows_fixable",
]
