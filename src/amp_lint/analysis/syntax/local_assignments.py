"""The values plain assignments in the running function give a local name, for readings
that follow a name to what it holds (`s = k.sum(dim=-2)`, `k = k.softmax(dim=-2)`).

Unlike local_definitions.py, which follows a name only when it is bound once, every plain
assignment counts here, and whether those are all the name's bindings is said apart.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from amp_lint.analysis.interpreter.frames import ExecutionContext
from amp_lint.analysis.syntax.outline import walk_function_statements


def local_assignments(name: cst.Name, ctx: ExecutionContext) -> list[cst.BaseExpression]:
    """The values assigned to `name` by plain assignments in the running function; empty when
    any other binding (a parameter, a tuple target, a loop, `+=`) may give it its value."""
    values, complete = assigned_values(name, ctx)
    return values if complete else []


def assigned_values(name: cst.Name, ctx: ExecutionContext) -> tuple[list[cst.BaseExpression], bool]:
    """The values plain assignments in the running function give `name`, and whether those
    are all its bindings."""
    function = ctx.frame.function
    if function is None:
        return [], False
    complete = not _is_parameter(function, name.value)
    values: list[cst.BaseExpression] = []
    for statement in walk_function_statements(function):
        for binding in _bindings(statement, name.value):
            if binding is None:
                complete = False
            else:
                values.append(binding)
    return values, complete


def _bindings(statement: cst.BaseStatement, name: str) -> Iterator[cst.BaseExpression | None]:
    """What `statement` assigns to `name`: a value, or None for a binding not read here."""
    if isinstance(statement, cst.For) and _binds(statement.target, name):
        yield None
    if isinstance(statement, cst.With):
        for item in statement.items:
            if item.asname is not None and _binds(item.asname.name, name):
                yield None
    if not isinstance(statement, cst.SimpleStatementLine):
        return
    for small in statement.body:
        if isinstance(small, cst.Assign):
            for target in small.targets:
                if isinstance(target.target, cst.Name) and target.target.value == name:
                    yield small.value
                elif _binds(target.target, name):
                    yield None
        elif isinstance(small, cst.AnnAssign) and _binds(small.target, name):
            yield small.value if isinstance(small.target, cst.Name) else None
        elif isinstance(small, cst.AugAssign) and _binds(small.target, name):
            yield None


def _binds(target: cst.BaseExpression, name: str) -> bool:
    if isinstance(target, cst.Name):
        return target.value == name
    if isinstance(target, (cst.Tuple, cst.List)):
        return any(_binds(element.value, name) for element in target.elements)
    if isinstance(target, cst.StarredElement):
        return _binds(target.value, name)
    return False


def _is_parameter(function: cst.FunctionDef, name: str) -> bool:
    params = function.params
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            every.append(star)
    return any(param.name.value == name for param in every)
