"""The `concise` format (`text` is its older name): flake8's line format, so editors and CI
problem matchers already understand it, with ruff's `[*]` before the message of a finding
that `--fix` fixes."""

from __future__ import annotations

from collections.abc import Iterable

from amp_lint.findings import Finding
from amp_lint.formats import count_by_code, shows_fixable
from amp_lint.formats.listing import Listing
from amp_lint.formats.positions import format_position


def format_finding(finding: Finding, unsafe_fixes: bool = False) -> str:
    # Columns are stored 0-based, as flake8 plugins report them; flake8 displays them 1-based.
    return (
        f"{location(finding)}: {code_and_marker(finding, unsafe_fixes)} {concise_message(finding)}"
    )


def location(finding: Finding) -> str:
    return format_position(finding)


def code_and_marker(finding: Finding, unsafe_fixes: bool) -> str:
    """`AMP401 [*]` when `--fix` fixes the finding (given `--unsafe-fixes`, also when only
    `--fix --unsafe-fixes` does), else the code alone, as ruff prints it."""
    return f"{finding.code} [*]" if shows_fixable(finding, unsafe_fixes) else finding.code


def concise_message(finding: Finding) -> str:
    """The finding's one-line summary (the long message when a rule gives none).

    No `(see amp-lint rule CODE)` tail: the code already leads the line, and those 25
    characters are better spent on the summary in a line meant to fit about 160 columns.
    Whitespace is collapsed again so that nothing can break the one-line format that editors'
    and CI problem matchers parse."""
    return " ".join((finding.summary or finding.message).split())


def format_findings(findings: Iterable[Finding], unsafe_fixes: bool = False) -> str:
    """One line per finding, ordered by path, line and column; "" when there are none."""
    ordered = sorted(findings, key=lambda f: f.sort_key)
    return "".join(f"{format_finding(f, unsafe_fixes)}\n" for f in ordered)


def render(listing: Listing) -> str:
    return format_findings(listing.findings, listing.unsafe_fixes)


def format_statistics(findings: Iterable[Finding]) -> str:
    """`count  CODE  [*] name` per rule, as ruff's --statistics: [*] safe fix, [-] unsafe only."""
    lines = []
    for entry in count_by_code(findings):
        marker = "[*]" if entry.safe_fixes else "[-]" if entry.unsafe_fixes else "   "
        lines.append(f"{entry.count:>5}  {entry.code}  {marker} {entry.name}\n")
    return "".join(lines)


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
