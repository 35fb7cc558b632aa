"""What rules report: a Finding at a position, optionally with a Fix made of libcst edits."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:  # libcst is loaded only where files are parsed: a cached run never needs it
    import libcst as cst

Replacement = Union["cst.CSTNode", "cst.RemovalSentinel", "cst.FlattenSentinel[cst.CSTNode]"]


class FixSafety(enum.Enum):
    """Safe fixes keep the program's meaning; unsafe ones change numerics or semantics."""

    SAFE = "safe"
    UNSAFE = "unsafe"


@dataclass(frozen=True)
class Edit:
    """Replace one node of the parsed module (matched by identity) with another."""

    target: cst.CSTNode
    replacement: Replacement


@dataclass(frozen=True)
class TextEdit:
    """Replace the text from (line, column) up to (end_line, end_column) with `content`: lines
    and columns 1-based, columns counted in characters, the end exclusive (ruff's JSON edits)."""

    line: int
    column: int
    end_line: int
    end_column: int
    content: str
    # In a notebook: the cell (1-based over all cells) whose lines `line` and `end_line`
    # count; a fix's edits may be in another cell than its finding (an added import).
    cell: int | None = None


@dataclass(frozen=True)
class Fix:
    safety: FixSafety
    title: str
    edits: tuple[Edit, ...] = field(default=(), compare=False, repr=False)
    # Modules the fixed code needs bound at module level, e.g. "torch".
    imports: tuple[str, ...] = ()
    # Imports the fix may leave unused, removed if nothing else uses them:
    # (module, name, alias) for `from module import name as alias`, (module, None, alias) for
    # `import module as alias`; alias is None when there is none.
    unused_imports: tuple[tuple[str, str | None, str | None], ...] = ()
    # What applying this fix alone changes in the file's text; plain data, so it survives
    # `without_edits` (filled only when an output format asks for it, see engine.py).
    text_edits: tuple[TextEdit, ...] = field(default=(), compare=False)

    def without_edits(self) -> Fix:
        """A copy that can cross a process boundary (edits hold live CST nodes)."""
        return replace(self, edits=())


@dataclass(frozen=True)
class Finding:
    path: str
    line: int  # 1-based
    column: int  # 0-based, as flake8 plugins report it
    code: str
    name: str
    message: str
    fix: Fix | None = None
    end_line: int = 0
    end_column: int = 0
    # The message in one short line (what goes wrong and the fix), for the concise format and
    # flake8; "" from rules that give none, where the message stands in.
    summary: str = ""
    # The calls from the autocast region to the finding, as (path, line) of each call site;
    # the message names the same chain in words.
    via: tuple[tuple[str, int], ...] = ()
    # In a notebook: the cell (1-based over all its cells), `line` being the line in the cell.
    cell: int | None = None

    @property
    def sort_key(self) -> tuple[str, int, int, int, str]:
        return (self.path, self.cell or 0, self.line, self.column, self.code)

    def portable(self) -> Finding:
        return replace(self, fix=self.fix.without_edits()) if self.fix else self
