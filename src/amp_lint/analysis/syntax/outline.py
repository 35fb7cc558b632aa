"""Cheap walks over statements only. libcst's visitor machinery rebuilds every node it
passes; walking `.body` lists instead is an order of magnitude faster, and imports, function
definitions, context managers and assignments are all statements."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence

import libcst as cst


def walk_statements(module: cst.Module) -> Iterator[cst.BaseStatement]:
    """Every statement of the module in source order, nested ones included."""
    stack: list[cst.BaseStatement] = list(reversed(module.body))
    while stack:
        statement = stack.pop()
        yield statement
        if isinstance(statement, cst.BaseCompoundStatement):
            stack.extend(reversed(list(_nested_statements(statement))))


def walk_function_statements(function: cst.FunctionDef) -> Iterator[cst.BaseStatement]:
    """The statements of a function's body, nested blocks included but not the bodies of
    functions and classes defined inside it."""
    body = function.body
    stack: list[cst.BaseStatement] = (
        list(reversed(body.body)) if isinstance(body, cst.IndentedBlock) else []
    )
    while stack:
        statement = stack.pop()
        yield statement
        if isinstance(statement, cst.BaseCompoundStatement) and not isinstance(
            statement, (cst.FunctionDef, cst.ClassDef)
        ):
            stack.extend(reversed(list(_nested_statements(statement))))


def dotted_name(node: cst.BaseExpression) -> str | None:
    """`a.b.c` as "a.b.c"; None for anything that is not a plain name chain."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted_name(node.value)
        return f"{base}.{node.attr.value}" if base else None
    return None


def source_text(node: cst.CSTNode, limit: int = 40) -> str:
    """The node as written, on one line, shortened for messages."""
    text = " ".join(cst.Module([]).code_for_node(node).split())
    # A call written one argument a line keeps its trailing comma; on one line it is noise.
    # Only a comma that stood before a line break goes: `(4,)` is a tuple and keeps it.
    replacements = ((", )", ")"), ("( ", "("), ("[ ", "["), (" )", ")"), (" ]", "]"))
    for spaced, tight in replacements:
        text = text.replace(spaced, tight)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def positional_arguments(call: cst.Call) -> list[cst.BaseExpression]:
    """The call's plain positional arguments (no keywords, no `*args`/`**kwargs`)."""
    return [arg.value for arg in call.args if arg.keyword is None and not arg.star]


def simple_lines(module: cst.Module) -> Iterator[cst.SimpleStatementLine]:
    for statement in walk_statements(module):
        if isinstance(statement, cst.SimpleStatementLine):
            yield statement


def small_statements(module: cst.Module) -> Iterator[cst.BaseSmallStatement]:
    for statement in walk_statements(module):
        yield from own_small_statements(statement)


def own_small_statements(statement: cst.BaseStatement) -> Sequence[cst.BaseSmallStatement]:
    """The statement's own simple statements: a line's, or those of a compound statement's
    one-line body (`for p in params: p.add_(1)` has one); nested blocks' are their own."""
    if isinstance(statement, cst.SimpleStatementLine):
        return statement.body
    if (
        isinstance(statement, cst.BaseCompoundStatement)
        and not isinstance(statement, cst.Match)  # a `match` has cases, not a body
        and isinstance(statement.body, cst.SimpleStatementSuite)
    ):
        return statement.body.body
    return ()


def calls_in(node: cst.CSTNode) -> Iterator[cst.Call]:
    """Calls inside an expression (not inside lambdas' or comprehensions' own scopes)."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Call):
            yield current
        stack.extend(child_nodes(current))


def _nested_statements(statement: cst.BaseCompoundStatement) -> Iterator[cst.BaseStatement]:
    for child in child_nodes(statement):
        if isinstance(child, cst.IndentedBlock):
            yield from child.body
        elif isinstance(
            child, (cst.Else, cst.Finally, cst.ExceptHandler, cst.ExceptStarHandler, cst.MatchCase)
        ):
            if isinstance(child.body, cst.IndentedBlock):
                yield from child.body.body
        elif isinstance(child, cst.If):  # an `elif`: a statement of its own
            yield child


# Fields that hold only whitespace, punctuation or operator tokens: never expressions.
_TOKEN_FIELDS = frozenset(
    [
        "lpar",
        "rpar",
        "comma",
        "semicolon",
        "leading_lines",
        "lines_after_decorators",
        "header",
        "footer",
        "newline",
        "trailing_whitespace",
        "operator",
        "dot",
        "equal",
        "colon",
        "star",
        "whitespace_before",
        "whitespace_after",
        "whitespace_after_star",
        "whitespace_after_arg",
        "whitespace_before_colon",
        "whitespace_after_colon",
        "whitespace_before_args",
        "whitespace_after_def",
        "whitespace_after_name",
        "whitespace_before_params",
        "whitespace_after_class",
        "whitespace_before_indicator",
        "whitespace_after_indicator",
        "whitespace_after_with",
        "whitespace_before_as",
        "whitespace_after_as",
        "whitespace_after_if",
        "whitespace_before_if",
        "whitespace_before_else",
        "whitespace_after_else",
        "whitespace_after_await",
        "whitespace_after_for",
        "whitespace_before_in",
        "whitespace_after_in",
        "whitespace_after_import",
        "whitespace_after_from",
        "whitespace_before_import",
        "whitespace_after_return",
        "whitespace_after_lambda",
        "whitespace_after_walrus",
        "whitespace_before_walrus",
        "whitespace_after_del",
        "whitespace_after_assert",
        "whitespace_after_raise",
        "whitespace_after_yield",
        "whitespace_after_global",
        "whitespace_after_nonlocal",
        "whitespace_before_from",
        "whitespace_after_except",
        "whitespace_before_equal",
        "whitespace_after_equal",
        "whitespace_after_while",
        "whitespace_after_try",
        "whitespace_after_finally",
        "whitespace_after_match",
        "whitespace_after_case",
        "asynchronous",
        "lbracket",
        "rbracket",
        "lbrace",
        "rbrace",
    ]
)
_NODE_FIELDS: dict[type[cst.CSTNode], tuple[str, ...]] = {}
# FunctionDef, ClassDef and the two BaseSuite classes, compared by exact type (see below).
_SCOPES_AND_SUITES = frozenset(
    {cst.FunctionDef, cst.ClassDef, cst.IndentedBlock, cst.SimpleStatementSuite}
)


def child_nodes(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The node's children without whitespace and token nodes, in field order.

    libcst's `.children` rebuilds the node through its visitor machinery on every call;
    reading the dataclass fields directly is many times faster. Node types are told apart by
    a dictionary lookup: `isinstance` against libcst's abstract base classes runs Python code
    on every call, and this function runs millions of times on a large package.
    """
    names = _NODE_FIELDS.get(type(node))
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(node) if f.name not in _TOKEN_FIELDS)
        _NODE_FIELDS[type(node)] = names
    children: list[cst.CSTNode] = []
    for name in names:
        value = getattr(node, name)
        kind = type(value)
        if kind is list or kind is tuple:
            children.extend(v for v in value if _is_node_type(type(v)))
        elif _is_node_type(kind):
            children.append(value)
    return children


_IS_NODE_TYPE: dict[type, bool] = {}


def _is_node_type(kind: type) -> bool:
    known = _IS_NODE_TYPE.get(kind)
    if known is None:
        known = _IS_NODE_TYPE[kind] = issubclass(kind, cst.CSTNode)
    return known


def subtree_nodes(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The node and everything below it, nested functions and classes included."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(child_nodes(current))


def statement_nodes(root: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Nodes of one statement in source order, not entering nested functions or classes."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        if type(node) in _SCOPES_AND_SUITES:
            continue
        stack.extend(reversed(child_nodes(node)))


def statement_expressions(statement: cst.BaseStatement) -> Iterator[cst.CSTNode]:
    """The statement's own expressions (a compound statement's header, not its body)."""
    if isinstance(statement, cst.SimpleStatementLine):
        yield from statement.body
    elif isinstance(statement, (cst.If, cst.While)):
        yield statement.test
    elif isinstance(statement, cst.For):
        yield statement.iter
    elif isinstance(statement, cst.With):
        yield from statement.items
    elif (
        isinstance(statement, cst.BaseCompoundStatement)
        and not isinstance(statement, cst.Match)  # cases, not a body
        and isinstance(statement.body, cst.SimpleStatementSuite)
    ):
        yield from statement.body.body
