"""flake8's line format, so editors and CI problem matchers already understand it."""

from __future__ import annotations

from collections.abc import Iterable

from amp_lint.findings import Finding
from amp_lint.formats import count_by_code


def format_finding(finding: Finding) -> str:
    # Columns are stored 0-based, as flake8 plugins report them; flake8 displays them 1-based.
    return f"{finding.path}:{finding.line}:{finding.column + 1}: {finding.code} {finding.message}"


def format_findings(findings: Iterable[Finding]) -> str:
    """One line per finding, ordered by path, line and column; "" when there are none."""
    return "".join(f"{format_finding(f)}\n" for f in sorted(findings, key=lambda f: f.sort_key))


def format_statistics(findings: Iterable[Finding]) -> str:
    """`count  CODE  [*] name` per rule, as ruff's --statistics: [*] safe fix, [-] unsafe only."""
    lines = []
    for entry in count_by_code(findings):
        marker = "[*]" if entry.safe_fixes else "[-]" if entry.unsafe_fixes else "   "
        lines.append(f"{entry.count:>5}  {entry.code}  {marker} {entry.name}\n")
    return "".join(lines)


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
