"""Putting fixed code back into a notebook, and the diff of a notebook's fix by cell.

The fixed module's lines go back to the cells they came from: lines the fixes kept stay in
their cell, a changed line stays in the cell of the line it replaced, and an added line (an
import) joins the cell of the line before it (the first code cell when it is added at the
top). Masked IPython lines come back as they were. Only the `source` values of the cells that
changed are replaced in the file's text, each written as the file writes it (its indentation
unit, the nesting of the value, `ensure_ascii` or not, its newline), so every other byte of
the notebook, outputs, execution counts, metadata, key order and the final newline included,
stays as it was.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass

from amp_lint.sources.notebooks import (
    Notebook,
    NotebookError,
    cell_source,
    load_document,
    placeholder_number,
    split_lines,
)

_WHITESPACE = re.compile(r"[ \t\n\r]*")
# An escape of a non-ASCII character: the file was written with ensure_ascii.
_NON_ASCII_ESCAPE = re.compile(r"\\u(?:00[89a-fA-F]|0[1-9a-fA-F]|[1-9a-fA-F])[0-9a-fA-F]{2}")
_DECODER = json.JSONDecoder()


def fixed_notebook(notebook: Notebook, fixed_python: str) -> bytes:
    """The notebook's bytes with the fixed module's lines back in their cells."""
    texts = _cell_texts(notebook, fixed_python)
    changed = {
        cell.index: text for cell, text in zip(notebook.code_cells, texts) if text != cell.text
    }
    if not changed:
        return notebook.raw
    return _replace_sources(notebook, changed)


def _cell_texts(notebook: Notebook, fixed_python: str) -> list[str]:
    """Each code cell's new source, in the order of `notebook.code_cells`."""
    old_lines = split_lines(notebook.python)
    new_lines = split_lines(fixed_python)
    old_owners = [notebook.cell_of_line(line) for line in range(len(old_lines))]
    parts: list[list[str]] = [[] for _ in notebook.code_cells]
    for line, owner in zip(new_lines, _new_owners(old_lines, new_lines, old_owners)):
        number = placeholder_number(line)
        if number is not None and number < len(notebook.masked):
            line = notebook.masked[number]
        parts[owner].append(line)
    texts = []
    for cell, lines in zip(notebook.code_cells, parts):
        text = "".join(lines)
        # The newline added after a last line without one when the cells were joined.
        if cell.text and not cell.text.endswith(("\n", "\r")) and text.endswith("\n"):
            text = text[:-1]
        texts.append(text)
    return texts


def _new_owners(old_lines: list[str], new_lines: list[str], old_owners: list[int]) -> list[int]:
    """The code cell (index in code_cells) of each new line; never decreasing, so that the
    cells stay in order and none is merged into another."""
    owners = [0] * len(new_lines)
    if not old_owners:
        return owners
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for tag, old_start, old_end, new_start, new_end in matcher.get_opcodes():
        if tag == "delete":
            continue
        if tag == "insert":
            # After the line before it; at the very top, into the first code cell.
            owner = old_owners[max(old_start - 1, 0)]
            owners[new_start:new_end] = [owner] * (new_end - new_start)
            continue
        if tag == "replace" and old_end - old_start != new_end - new_start:
            owners[new_start:new_end] = _resembled_owners(
                old_lines[old_start:old_end], new_lines[new_start:new_end], old_owners[old_start:]
            )
            continue
        for offset in range(new_end - new_start):
            owners[new_start + offset] = old_owners[min(old_start + offset, old_end - 1)]
    return owners


def _resembled_owners(old: list[str], new: list[str], owners: list[int]) -> list[int]:
    """In a block where lines were removed or added as others changed (an import removed
    from one cell, the call it served changed in the next), each new line goes to the cell
    of the old line it most resembles, in order: by position, the changed call would land
    in the import's cell, away from its body."""
    found = []
    floor = 0
    for line in new:
        best = max(
            range(floor, len(old)),
            key=lambda index: difflib.SequenceMatcher(None, old[index], line).ratio(),
        )
        found.append(owners[best])
        floor = best
    return found


# Replacing sources in the JSON text


def _replace_sources(notebook: Notebook, changed: dict[int, str]) -> bytes:
    text = notebook.raw.decode("utf-8")
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    body = text[len(bom) :]
    try:
        spans = source_spans(body)
    except (ValueError, IndexError) as error:  # validated already: not expected
        raise NotebookError(f"cannot locate the cells' sources: {error}") from None
    style = _Style.of(body)
    pieces = []
    written = 0
    for index in sorted(changed):
        if index not in spans:
            raise NotebookError(f"cell {index + 1} has no `source` to write")
        start, end = spans[index]
        old_value = notebook.cells[index].get("source")
        new_value: object = (
            changed[index] if isinstance(old_value, str) else split_lines(changed[index])
        )
        pieces += [body[written:start], style.dump(new_value, body, start)]
        written = end
    pieces.append(body[written:])
    return (bom + "".join(pieces)).encode("utf-8", "surrogatepass")


@dataclass(frozen=True)
class _Style:
    """How the file was serialised (nbformat: indent 1, ensure_ascii off, \\n)."""

    indent: str | None
    ensure_ascii: bool
    newline: str

    @classmethod
    def of(cls, text: str) -> _Style:
        first_member = re.match(r"[ \t\r\n]*\{(\r?\n)([ \t]*)\S", text)
        indent = first_member.group(2) if first_member else None
        ascii_only = not any(ord(character) > 127 for character in text) and bool(
            _NON_ASCII_ESCAPE.search(text)
        )
        newline = "\r\n" if "\r\n" in text else "\n"
        return cls(indent, ascii_only, newline)

    def dump(self, value: object, text: str, start: int) -> str:
        """`value` serialised to replace the value at `start`: nested lines are indented
        under the line that holds its key."""
        dumped = json.dumps(value, indent=self.indent, ensure_ascii=self.ensure_ascii)
        line_start = text.rfind("\n", 0, start) + 1
        key_line = text[line_start:start]
        base = key_line[: len(key_line) - len(key_line.lstrip(" \t"))]
        return (self.newline + base).join(dumped.split("\n"))


def source_spans(text: str) -> dict[int, tuple[int, int]]:
    """Cell index -> (start, end) of the text of its `source` value."""
    spans: dict[int, tuple[int, int]] = {}
    for key, start, _ in _members(text, _skip(text, 0)):
        if key != "cells":
            continue
        spans.clear()  # a repeated key: json.loads keeps the last
        for index, cell_start in enumerate(_elements(text, start)):
            for cell_key, value_start, value_end in _members(text, cell_start):
                if cell_key == "source":
                    spans[index] = (value_start, value_end)
    return spans


def _skip(text: str, position: int) -> int:
    match = _WHITESPACE.match(text, position)
    return match.end() if match else position


def _members(text: str, position: int) -> Iterator[tuple[str, int, int]]:
    """(key, value start, value end) of each member of the object at `position`."""
    if text[position] != "{":
        raise ValueError(f"expected an object at {position}")
    position = _skip(text, position + 1)
    if text[position] == "}":
        return
    while True:
        key, position = _DECODER.raw_decode(text, position)  # a string
        position = _skip(text, _skip(text, position) + 1)  # past the colon
        _, end = _DECODER.raw_decode(text, position)
        yield key, position, end
        position = _skip(text, end)
        if text[position] == "}":
            return
        position = _skip(text, position + 1)  # past the comma


def _elements(text: str, position: int) -> Iterator[int]:
    """The start of each element of the array at `position`."""
    if text[position] != "[":
        raise ValueError(f"expected an array at {position}")
    position = _skip(text, position + 1)
    if text[position] == "]":
        return
    while True:
        yield position
        _, end = _DECODER.raw_decode(text, position)
        position = _skip(text, end)
        if text[position] == "]":
            return
        position = _skip(text, position + 1)


# Diffs


def notebook_diff(path: str, old: bytes, new: bytes) -> bytes:
    """A unified diff of each changed code cell, headed `path:cell N` as ruff's."""
    try:
        old_cells = load_document(old)["cells"]
        new_cells = load_document(new)["cells"]
    except NotebookError:
        return b""
    name = os.fsdecode(path)
    chunks = []
    for index, (before, after) in enumerate(zip(old_cells, new_cells)):
        old_text, new_text = cell_source(before), cell_source(after)
        if old_text == new_text:
            continue
        label = f"{name}:cell {index + 1}"
        for line in difflib.unified_diff(
            split_lines(old_text), split_lines(new_text), label, label
        ):
            chunks.append(line if line.endswith(("\n", "\r")) else line + "\n")
    return "".join(chunks).encode("utf-8", "surrogateescape")
