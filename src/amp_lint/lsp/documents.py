"""Where a linted file shows in the editor: one text document, or the cell documents of a
notebook document. Findings carry a line in the file (or a cell and a line in it); these
views give the URI and the text that line is in, for positions in the client's units."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Union

from lsprotocol import types
from pygls.uris import from_fs_path, to_fs_path

from amp_lint.findings import Finding, TextEdit
from amp_lint.sources.notebooks import split_lines


@dataclass(frozen=True)
class Place:
    uri: str
    lines: tuple[str, ...]


class _Shown:
    """Where a finding, or one of a fix's edits, shows: by the cell it names (None in a
    Python file)."""

    def place(self, cell: int | None) -> Place | None:
        raise NotImplementedError

    def finding_place(self, finding: Finding) -> Place | None:
        return self.place(finding.cell)

    def edit_place(self, edit: TextEdit) -> Place | None:
        return self.place(edit.cell)


@dataclass(frozen=True)
class TextFile(_Shown):
    path: str
    uri: str
    text: str

    def place(self, cell: int | None) -> Place | None:
        return Place(self.uri, tuple(split_lines(self.text))) if cell is None else None

    @property
    def uris(self) -> tuple[str, ...]:
        return (self.uri,)

    def source(self) -> bytes:
        return self.text.encode("utf-8", "surrogatepass")


@dataclass(frozen=True)
class Cell:
    uri: str
    kind: types.NotebookCellKind
    language: str
    text: str


@dataclass(frozen=True)
class NotebookFile(_Shown):
    path: str
    uri: str
    cells: tuple[Cell, ...]

    def place(self, cell: int | None) -> Place | None:
        """Cells are numbered from 1 over all cells, as findings number them."""
        if cell is None or not 1 <= cell <= len(self.cells):
            return None
        found = self.cells[cell - 1]
        return Place(found.uri, tuple(split_lines(found.text)))

    @property
    def uris(self) -> tuple[str, ...]:
        return tuple(cell.uri for cell in self.cells)

    def source(self) -> bytes:
        """The notebook as an .ipynb file of its cells as the editor holds them: Python code
        cells as code, other cells as markdown or raw, which the linter skips."""
        cells: list[dict[str, object]] = []
        for cell in self.cells:
            if cell.kind == types.NotebookCellKind.Code and cell.language == "python":
                cells.append(
                    {
                        "cell_type": "code",
                        "execution_count": None,
                        "metadata": {},
                        "outputs": [],
                        "source": cell.text,
                    }
                )
            else:
                kind = "markdown" if cell.kind == types.NotebookCellKind.Markup else "raw"
                cells.append({"cell_type": kind, "metadata": {}, "source": cell.text})
        document = {
            "cells": cells,
            "metadata": {"language_info": {"name": "python"}},
            "nbformat": 4,
            "nbformat_minor": 5,
        }
        return json.dumps(document, ensure_ascii=False).encode("utf-8", "surrogatepass")


OpenFile = Union[TextFile, NotebookFile]


def path_of(uri: str) -> str | None:
    """The normalised path of a `file:` URI; None for other schemes (untitled buffers)."""
    if not uri.startswith("file:"):
        return None
    path = to_fs_path(uri)
    return os.path.normpath(os.path.abspath(path)) if path else None


def uri_of(path: str) -> str:
    return from_fs_path(path) or path
