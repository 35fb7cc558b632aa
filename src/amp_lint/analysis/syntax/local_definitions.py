"""What a local name was assigned, read from the code alone: the one assignment of a plain
name in a function's body (or at a module's top level).

Rules that recognise a formula written over several lines (`mu = conv(x)`, `mu_sq =
mu.pow(2)`, `var = conv(x * x) - mu_sq`) follow names to the expressions they hold. Only a
name bound exactly once in its scope, by `=` or an annotated assignment, is followed: a name
rebound anywhere (`x = x + 1`, `x += 1`, a loop variable, a parameter) may hold something
else where it is read, so it is not followed at all.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Optional, Union

import libcst as cst

from amp_lint.analysis.syntax.outline import child_nodes, walk_function_statements

Scope = Union[cst.FunctionDef, cst.Module]  # a runtime alias: `|` needs Python 3.10
# What each name of a scope holds: its one assigned expression, or None when it is bound more
# than once (or other than by a plain assignment).
Definitions = dict[str, Optional[cst.BaseExpression]]  # runtime alias: no `|` on 3.9


class LocalDefinitions:
    """The single assignments of each scope, computed once per scope and kept for the run
    (keyed by the scope node itself, which the map keeps alive, so an id is never reused)."""

    def __init__(self) -> None:
        self._scopes: dict[int, tuple[Scope, Definitions]] = {}

    def assigned(self, scope: Scope, name: str) -> cst.BaseExpression | None:
        """The expression `name` was assigned in `scope`, if it is bound there exactly once."""
        known = self._scopes.get(id(scope))
        if known is None:
            known = (scope, _definitions(scope))
            self._scopes[id(scope)] = known
        return known[1].get(name)


def _definitions(scope: Scope) -> Definitions:
    definitions: Definitions = {}
    if isinstance(scope, cst.FunctionDef):
        for param in _parameters(scope.params):
            definitions[param] = None  # a parameter is bound by every call
        statements: Iterator[cst.BaseStatement] = walk_function_statements(scope)
    else:
        statements = _module_level(scope)
    for statement in statements:
        for name, value in _bindings(statement):
            definitions[name] = value if name not in definitions else None
    return definitions


def _module_level(module: cst.Module) -> Iterator[cst.BaseStatement]:
    """The module's statements outside its functions and classes, nested blocks included."""
    stack: list[cst.BaseStatement] = list(reversed(module.body))
    while stack:
        statement = stack.pop()
        yield statement
        if isinstance(statement, cst.BaseCompoundStatement) and not isinstance(
            statement, (cst.FunctionDef, cst.ClassDef)
        ):
            stack.extend(reversed(_blocks(statement)))


def _blocks(statement: cst.BaseCompoundStatement) -> list[cst.BaseStatement]:
    """The statements of a compound statement's blocks (`else`, `except`, `elif` too)."""
    found: list[cst.BaseStatement] = []
    for child in child_nodes(statement):
        body = getattr(child, "body", None) if not isinstance(child, cst.If) else None
        if isinstance(child, cst.IndentedBlock):
            found.extend(child.body)
        elif isinstance(child, cst.If):
            found.append(child)
        elif isinstance(body, cst.IndentedBlock):
            found.extend(body.body)
    return found


def _parameters(params: cst.Parameters) -> Iterator[str]:
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        yield param.name.value
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            yield star.name.value


def _bindings(statement: cst.BaseStatement) -> Iterator[tuple[str, cst.BaseExpression | None]]:
    """(name, assigned expression or None) for each name the statement binds itself."""
    if isinstance(statement, cst.SimpleStatementLine):
        for small in statement.body:
            yield from _small_bindings(small)
    elif isinstance(statement, (cst.For, cst.With, cst.FunctionDef, cst.ClassDef)):
        # Loop variables, `as` targets and nested definitions: bound, but not by a value
        # this module reads.
        for name in _bound_by_compound(statement):
            yield name, None


def _small_bindings(
    small: cst.BaseSmallStatement,
) -> Iterator[tuple[str, cst.BaseExpression | None]]:
    if isinstance(small, cst.Assign):
        for target in small.targets:
            yield from _target_bindings(target.target, small.value)
    elif isinstance(small, cst.AnnAssign) and small.value is not None:
        yield from _target_bindings(small.target, small.value)
    elif isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Name):
        yield small.target.value, None
    elif isinstance(small, (cst.Import, cst.ImportFrom)):
        names = small.names
        if isinstance(names, (list, tuple)):
            for alias in names:
                bound = alias.asname.name if alias.asname is not None else alias.name
                if isinstance(bound, cst.Name):
                    yield bound.value, None


def _target_bindings(
    target: cst.BaseExpression, value: cst.BaseExpression | None
) -> Iterator[tuple[str, cst.BaseExpression | None]]:
    """`a = v` binds a to v; `a, b = u, v` binds a to u and b to v; any other unpacking binds
    its names to values not known here."""
    if isinstance(target, cst.Name):
        yield target.value, value
    elif isinstance(target, (cst.Tuple, cst.List)):
        values = (
            [element.value for element in value.elements]
            if isinstance(value, (cst.Tuple, cst.List))
            and len(value.elements) == len(target.elements)
            and not any(isinstance(e, cst.StarredElement) for e in value.elements)
            else None
        )
        for position, element in enumerate(target.elements):
            inner = values[position] if values is not None else None
            yield from _target_bindings(element.value, inner)


def _bound_by_compound(statement: cst.BaseStatement) -> Iterator[str]:
    if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
        yield statement.name.value
    elif isinstance(statement, cst.For):
        yield from names_in(statement.target)
    elif isinstance(statement, cst.With):
        for item in statement.items:
            if item.asname is not None:
                yield from names_in(item.asname.name)


def names_in(target: cst.BaseExpression) -> Iterator[str]:
    if isinstance(target, cst.Name):
        yield target.value
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from names_in(element.value)
