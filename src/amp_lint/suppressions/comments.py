"""Suppression comments, with flake8's and ruff's syntax, and which of them suppressed nothing.

* `# noqa` and `# noqa: AMP001,AMP003` at the end of a line suppress findings on that line
  (every code, or those codes and code prefixes);
* `# amp-lint: noqa` and `# amp-lint: noqa: AMP101, AMP3` on a line of their own suppress
  findings in the whole file, as ruff's `# ruff: noqa` does; so does `# flake8: noqa` (no
  codes), which ruff honours too. A bare `# noqa` on a line of its own does not.

NoqaMap remembers which codes of which directive suppressed something; the AMP codes that
did not are what AMP900 (unused-noqa) reports, with a fix removing them (`unused_noqa`).
Codes that are not amp-lint's (`E501`) belong to other tools and are never touched.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from amp_lint.findings import Finding, Fix, FixSafety, TextEdit

UNUSED_NOQA_CODE = "AMP900"
UNUSED_NOQA_NAME = "unused-noqa"
OUR_PREFIX = "AMP"

_CODES = r"[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*"
_NOQA = re.compile(rf"#\s*noqa(?::[\s]?(?P<codes>{_CODES}))?", re.IGNORECASE)
_FILE_NOQA = re.compile(
    rf"^[ \t\f]*(?P<directive>#\s*(?P<tool>amp-lint|flake8)\s*:\s*noqa"
    rf"(?::\s*(?P<codes>{_CODES}))?)\s*$",
    re.IGNORECASE,
)
_CODE = re.compile(r"[A-Z]+[0-9]+", re.IGNORECASE)
# Python's line breaks; str.splitlines() also breaks at form feeds and other separators
# that Python reads as whitespace, which would shift every later line number.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


@dataclass
class Directive:
    """One noqa comment: where it is, and the codes it lists (None: every code)."""

    line: int  # 1-based
    start: int  # 0-based character columns of the directive, `#` to its last code
    end: int
    codes: tuple[str, ...] | None
    file_level: bool
    used: set[str] = field(default_factory=set)  # the listed codes that suppressed something

    def covers(self, code: str) -> str | None:
        """The listed code (or prefix) that covers `code`; "" for a blanket directive."""
        if self.codes is None:
            return ""
        return next((listed for listed in self.codes if code.startswith(listed)), None)


class NoqaMap:
    """The noqa directives of one file."""

    def __init__(self, text: str) -> None:
        self.directives: list[Directive] = []
        self._by_line: dict[int, Directive] = {}
        self._file_level: list[Directive] = []
        for number, line in enumerate(_LINE_BREAK.split(text), start=1):
            if "noqa" not in line.lower() or "#" not in line:
                continue
            directive = _parse(line, number)
            if directive is None:
                continue
            self.directives.append(directive)
            if directive.file_level:
                self._file_level.append(directive)
            else:
                self._by_line[number] = directive

    def suppresses(self, line: int, code: str) -> bool:
        """Whether a finding of `code` on `line` is suppressed; remembers by which code."""
        for directive in (*self._file_level, self._by_line.get(line)):
            if directive is None:
                continue
            listed = directive.covers(code)
            if listed is not None:
                if listed:
                    directive.used.add(listed)
                return True
        return False

    def suppresses_in_file(self, code: str) -> bool:
        """Whether a file-level directive suppresses `code` (for flake8, which reads the
        line-level ones itself)."""
        return any(directive.covers(code) is not None for directive in self._file_level)


def _parse(line: str, number: int) -> Directive | None:
    file_match = _FILE_NOQA.match(line)
    if file_match is not None:
        codes = file_match.group("codes")
        if file_match.group("tool").lower() == "flake8" and codes:
            return None  # flake8 ignores a file-level noqa with codes; so does amp-lint
        start, end = file_match.span("directive")
        return Directive(number, start, end, _code_tuple(codes), file_level=True)
    match = _NOQA.search(line)
    if match is None:
        return None
    return Directive(number, match.start(), match.end(), _code_tuple(match.group("codes")), False)


def _code_tuple(codes: str | None) -> tuple[str, ...] | None:
    return tuple(code.upper() for code in _CODE.findall(codes)) if codes else None


# Unused noqa (AMP900)


def unused_noqa(
    path: str,
    source: bytes,
    suppressed: Iterable[tuple[str, int]],
    is_enabled: Callable[[str], bool],
    known_codes: Iterable[str],
) -> list[Finding]:
    """AMP900 findings for the AMP codes of `path`'s noqa directives that suppressed none of
    `suppressed` ((code, line) of each finding the file's directives suppressed), each with
    a safe fix removing them (the whole comment when nothing else is left in it)."""
    if b"noqa" not in source.lower():
        return []
    text = source.decode("utf-8", "surrogateescape")
    noqa = NoqaMap(text)
    for code, line in suppressed:
        noqa.suppresses(line, code)
    known = tuple(known_codes)
    lines = _LINE.findall(text)
    findings = []
    for directive in noqa.directives:
        if directive.codes is None or noqa.suppresses(directive.line, UNUSED_NOQA_CODE):
            continue  # a blanket directive may be for other tools; AMP900 itself suppressed
        unused = [
            c for c in directive.codes if c.startswith(OUR_PREFIX) and c not in directive.used
        ]
        if unused:
            line_text = lines[directive.line - 1] if directive.line <= len(lines) else ""
            findings.append(_finding(path, directive, unused, line_text, is_enabled, known))
    return findings


def _finding(
    path: str,
    directive: Directive,
    unused: list[str],
    line_text: str,
    is_enabled: Callable[[str], bool],
    known: tuple[str, ...],
) -> Finding:
    kinds: dict[str, list[str]] = {"unused": [], "non-enabled": [], "unknown": []}
    for code in unused:
        if not any(rule.startswith(code) for rule in known):
            kinds["unknown"].append(code)
        elif not any(is_enabled(rule) for rule in known if rule.startswith(code)):
            kinds["non-enabled"].append(code)
        else:
            kinds["unused"].append(code)
    details = "; ".join(
        f"{kind}: {', '.join(f'`{code}`' for code in codes)}"
        for kind, codes in kinds.items()
        if codes
    )
    assert directive.codes is not None
    remaining = [code for code in directive.codes if code not in unused]
    title = "Remove unused codes" if remaining else "Remove unused `noqa` directive"
    edit = _removal(directive, remaining, line_text)
    return Finding(
        path=path,
        line=directive.line,
        column=directive.start,
        end_line=directive.line,
        end_column=directive.end,
        code=UNUSED_NOQA_CODE,
        name=UNUSED_NOQA_NAME,
        message=f"Unused `noqa` directive ({details})",
        fix=Fix(FixSafety.SAFE, title, text_edits=(edit,)),
    )


def _removal(directive: Directive, remaining: list[str], line_text: str) -> TextEdit:
    """The edit leaving `remaining` codes in the directive, or removing it."""
    line, start, end = directive.line, directive.start, directive.end
    content = line_text.rstrip("\r\n")
    if remaining:
        prefix = content[start:end].split(":", 2 if directive.file_level else 1)
        head = ":".join(prefix[: 2 if directive.file_level else 1]).rstrip()
        return TextEdit(line, start + 1, line, end + 1, f"{head}: {', '.join(remaining)}")
    before, after = content[:start], content[end:]
    if directive.file_level or (not before.strip() and not after.strip()):
        return TextEdit(line, 1, line + 1, 1, "")  # the whole line
    kept_before = before.rstrip()
    if after.strip():  # words after the codes stay a comment, without the directive
        return TextEdit(line, len(kept_before) + 1, line, len(content) + 1, f"  # {after.strip()}")
    return TextEdit(line, len(kept_before) + 1, line, len(content) + 1, "")


def apply_text_edits(source: bytes, edits: Iterable[TextEdit]) -> bytes:
    """`source` with the edits (which must not overlap) applied."""
    text = source.decode("utf-8", "surrogateescape")
    starts = [0]
    for line in _LINE.findall(text):
        starts.append(starts[-1] + len(line))

    def offset(line: int, column: int) -> int:
        return min(starts[min(line, len(starts)) - 1] + column - 1, len(text))

    for edit in sorted(edits, key=lambda e: (e.line, e.column), reverse=True):
        begin, stop = offset(edit.line, edit.column), offset(edit.end_line, edit.end_column)
        text = text[:begin] + edit.content + text[stop:]
    return text.encode("utf-8", "surrogateescape")


def fix_unused_noqa(source: bytes, findings: Iterable[Finding]) -> tuple[bytes, list[Finding]]:
    """`source` with the fixes of its AMP900 findings applied, and those findings. They are
    text edits made before the other fixes (which re-read the file), on lines of their own."""
    fixed = [
        f for f in findings if f.code == UNUSED_NOQA_CODE and f.fix is not None and f.fix.text_edits
    ]
    if not fixed:
        return source, []
    edits = [edit for finding in fixed if finding.fix for edit in finding.fix.text_edits]
    return apply_text_edits(source, edits), fixed
