"""Compatibility code: what runs only on old PyTorch versions.

Projects that support several PyTorch versions keep the deprecated spelling on purpose in
fallbacks: `except (ImportError, AttributeError, TypeError):` after trying the new API, and
branches of version checks (`if version.parse(torch.__version__) < ...`, `... if TORCH_2_4
else ...`). Such code never runs on the versions the finding is about, so it is not reported.
"""

from __future__ import annotations

import re

import libcst as cst

from amp_lint.analysis.outline import child_nodes, dotted_name, walk_statements

_FALLBACK_EXCEPTIONS = frozenset(
    ["ImportError", "ModuleNotFoundError", "AttributeError", "TypeError", "Exception"]
)
# `torch.__version__`, `TORCH_2_4`, `_TORCH_GREATER_EQUAL_1_10` (Lightning), `_TORCH_GEQ_2_4`.
_VERSION_TEST = re.compile(
    r"version|torch_\d|torch_has|torch_(?:greater|less|geq|leq|gt|lt|ge|le)_|_old_"
    r"|hasattr\(\s*torch",
    re.IGNORECASE,
)


def fallback_nodes(module: cst.Module) -> set[int]:
    """Identities of every node inside compatibility code."""
    roots: list[cst.CSTNode] = []
    for statement in walk_statements(module):
        if isinstance(statement, cst.Try):
            roots.extend(h.body for h in statement.handlers if _catches_fallback(h))
        elif isinstance(statement, cst.If) and _is_version_test(statement.test):
            roots.append(statement)
        for expression in _ternaries(statement):
            if _is_version_test(expression.test):
                roots.append(expression)
    inside: set[int] = set()
    stack = roots
    while stack:
        node = stack.pop()
        if id(node) not in inside:
            inside.add(id(node))
            stack.extend(child_nodes(node))
    return inside


def fallback_statements(module: cst.Module) -> set[int]:
    """Identities of the statements in fallback `except` handlers and version-gated `if`
    branches (statement level only: cheap enough for every file)."""
    inside: set[int] = set()
    stack: list[cst.BaseStatement] = []
    for statement in walk_statements(module):
        if isinstance(statement, cst.Try):
            for handler in statement.handlers:
                if _catches_fallback(handler) and isinstance(handler.body, cst.IndentedBlock):
                    stack.extend(handler.body.body)
        elif isinstance(statement, cst.If) and _is_version_test(statement.test):
            stack.append(statement)
    while stack:
        statement = stack.pop()
        inside.add(id(statement))
        if isinstance(statement, cst.BaseCompoundStatement):
            for child in child_nodes(statement):
                if isinstance(child, cst.IndentedBlock):
                    stack.extend(child.body)
                elif isinstance(child, cst.If):
                    stack.append(child)
                elif isinstance(child, (cst.Else, cst.ExceptHandler, cst.Finally)) and isinstance(
                    child.body, cst.IndentedBlock
                ):
                    stack.extend(child.body.body)
    return inside


def _catches_fallback(handler: cst.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    caught = handler.type.elements if isinstance(handler.type, cst.Tuple) else None
    types = [e.value for e in caught] if caught is not None else [handler.type]
    return any((dotted_name(t) or "").rsplit(".", 1)[-1] in _FALLBACK_EXCEPTIONS for t in types)


def _is_version_test(test: cst.BaseExpression) -> bool:
    return bool(_VERSION_TEST.search(cst.Module([]).code_for_node(test)))


def _ternaries(statement: cst.BaseStatement) -> list[cst.IfExp]:
    if not isinstance(statement, cst.SimpleStatementLine):
        return []
    found: list[cst.IfExp] = []
    stack: list[cst.CSTNode] = list(statement.body)
    while stack:
        node = stack.pop()
        if isinstance(node, cst.IfExp):
            found.append(node)
        stack.extend(child_nodes(node))
    return found
