"""Jupyter notebooks as one Python module: their code cells concatenated, IPython syntax masked.

A notebook is linted as ruff lints it: the code cells, in order, form one module (a function
defined in cell 1 runs under the autocast region of cell 2), and each line of that module maps
back to a cell and a line in it. Findings are reported as `nb.ipynb:cell 3:4:8`, cells
numbered from 1 over all the notebook's cells, as Jupyter shows them and ruff reports them.

Masking. IPython lines that are not Python (`%matplotlib inline`, `!pip install x`, `obj?`,
`files = !ls`, the `%%time` line of a cell) become a comment `# amp-lint:ipython:N` at module
level, `pass  # amp-lint:ipython:N` in a block, `files = None  # ...` for an assignment, one
line for one line, so every other line keeps its position and the placeholders can be put
back when fixes are written. A cell whose
cell magic runs something other than Python (`%%bash`, `%%html`, `%%writefile`), a cell whose
metadata names another language, and markdown and raw cells are left out.

Library: the standard `json` module, not nbformat. nbformat needs jsonschema, traitlets and
jupyter_core at run time, and writes a notebook by serialising it whole, which may change bytes
that no fix touched (key order, escapes, number spellings). amp-lint needs only the nbformat-4
fields read below, validated here, and writes back by replacing the `source` values of the
changed cells in the original text (notebook_writing.py), which is what ruff does too (it
parses with serde_json).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

NOTEBOOK_SUFFIX = ".ipynb"

# Cell magics whose body is Python: the magic line is masked and the body linted. Any other
# cell magic (%%bash, %%html, %%writefile, %%sql, ...) makes the whole cell not Python.
PYTHON_CELL_MAGICS = frozenset(
    {"time", "timeit", "capture", "prun", "debug", "python", "python3", "pypy"}
)

PLACEHOLDER_MARK = "# amp-lint:ipython:"
_PLACEHOLDER = re.compile(
    r"[ \t]*(?:pass  |.*= None  )?# amp-lint:ipython:(\d+)[ \t]*(?:\r\n|\r|\n)?\Z"
)
# `files = !ls`, `timing = %timeit -o f()`: IPython assigns the magic's result.
_MAGIC_ASSIGNMENT = re.compile(
    r"(?P<targets>[A-Za-z_][\w.]*(?:[ \t]*,[ \t]*[A-Za-z_][\w.]*)*)[ \t]*=[ \t]*[%!]"
)
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


class NotebookError(ValueError):
    """Not a notebook amp-lint can read; the message says why, in one line."""


def is_notebook(path: str) -> bool:
    return path.endswith(NOTEBOOK_SUFFIX)


def split_lines(text: str) -> list[str]:
    """Lines with their endings (\\n, \\r\\n or \\r only, as Python counts lines)."""
    return _LINE.findall(text)


@dataclass(frozen=True)
class CodeCell:
    """A code cell that is part of the module."""

    index: int  # 0-based, over all cells
    text: str  # its source, joined
    first_line: int  # 0-based index of its first line in the module's lines
    line_count: int

    @property
    def number(self) -> int:
        """As reported: 1-based over all cells."""
        return self.index + 1


@dataclass(frozen=True)
class Notebook:
    """A parsed notebook and the Python module its code cells make."""

    raw: bytes
    cells: list[dict[str, Any]]
    code_cells: tuple[CodeCell, ...]
    python: str
    # Placeholder number -> the IPython line it stands for (its line ending included).
    masked: tuple[str, ...] = ()
    # Module line (0-based) -> (cell number, line in cell, 1-based).
    positions: tuple[tuple[int, int], ...] = field(default=(), repr=False)

    @property
    def python_bytes(self) -> bytes:
        return self.python.encode("utf-8", "surrogatepass")

    def position(self, line: int) -> tuple[int, int]:
        """(cell number, line in the cell) of a 1-based module line."""
        if not self.positions:
            return (1, line)
        return self.positions[min(max(line, 1), len(self.positions)) - 1]

    def cell_of_line(self, line: int) -> int:
        """The index in `code_cells` of a 0-based module line."""
        for position, cell in enumerate(self.code_cells):
            if line < cell.first_line + cell.line_count:
                return position
        return len(self.code_cells) - 1


def parse_notebook(raw: bytes) -> Notebook:
    """The notebook in `raw` (nbformat 4 JSON) and its module. Raises NotebookError."""
    document = load_document(raw)
    cells: list[dict[str, Any]] = document["cells"]
    python_notebook = _language(document.get("metadata")) in (None, "python")
    builder = _ModuleBuilder()
    for index, cell in enumerate(cells):
        if python_notebook and _is_python_code_cell(cell):
            builder.add(index, cell_source(cell))
    return Notebook(
        raw=raw,
        cells=cells,
        code_cells=tuple(builder.code_cells),
        python="".join(builder.lines),
        masked=tuple(builder.masked),
        positions=tuple(builder.positions),
    )


def load_document(raw: bytes) -> dict[str, Any]:
    """The notebook's JSON, checked for the fields amp-lint reads. Raises NotebookError."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise NotebookError(f"not UTF-8 ({error.reason} at byte {error.start})") from None
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise NotebookError(f"invalid JSON: {error}") from None
    if not isinstance(document, dict):
        raise NotebookError("not a notebook: the JSON is not an object")
    version = document.get("nbformat")
    if version != 4:
        found = "none" if version is None else repr(version)
        raise NotebookError(f"nbformat {found} is not supported (only nbformat 4)")
    cells = document.get("cells")
    if not isinstance(cells, list):
        raise NotebookError("`cells` is not a list")
    for index, cell in enumerate(cells):
        _check_cell(index, cell)
    return document


def _check_cell(index: int, cell: object) -> None:
    where = f"cell {index + 1}"
    if not isinstance(cell, dict):
        raise NotebookError(f"{where} is not an object")
    if not isinstance(cell.get("cell_type"), str):
        raise NotebookError(f"{where} has no `cell_type`")
    source = cell.get("source", "")
    if not (
        isinstance(source, str)
        or (isinstance(source, list) and all(isinstance(line, str) for line in source))
    ):
        raise NotebookError(f"{where}: `source` is not a string or a list of strings")
    if not isinstance(cell.get("metadata", {}), dict):
        raise NotebookError(f"{where}: `metadata` is not an object")


def cell_lines(raw: bytes, cell: int) -> list[str] | None:
    """The lines (without their breaks) of cell `cell` (1-based, as Finding.cell counts) of
    the notebook in `raw`, for showing a finding in its code; None if there is no such cell."""
    try:
        cells = load_document(raw)["cells"]
    except NotebookError:
        return None
    if not 0 < cell <= len(cells):
        return None
    return [line.rstrip("\r\n") for line in split_lines(cell_source(cells[cell - 1]))]


def cell_source(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    return source if isinstance(source, str) else "".join(source)


def _language(metadata: object) -> str | None:
    """The notebook's language as its metadata names it (None when it does not)."""
    if not isinstance(metadata, dict):
        return None
    for key, field_name in (("language_info", "name"), ("kernelspec", "language")):
        section = metadata.get(key)
        if isinstance(section, dict) and isinstance(section.get(field_name), str):
            return str(section[field_name]).lower()
    return None


def _is_python_code_cell(cell: dict[str, Any]) -> bool:
    if cell["cell_type"] != "code":
        return False
    metadata = cell.get("metadata", {})
    vscode = metadata.get("vscode") if isinstance(metadata, dict) else None
    if isinstance(vscode, dict) and vscode.get("languageId", "python") != "python":
        return False
    magic = _cell_magic(cell_source(cell))
    return magic is None or magic in PYTHON_CELL_MAGICS


def _cell_magic(text: str) -> str | None:
    """The name of the cell magic on the cell's first non-blank line (`%%time` -> "time")."""
    for line in split_lines(text):
        stripped = line.strip()
        if stripped:
            if not stripped.startswith("%%"):
                return None
            return stripped[2:].split(maxsplit=1)[0] if stripped[2:].strip() else ""
    return None


class _ModuleBuilder:
    """Appends code cells to the module, masking IPython lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.code_cells: list[CodeCell] = []
        self.masked: list[str] = []
        self.positions: list[tuple[int, int]] = []

    def add(self, index: int, text: str) -> None:
        lines = split_lines(text)
        if lines and not lines[-1].endswith(("\n", "\r")):
            lines[-1] += "\n"  # taken off again when the cell is written back
        first = len(self.lines)
        self.lines.extend(self._masked(lines))
        self.positions.extend((index + 1, number) for number in range(1, len(lines) + 1))
        self.code_cells.append(CodeCell(index, text, first, len(lines)))

    def _masked(self, lines: list[str]) -> Iterator[str]:
        scanner = _Scanner()
        # The indentation of a magic continued by a backslash, whose next line is masked too.
        magic_indent: str | None = None
        for line in lines:
            if magic_indent is not None or (
                scanner.at_statement_start and _is_ipython(line, scanner)
            ):
                indent = _indentation(line) if magic_indent is None else magic_indent
                yield self._placeholder(line, indent)
                magic_indent = indent if line.rstrip("\r\n").endswith("\\") else None
                continue
            scanner.feed(line)
            yield line

    def _placeholder(self, line: str, indent: str) -> str:
        number = len(self.masked)
        self.masked.append(line)
        assignment = _MAGIC_ASSIGNMENT.match(line.strip())
        if assignment:  # the names stay bound
            return f"{indent}{assignment.group('targets')} = None  {PLACEHOLDER_MARK}{number}\n"
        if indent:  # a block may hold nothing else
            return f"{indent}pass  {PLACEHOLDER_MARK}{number}\n"
        # A comment at module level, so that the imports after it still lead the module (an
        # import a fix adds goes after them, not above `%pip install`).
        return f"{PLACEHOLDER_MARK}{number}\n"


def _indentation(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _is_ipython(line: str, scanner: _Scanner) -> bool:
    stripped = line.strip()
    if not stripped:
        return False
    if stripped[0] in "%!?":
        return True
    if _MAGIC_ASSIGNMENT.match(stripped):
        return True
    # `obj?`, `obj.method??`: a `?` outside strings and comments is never Python.
    return scanner.has_bare_question_mark(line)


def placeholder_number(line: str) -> int | None:
    """The number of the masked line a placeholder line stands for, or None."""
    if PLACEHOLDER_MARK not in line:
        return None
    match = _PLACEHOLDER.match(line)
    return int(match.group(1)) if match else None


class _Scanner:
    """Just enough of Python's tokenizer to tell whether a line starts a statement: open
    brackets, an open triple-quoted string, a backslash continuation. A docstring line
    ending in `?` or starting with `%` is not IPython."""

    def __init__(self) -> None:
        self.quote: str | None = None  # the open triple quote
        self.depth = 0
        self.continued = False

    @property
    def at_statement_start(self) -> bool:
        return self.quote is None and self.depth == 0 and not self.continued

    def feed(self, line: str) -> None:
        self._scan(line, record=False)

    def has_bare_question_mark(self, line: str) -> bool:
        saved = (self.quote, self.depth, self.continued)
        found = self._scan(line, record=True)
        self.quote, self.depth, self.continued = saved
        return found

    def _scan(self, line: str, *, record: bool) -> bool:
        body = line.rstrip("\r\n")
        position, question = 0, False
        self.continued = False
        while position < len(body):
            if self.quote is not None:
                position = self._close_quote(body, position, self.quote)
                continue
            character = body[position]
            if character == "#":
                break
            if character in "\"'":
                position = self._open_quote(body, position)
                continue
            if character in "([{":
                self.depth += 1
            elif character in ")]}":
                self.depth = max(0, self.depth - 1)
            elif character == "?":
                question = True
            elif character == "\\" and position == len(body) - 1:
                self.continued = True
            position += 1
        return question and record

    def _open_quote(self, body: str, position: int) -> int:
        triple = body[position] * 3
        if body.startswith(triple, position):
            self.quote = triple
            return self._close_quote(body, position + 3, triple)
        quote = body[position]
        position += 1
        while position < len(body):
            if body[position] == "\\":
                position += 2
                continue
            if body[position] == quote:
                return position + 1
            position += 1
        return position  # unterminated: the parser reports it

    def _close_quote(self, body: str, position: int, quote: str) -> int:
        while position < len(body):
            if body[position] == "\\":
                position += 2
                continue
            if body.startswith(quote, position):
                self.quote = None
                return position + len(quote)
            position += 1
        return position
