"""Adding `# noqa: CODE` comments to source text, as ruff's `--add-noqa` adds them.

The comment goes at the end of the finding's line; codes are merged into a `# noqa: X`
comment already there (`# noqa: E501, AMP101`), and added after any other comment. A line
that cannot take a comment is skipped with a warning: one inside a multi-line string (a
comment there would become part of the string) or ending in a backslash continuation.
`check --add-noqa` (cli/add_noqa.py) and the language server's noqa action use it.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterable
from dataclasses import dataclass, field

from amp_lint.findings import Finding

_NOQA_CODES = re.compile(
    r"(?P<head>#\s*noqa:[\s]?)(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*)", re.IGNORECASE
)
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


@dataclass
class Added:
    """What --add-noqa did to one file."""

    source: bytes
    directives: int = 0
    skipped: list[str] = field(default_factory=list)  # one warning per line skipped


def with_noqa_comments(source: bytes, findings: Iterable[Finding]) -> Added:
    """`source` with the codes of `findings` in a noqa comment on each finding's line."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
    text = source.decode(encoding)
    lines = _LINE.findall(text)
    comments, blocked = _comment_columns(text)
    codes_by_line: dict[int, list[str]] = {}
    for finding in sorted(findings, key=lambda f: f.sort_key):
        codes = codes_by_line.setdefault(finding.line, [])
        if finding.code not in codes:
            codes.append(finding.code)
    added = Added(source)
    for line, codes in sorted(codes_by_line.items()):
        if line > len(lines):
            continue
        if line in blocked:
            added.skipped.append(
                f"{line}: no noqa comment added for {', '.join(codes)}: {blocked[line]}"
            )
            continue
        new_line = _with_codes(lines[line - 1], codes, comments.get(line))
        if new_line != lines[line - 1]:
            lines[line - 1] = new_line
            added.directives += 1
    if added.directives:
        added.source = "".join(lines).encode(encoding)
    return added


def _with_codes(line: str, codes: list[str], comment_column: int | None) -> str:
    body = line.rstrip("\r\n")
    ending = line[len(body) :]
    if comment_column is not None:
        match = _NOQA_CODES.search(body, comment_column)
        if match is not None:
            present = [c.upper() for c in re.findall(r"[A-Z]+[0-9]+", match["codes"], re.I)]
            new = [code for code in codes if not any(code.startswith(p) for p in present)]
            if not new:
                return line
            merged = f"{match['head'].rstrip()} {', '.join([*present, *new])}"
            return body[: match.start()] + merged + body[match.end() :] + ending
    return f"{body.rstrip()}  # noqa: {', '.join(codes)}{ending}"


def _comment_columns(text: str) -> tuple[dict[int, int], dict[int, str]]:
    """The column of each line's comment, and the lines that cannot take one, with why."""
    comments: dict[int, int] = {}
    blocked: dict[int, str] = {}
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    for token in tokens:
        (start_line, start_column), (end_line, _) = token.start, token.end
        if token.type == tokenize.COMMENT:
            comments[start_line] = start_column
        elif end_line > start_line and token.type != tokenize.NL:
            # A string over several lines: only its last line can end in a comment.
            for line in range(start_line, end_line):
                blocked.setdefault(line, "the line ends inside a multi-line string")
    for number, line in enumerate(_LINE.findall(text), start=1):
        if line.rstrip("\r\n").endswith("\\") and number not in blocked.keys() | comments.keys():
            blocked[number] = "the line ends in a backslash continuation"
    return comments, blocked
