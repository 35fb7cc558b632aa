"""Which functions of another linted file enter autocast themselves, read with the standard
library's parser: a call into such a function from outside any region is worth following for
what it returns (a loss computed under float16 autocast in a helper), and most calls go to
functions that do not, where a libcst parse would be wasted."""

from __future__ import annotations

import ast
import warnings
from collections.abc import Iterator

_REGION_OPENERS: dict[str, frozenset[str]] = {}


def region_openers(path: str, text: bytes) -> frozenset[str]:
    """The functions (`name`, `Class.method`) of a file that enter autocast in a `with`:
    `with torch.autocast(...)`, or `with ctx:` over a module-level `ctx = ...autocast(...)`."""
    found = _REGION_OPENERS.get(path)
    if found is None:
        found = frozenset(_region_openers(text)) if b"autocast" in text else frozenset()
        if len(_REGION_OPENERS) > 256:
            _REGION_OPENERS.clear()
        _REGION_OPENERS[path] = found
    return found


def _region_openers(text: bytes) -> Iterator[str]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return
    contexts = {
        target.id
        for statement in tree.body
        if isinstance(statement, ast.Assign) and _names_autocast(statement.value)
        for target in statement.targets
        if isinstance(target, ast.Name)
    }
    for statement in tree.body:
        methods = statement.body if isinstance(statement, ast.ClassDef) else [statement]
        prefix = f"{statement.name}." if isinstance(statement, ast.ClassDef) else ""
        for function in methods:
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if any(_names_autocast(decorator) for decorator in function.decorator_list) or any(
                _names_autocast(item.context_expr)
                or (isinstance(item.context_expr, ast.Name) and item.context_expr.id in contexts)
                for node in ast.walk(function)
                if isinstance(node, (ast.With, ast.AsyncWith))
                for item in node.items
            ):
                yield prefix + function.name


def _names_autocast(node: ast.expr) -> bool:
    return any(
        (isinstance(part, ast.Attribute) and part.attr == "autocast")
        or (isinstance(part, ast.Name) and part.id == "autocast")
        for part in ast.walk(node)
    )
