"""The `full` format, ruff's default layout: each finding's header line, then the code around
it with line numbers and the flagged range underlined, then the fix's title as `help:`.

    train.py:12:5: AMP401 [*] `torch.cuda.amp.autocast()` is deprecated ...
       |
    10 | for x, y in loader:
    11 |     optimizer.zero_grad()
    12 |     with torch.cuda.amp.autocast():
       |          ^^^^^^^^^^^^^^^^^^^^^^^^^ AMP401
    13 |         loss = model(x)
       |
       = help: Use `torch.amp.autocast("cuda")`
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from amp_lint.findings import Finding
from amp_lint.formats.listing import Listing, SourceTexts
from amp_lint.formats.text import code_and_marker, location

CONTEXT_LINES = 2  # shown before and after the flagged lines, as ruff shows them
# A range longer than this many lines shows its first and last lines around a `...`.
LONGEST_RANGE = 8
TAB_WIDTH = 4


@dataclass(frozen=True)
class _Span:
    """The flagged range, 1-based lines, 0-based columns, the end exclusive."""

    line: int
    column: int
    end_line: int
    end_column: int

    @classmethod
    def of(cls, finding: Finding) -> _Span:
        if finding.end_line < finding.line or (
            finding.end_line == finding.line and finding.end_column <= finding.column
        ):
            return cls(finding.line, finding.column, finding.line, finding.column + 1)
        return cls(finding.line, finding.column, finding.end_line, finding.end_column)


def render(listing: Listing) -> str:
    """Each finding's block followed by a blank line; "" when there are none."""
    return "".join(
        finding_block(finding, listing.sources, listing.unsafe_fixes) + "\n"
        for finding in listing.findings
    )


def finding_block(finding: Finding, sources: SourceTexts, unsafe_fixes: bool) -> str:
    header = f"{location(finding)}: {code_and_marker(finding, unsafe_fixes)} {finding.message}"
    # A notebook's lines are counted per cell, which the file's text does not show.
    lines = sources.lines(finding.path) if finding.cell is None else None
    rows = [header]
    if lines:
        rows += _snippet(finding, lines)
    if finding.fix is not None:
        rows.append(f"{' ' * _gutter_width(finding, lines)} = help: {finding.fix.title}")
    return "\n".join(rows) + "\n"


def _shown_lines(span: _Span, line_count: int) -> list[int | None]:
    """The line numbers shown, None standing for the elided middle of a long range."""
    first = max(1, span.line - CONTEXT_LINES)
    last = min(line_count, span.end_line + CONTEXT_LINES)
    numbers: list[int | None] = list(range(first, last + 1))
    if span.end_line - span.line + 1 > LONGEST_RANGE:
        keep = LONGEST_RANGE // 2
        head = list(range(first, span.line + keep))
        tail = list(range(span.end_line - keep + 1, last + 1))
        numbers = [*head, None, *tail]
    return numbers


def _gutter_width(finding: Finding, lines: list[str] | None) -> int:
    if not lines:
        return 0
    span = _Span.of(finding)
    return len(str(min(len(lines), span.end_line + CONTEXT_LINES)))


def _snippet(finding: Finding, lines: list[str]) -> list[str]:
    span = _Span.of(finding)
    if span.line > len(lines):
        return []
    width = _gutter_width(finding, lines)
    empty_gutter = f"{' ' * width} |"
    rows = [empty_gutter]
    last_flagged = min(span.end_line, len(lines))
    for number in _shown_lines(span, len(lines)):
        if number is None:
            rows.append(f"{'.' * width} |")
            continue
        text = lines[number - 1]
        rows.append(f"{number:>{width}} | {_display(text)}".rstrip())
        if span.line <= number <= last_flagged:
            label = f" {finding.code}" if number == last_flagged else ""
            rows.append(f"{empty_gutter} {_underline(text, number, span)}{label}")
    rows.append(empty_gutter)
    return rows


def _underline(text: str, number: int, span: _Span) -> str:
    """Spaces up to the range's start on this line, then carets under its characters."""
    # A continuation line is underlined from its first non-blank character.
    indented = len(text) - len(text.lstrip())
    start = span.column if number == span.line else indented
    end = span.end_column if number == span.end_line else len(text)
    start = min(start, len(text))
    indent = _width(_display(text[:start]))
    carets = max(1, _width(_display(text[:end])) - indent)
    return " " * indent + "^" * carets


def _display(text: str) -> str:
    """The line as a terminal shows it, tabs expanded so that the carets line up."""
    return text.expandtabs(TAB_WIDTH)


def _width(text: str) -> int:
    """Terminal columns: wide East Asian characters take two, combining marks none."""
    return sum(
        0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
        for c in text
    )
