"""Where an import a fix needs goes: where isort (ruff's `I001`) would keep it.

A module's leading imports form sections in a fixed order, each separated from the next by a
blank line: `from __future__`, the standard library, third-party packages, the project's own
(first-party) packages, relative imports. Within a section ruff's default puts the `import x`
lines first, sorted by module name ignoring case, then the `from x import y` lines; with
`force-sort-within-sections` both kinds are sorted together by module name, `import x` before
`from x import ...`. The layout of the file itself says which of the two it follows, so no
ruff configuration is read.

Only top-level import statements count: an import inside `if TYPE_CHECKING:` or `try:` ends
the block of imports, and a new import never goes inside one. A file without imports gets
the new one after its docstring, with the blank lines ruff wants after imports.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import libcst as cst

# Section ranks, in the order isort writes them.
FUTURE, STANDARD_LIBRARY, THIRD_PARTY, FIRST_PARTY, LOCAL = range(5)
# Files whose directory ruff takes as the project's root (its `src` defaults to the root and
# root/src: a module found there is first-party).
_ROOT_MARKERS = ("pyproject.toml", "ruff.toml", ".ruff.toml", ".git")


@dataclass(frozen=True)
class _ImportLine:
    index: int  # in module.body
    module: str  # the module the line imports (its first, for `import a, b`), "" if relative
    is_from: bool
    section: int


def add_module_import(module: cst.Module, name: str, path: str | None = None) -> cst.Module:
    """`module` with `import name` added among its top-level imports, in isort order.
    `path` (the file's) lets the project's own packages be told from third-party ones."""
    sections = _Sections(path)
    body: list[cst.BaseStatement] = list(module.body)
    start = _after_docstring(body)
    lines = _leading_import_lines(body, start, sections)
    new = cst.parse_statement(f"import {name}\n")
    assert isinstance(new, cst.SimpleStatementLine)
    section = sections.of(name, is_from=False)
    if not lines:
        return module.with_changes(body=_insert_first_import(body, start, new))
    groups = _groups(body, lines)
    force_sort = any(_from_before_import(group) for group in groups)
    same = [group for group in groups if group[0].section == section]
    if same:
        return module.with_changes(body=_insert_in_group(body, same[0], new, name, force_sort))
    later = [group for group in groups if group[0].section > section]
    if later:
        return module.with_changes(body=_insert_group_before(body, later[0][0].index, new))
    return module.with_changes(body=_insert_group_after(body, groups[-1][-1].index, new))


# --- reading the layout ---------------------------------------------------------------------


class _Sections:
    """isort's section of a module, as ruff decides it without configuration."""

    def __init__(self, path: str | None) -> None:
        self.first_party_roots: tuple[Path, ...] = ()
        self.own_package: str | None = None
        if path is None:
            return
        file = Path(os.path.abspath(path))
        if not file.parent.is_dir():
            return  # standard input named after no real file
        root = _project_root(file.parent)
        self.first_party_roots = (root, root / "src")
        self.own_package = _top_package(file.parent)

    def of(self, module: str, *, is_from: bool, relative: bool = False) -> int:
        if relative:
            return LOCAL
        top = module.split(".")[0]
        if is_from and module == "__future__":
            return FUTURE
        if top in _standard_library():
            return STANDARD_LIBRARY
        if top == self.own_package or any(_defines(root, top) for root in self.first_party_roots):
            return FIRST_PARTY
        return THIRD_PARTY


def _defines(root: Path, name: str) -> bool:
    return (root / name).is_dir() or (root / f"{name}.py").is_file()


def _project_root(directory: Path) -> Path:
    for candidate in (directory, *directory.parents):
        if any((candidate / marker).exists() for marker in _ROOT_MARKERS):
            return candidate
    return Path.cwd()


def _top_package(directory: Path) -> str | None:
    """The outermost package the directory is part of (ruff's `detect-same-package`)."""
    package = None
    while (directory / "__init__.py").is_file():
        package = directory.name
        if directory.parent == directory:
            break
        directory = directory.parent
    return package


@lru_cache(maxsize=1)
def _standard_library() -> frozenset[str]:
    names = getattr(sys, "stdlib_module_names", None)  # Python 3.10+
    if names is not None:
        return frozenset(names)
    # Python 3.9: the built-in modules and what the standard library's directory holds.
    found = set(sys.builtin_module_names)
    for key in ("stdlib", "platstdlib"):
        directory = Path(sysconfig.get_paths()[key])
        for entry in directory.iterdir() if directory.is_dir() else ():
            if entry.name in ("site-packages", "dist-packages"):
                continue
            found.add(entry.name.split(".")[0])
    dynload = Path(sysconfig.get_paths()["stdlib"]) / "lib-dynload"
    for entry in dynload.iterdir() if dynload.is_dir() else ():
        found.add(entry.name.split(".")[0])
    return frozenset(found)


def _after_docstring(body: Sequence[cst.BaseStatement]) -> int:
    first = body[0] if body else None
    if not isinstance(first, cst.SimpleStatementLine) or len(first.body) != 1:
        return 0
    small = first.body[0]
    strings = (cst.SimpleString, cst.ConcatenatedString)
    return 1 if isinstance(small, cst.Expr) and isinstance(small.value, strings) else 0


def _leading_import_lines(
    body: Sequence[cst.BaseStatement], start: int, sections: _Sections
) -> list[_ImportLine]:
    """The top-level import lines from `start` up to the first other statement."""
    lines = []
    for index in range(start, len(body)):
        line = _import_line(body[index], index, sections)
        if line is None:
            break
        lines.append(line)
    return lines


def _import_line(
    statement: cst.BaseStatement, index: int, sections: _Sections
) -> _ImportLine | None:
    if not isinstance(statement, cst.SimpleStatementLine) or not statement.body:
        return None
    if not all(isinstance(small, (cst.Import, cst.ImportFrom)) for small in statement.body):
        return None
    first = statement.body[0]
    if isinstance(first, cst.Import):
        name = _dotted(first.names[0].name)
        return _ImportLine(index, name, False, sections.of(name, is_from=False))
    assert isinstance(first, cst.ImportFrom)
    relative = bool(first.relative)
    name = _dotted(first.module) if first.module is not None else ""
    return _ImportLine(index, name, True, sections.of(name, is_from=True, relative=relative))


def _dotted(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def _groups(body: Sequence[cst.BaseStatement], lines: list[_ImportLine]) -> list[list[_ImportLine]]:
    """isort's sections, as a sorted file lays them out: runs of lines separated by a blank
    line. A line with comments above it has a blank line before them inside a section too;
    it starts a section only where its section differs from the line before."""
    groups: list[list[_ImportLine]] = []
    for line in lines:
        blank, rest = _split_leading_lines(body[line.index])
        previous = groups[-1][-1] if groups else None
        if previous is None or (blank and (not rest or line.section != previous.section)):
            groups.append([line])
        else:
            groups[-1].append(line)
    return groups


def _from_before_import(group: list[_ImportLine]) -> bool:
    """Whether a `from` line precedes an `import` line: `force-sort-within-sections`."""
    return any(a.is_from and not b.is_from for a, b in zip(group, group[1:]))


def _sort_key(module: str, is_from: bool, force_sort: bool) -> tuple[object, ...]:
    if force_sort:
        return (module.lower(), is_from)
    return (is_from, module.lower())


# --- inserting ------------------------------------------------------------------------------


def _insert_in_group(
    body: list[cst.BaseStatement],
    group: list[_ImportLine],
    new: cst.SimpleStatementLine,
    name: str,
    force_sort: bool,
) -> list[cst.BaseStatement]:
    key = _sort_key(name, False, force_sort)
    after = next(
        (line for line in group if _sort_key(line.module, line.is_from, force_sort) > key), None
    )
    if after is None:
        return _inserted(body, group[-1].index + 1, new)
    if after is not group[0]:
        return _inserted(body, after.index, new)
    # First in its section: the new line takes over the blank lines above the section; the
    # comments above the old first line stay with it.
    old = body[after.index]
    blank, rest = _split_leading_lines(old)
    body = _inserted(body, after.index, new.with_changes(leading_lines=blank))
    # isort keeps a blank line above the comments of a line that is not a section's first.
    body[after.index + 1] = old.with_changes(leading_lines=[cst.EmptyLine(), *rest] if rest else [])
    return body


def _insert_group_before(
    body: list[cst.BaseStatement], index: int, new: cst.SimpleStatementLine
) -> list[cst.BaseStatement]:
    old = body[index]
    blank, rest = _split_leading_lines(old)
    body = _inserted(body, index, new.with_changes(leading_lines=blank))
    body[index + 1] = old.with_changes(leading_lines=[cst.EmptyLine(), *rest])
    return body


def _insert_group_after(
    body: list[cst.BaseStatement], index: int, new: cst.SimpleStatementLine
) -> list[cst.BaseStatement]:
    return _inserted(body, index + 1, new.with_changes(leading_lines=[cst.EmptyLine()]))


def _insert_first_import(
    body: list[cst.BaseStatement], start: int, new: cst.SimpleStatementLine
) -> list[cst.BaseStatement]:
    """The module's only import, after its docstring: the statement that follows keeps its
    comments and gets the blank lines ruff wants after imports (two before a definition)."""
    if start == len(body):
        return _inserted(body, start, new.with_changes(leading_lines=[cst.EmptyLine()] * start))
    old = body[start]
    blank, rest = _split_leading_lines(old)
    wanted = 2 if _is_definition(old) else 1
    body = _inserted(body, start, new.with_changes(leading_lines=blank))
    spacing = [cst.EmptyLine()] * max(wanted, len(blank))
    body[start + 1] = old.with_changes(leading_lines=[*spacing, *rest])
    return body


def _is_definition(statement: cst.BaseStatement) -> bool:
    return isinstance(statement, (cst.FunctionDef, cst.ClassDef))


def _inserted(
    body: list[cst.BaseStatement], index: int, new: cst.BaseStatement
) -> list[cst.BaseStatement]:
    return [*body[:index], new, *body[index:]]


def _split_leading_lines(
    statement: cst.BaseStatement,
) -> tuple[list[cst.EmptyLine], list[cst.EmptyLine]]:
    """The blank lines above the statement before its first comment, and the rest."""
    lines = list(getattr(statement, "leading_lines", ()))
    blank = list(_takewhile_blank(lines))
    return blank, lines[len(blank) :]


def _takewhile_blank(lines: list[cst.EmptyLine]) -> Iterator[cst.EmptyLine]:
    for line in lines:
        if line.comment is not None:
            return
        yield line
