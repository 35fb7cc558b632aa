"""Fixes as text edits: what applying one fix alone changes in the file's text, reduced to
minimal replaced ranges, for output formats that hand fixes to other tools (JSON, SARIF).

A fix is made of libcst node edits, which cannot leave the process that parsed the file;
these edits are plain data, positioned as ruff's JSON positions them (1-based lines and
columns, columns in characters, the end exclusive).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from amp_lint.findings import Finding, TextEdit

if TYPE_CHECKING:  # the output formats use split_lines on runs that never load libcst
    import libcst as cst

# The line breaks Python's tokenizer (and libcst's positions) know; str.splitlines also
# breaks at form feeds and other separators, which would shift the line numbers.
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
_BREAK = re.compile(r"\r\n|\r|\n")


def with_text_edits(module: cst.Module, findings: list[Finding], path: str) -> list[Finding]:
    """The findings, each fix of this file given the text edits it makes on its own."""
    printed: _PrintedModule | None = None
    result = []
    for finding in findings:
        fix = finding.fix
        if fix is not None and fix.edits and finding.path == path:
            if printed is None:  # printed once, only for a file with something to fix
                printed = _PrintedModule(module, path)
            edits = printed.edits_of(finding)
            finding = replace(finding, fix=replace(fix, text_edits=edits))
        result.append(finding)
    return result


class _PrintedModule:
    """The module's code, statement by statement. A fix rebuilds only the top-level statements
    it touches (and those its imports add or remove); the others stay the same objects, so
    only the changed ones are printed and compared: printing the whole module for each fix
    cost more than analysing it."""

    def __init__(self, module: cst.Module, path: str) -> None:
        self.module = module
        self.path = path  # where the file is decides which imports are first-party
        self.pieces = {id(statement): module.code_for_node(statement) for statement in module.body}
        self.header_lines = sum(_line_count(module.code_for_node(h)) for h in module.header)
        self.first_lines: list[int] = []
        line = 1 + self.header_lines
        for statement in module.body:
            self.first_lines.append(line)
            line += _line_count(self.pieces[id(statement)])
        self.end_line = line  # the line after the last statement

    def edits_of(self, finding: Finding) -> tuple[TextEdit, ...]:
        """The edits that applying `finding`'s fix alone makes, imports included; none when
        the fix cannot be applied."""
        from amp_lint.fixes.apply import FixConflict, apply_fixes

        try:
            fixed, applied = apply_fixes(self.module, [finding], self.path)
        except FixConflict:
            return ()
        if not applied:
            return ()
        if not self._only_body_changed(fixed):
            return tuple(text_edits(self.module.code, fixed.code))
        old = [id(statement) for statement in self.module.body]
        new = [id(statement) for statement in fixed.body]
        matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
        edits: list[TextEdit] = []
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag != "equal":
                before = "".join(self.pieces[key] for key in old[i1:i2])
                after = "".join(fixed.code_for_node(s) for s in fixed.body[j1:j2])
                first_line = self.first_lines[i1] if i1 < len(old) else self.end_line
                edits += text_edits(before, after, first_line)
        return tuple(edits)

    def _only_body_changed(self, fixed: cst.Module) -> bool:
        """Whether the header and footer are the same, and both modules end in a newline (one
        that does not prints its last statement without it)."""
        module = self.module
        return (
            module.has_trailing_newline
            and fixed.has_trailing_newline
            and _same_nodes(module.header, fixed.header)
            and _same_nodes(module.footer, fixed.footer)
        )


def _same_nodes(first: Sequence[cst.CSTNode], second: Sequence[cst.CSTNode]) -> bool:
    return len(first) == len(second) and all(a is b for a, b in zip(first, second))


def _line_count(code: str) -> int:
    return len(split_lines(code))


def text_edits(before: str, after: str, first_line: int = 1) -> list[TextEdit]:
    """Minimal edits turning `before` (which starts at `first_line`) into `after`: the lines
    that differ, found by difflib, each block trimmed of the characters it shares at its
    start and end."""
    old_lines, new_lines = split_lines(before), split_lines(after)
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    edits = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        old, new = "".join(old_lines[i1:i2]), "".join(new_lines[j1:j2])
        prefix = _common_prefix(old, new)
        suffix = _common_suffix(old[prefix:], new[prefix:])
        start = _position(old, prefix, first_line + i1)
        end = _position(old, len(old) - suffix, first_line + i1)
        edits.append(TextEdit(*start, *end, new[prefix : len(new) - suffix]))
    return edits


def split_lines(text: str) -> list[str]:
    """The lines of `text`, each with its line break."""
    return _LINE.findall(text)


def _common_prefix(old: str, new: str) -> int:
    size = 0
    limit = min(len(old), len(new))
    while size < limit and old[size] == new[size]:
        size += 1
    # Never between the two characters of a "\r\n": the position would name no column.
    if size and old[size - 1] == "\r" and old[size : size + 1] == "\n":
        size -= 1
    return size


def _common_suffix(old: str, new: str) -> int:
    size = 0
    limit = min(len(old), len(new))
    while size < limit and old[len(old) - 1 - size] == new[len(new) - 1 - size]:
        size += 1
    if size and old[len(old) - size] == "\n" and old[len(old) - size - 1 : len(old) - size] == "\r":
        size -= 1
    return size


def _position(text: str, offset: int, first_line: int) -> tuple[int, int]:
    """(line, column), 1-based, of `offset` in `text`, which starts at column 1 of
    `first_line`."""
    breaks = list(_BREAK.finditer(text, 0, offset))
    if not breaks:
        return first_line, offset + 1
    return first_line + len(breaks), offset - breaks[-1].end() + 1
