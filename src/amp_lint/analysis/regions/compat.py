"""Compatibility code: what runs only on old PyTorch versions.

Projects that support several PyTorch versions keep the deprecated spelling on purpose in
fallbacks: `except (ImportError, AttributeError, TypeError):` after trying the new API, and
branches of version checks (`if version.parse(torch.__version__) < ...`, `... if TORCH_2_4
else ...`). Such code never runs on the versions the finding is about, so it is not reported.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import libcst as cst

from amp_lint.analysis.syntax.outline import (
    child_nodes,
    dotted_name,
    statement_expressions,
    walk_statements,
)

_FALLBACK_EXCEPTIONS = frozenset(
    ["ImportError", "ModuleNotFoundError", "AttributeError", "TypeError", "Exception"]
)
# Identifiers that name a PyTorch version check: `torch.__version__`, `version.parse`,
# `is_torch_version`, `TORCH_2_4`, `torch_ver`, `_TORCH_GREATER_EQUAL_1_10` (Lightning),
# `_TORCH_GEQ_2_4`, `TORCH_GE_2_4`.
_VERSION_NAME = re.compile(
    r"version|torch_?ver(?:$|_)|torch_\d|torch_has|torch_(?:greater|less|geq|leq|gt|lt|ge|le)_"
    r"|_old_",
    re.IGNORECASE,
)
# `hasattr(torch.amp, "GradScaler")`, `getattr(torch, "amp", None)`, `"amp" in dir(torch)`.
_FEATURE_TESTS = frozenset(["hasattr", "getattr", "dir"])
# What a guard clause that returns the new API names (`if TORCH_GE_2_4: return
# torch.amp.GradScaler("cuda")`): the statements after it are the fallback.
_AMP_NAMES = frozenset(["amp", "autocast", "GradScaler", "custom_fwd", "custom_bwd"])


def fallback_nodes(module: cst.Module) -> set[int]:
    """Identities of every node inside compatibility code."""
    gates = gate_names(module)
    roots: list[cst.CSTNode] = []
    for statement in walk_statements(module):
        if isinstance(statement, cst.Try):
            roots.extend(h.body for h in statement.handlers if _catches_fallback(h))
        elif isinstance(statement, cst.If) and _is_version_test(statement.test, gates):
            roots.append(statement)
        roots.extend(_gated_expressions(statement, gates))
        roots.extend(_after_version_guard(statement, gates))
    roots.extend(_after_version_guard(module, gates))
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
    gates = gate_names(module)
    inside: set[int] = set()
    stack: list[cst.BaseStatement] = []
    for statement in walk_statements(module):
        if isinstance(statement, cst.Try):
            for handler in statement.handlers:
                if _catches_fallback(handler) and isinstance(handler.body, cst.IndentedBlock):
                    stack.extend(handler.body.body)
        elif isinstance(statement, cst.If) and _is_version_test(statement.test, gates):
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


def gate_names(module: cst.Module) -> frozenset[str]:
    """Names that hold the outcome of a version check, so that `if NEW_AMP:` is one too:
    assigned a version test (`NEW_AMP = version.parse(torch.__version__) >= ...`,
    `PT24 = torch_ver >= (2, 4)`), or a constant in a version-gated branch or in a `try` whose
    `except ImportError:` sets the other value (`try: from torch.amp import GradScaler;
    HAS_AMP = True except ImportError: HAS_AMP = False`). Module-level statements only."""
    gates: set[str] = set()
    for statement in module.body:
        if isinstance(statement, cst.SimpleStatementLine):
            for name, value in _assignments(statement):
                # Literal tables (dicts, lists of settings) are never a check: not walked.
                if isinstance(value, _GATE_VALUES) and _is_version_test(value, gates):
                    gates.add(name)
        elif _tries_torch_import(statement) or (
            isinstance(statement, cst.If) and _is_version_test(statement.test, gates)
        ):
            gates.update(_flags_set(statement))
    return frozenset(gates)


# What a version check is written as: `a >= b`, `a and b`, `not a`, `parse(...)`, a name.
_GATE_VALUES = (
    cst.Comparison,
    cst.BooleanOperation,
    cst.UnaryOperation,
    cst.Call,
    cst.Name,
    cst.Attribute,
    cst.Subscript,
)


def _tries_torch_import(statement: cst.BaseStatement) -> bool:
    """`try: from torch.amp import GradScaler ... except ImportError:`; a `try` importing
    another package (`import apex`) tests that package, not the PyTorch version."""
    if not isinstance(statement, cst.Try) or not any(
        _catches_fallback(h) for h in statement.handlers
    ):
        return False
    for line in statement.body.body:
        if not isinstance(line, cst.SimpleStatementLine):
            continue
        for small in line.body:
            modules: list[cst.BaseExpression] = []
            if isinstance(small, cst.ImportFrom) and small.module is not None:
                modules = [] if small.relative else [small.module]
            elif isinstance(small, cst.Import):
                modules = [alias.name for alias in small.names]
            if any((dotted_name(m) or "").split(".", 1)[0] == "torch" for m in modules):
                return True
    return False


def _assignments(line: cst.SimpleStatementLine) -> list[tuple[str, cst.BaseExpression]]:
    found = []
    for small in line.body:
        if isinstance(small, cst.Assign) and len(small.targets) == 1:
            target = small.targets[0].target
            if isinstance(target, cst.Name):
                found.append((target.value, small.value))
        elif (
            isinstance(small, cst.AnnAssign)
            and isinstance(small.target, cst.Name)
            and small.value is not None
        ):
            found.append((small.target.value, small.value))
    return found


def _flags_set(statement: cst.BaseCompoundStatement) -> set[str]:
    """Names assigned True or False anywhere in the statement's blocks."""
    flags: set[str] = set()
    for node in _statements_in(statement):
        if isinstance(node, cst.SimpleStatementLine):
            for name, value in _assignments(node):
                if isinstance(value, cst.Name) and value.value in ("True", "False"):
                    flags.add(name)
    return flags


def _statements_in(statement: cst.BaseCompoundStatement) -> list[cst.BaseStatement]:
    found: list[cst.BaseStatement] = []
    stack: list[cst.CSTNode] = [statement]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.BaseStatement):
            found.append(node)
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseExpression)):
            continue
        stack.extend(child_nodes(node))
    return found


def _catches_fallback(handler: cst.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    caught = handler.type.elements if isinstance(handler.type, cst.Tuple) else None
    types = [e.value for e in caught] if caught is not None else [handler.type]
    return any((dotted_name(t) or "").rsplit(".", 1)[-1] in _FALLBACK_EXCEPTIONS for t in types)


def _is_version_test(test: cst.BaseExpression, gates: frozenset[str] | set[str]) -> bool:
    """The expression checks the PyTorch version or feature: an identifier naming a version
    (`torch.__version__`, `version.parse`, `TORCH_GE_2_4`, `is_torch_version(...)`), a gate
    name, or `hasattr`/`getattr`/`dir` on torch. Read from the identifiers, without
    generating the expression's code."""
    stack: list[cst.CSTNode] = [test]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name):
            if node.value in gates or _VERSION_NAME.search(node.value):
                return True
            continue
        if isinstance(node, cst.Attribute) and _VERSION_NAME.search(node.attr.value):
            return True
        if (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Name)
            and node.func.value in _FEATURE_TESTS
            and node.args
            and (dotted_name(node.args[0].value) or "").split(".", 1)[0] == "torch"
        ):
            return True
        stack.extend(child_nodes(node))
    return False


def _gated_expressions(
    statement: cst.BaseStatement, gates: frozenset[str]
) -> list[cst.BaseExpression]:
    """In the statement's own expressions (a simple statement, or a compound statement's
    header and decorators): conditional expressions on a version test, whole (`new() if
    TORCH_GE_2_4 else old()`), and the right side of an `or` after one
    (`getattr(torch.amp, "GradScaler", None) or torch.cuda.amp.GradScaler`)."""
    stack: list[cst.CSTNode] = list(statement_expressions(statement))
    if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
        stack.extend(statement.decorators)
    found: list[cst.BaseExpression] = []
    while stack:
        node = stack.pop()
        if isinstance(node, cst.IfExp) and _is_version_test(node.test, gates):
            found.append(node)
            continue
        if (
            isinstance(node, cst.BooleanOperation)
            and isinstance(node.operator, cst.Or)
            and _is_version_test(node.left, gates)
        ):
            found.append(node.right)
        stack.extend(child_nodes(node))
    return found


def _after_version_guard(
    parent: cst.Module | cst.BaseStatement, gates: frozenset[str]
) -> list[cst.BaseStatement]:
    """In each block directly under `parent`: the statements after a guard clause that
    returns the new API when a version test holds (`if hasattr(torch.amp, "GradScaler"):
    return torch.amp.GradScaler("cuda")`), which run only when it does not."""
    blocks: list[Sequence[cst.BaseStatement]] = []
    if isinstance(parent, cst.Module):
        blocks.append(parent.body)
    elif isinstance(parent, cst.BaseCompoundStatement):
        for child in child_nodes(parent):
            if isinstance(child, cst.IndentedBlock):
                blocks.append(child.body)
            elif isinstance(child, (cst.Else, cst.ExceptHandler, cst.Finally)) and isinstance(
                child.body, cst.IndentedBlock
            ):
                blocks.append(child.body.body)
    found: list[cst.BaseStatement] = []
    for block in blocks:
        for position, statement in enumerate(block):
            if (
                isinstance(statement, cst.If)
                and statement.orelse is None
                and _is_version_test(statement.test, gates)
                and _returns(statement.body)
                and _names_amp(statement.body)
            ):
                found.extend(block[position + 1 :])
                break
    return found


def _returns(body: cst.BaseSuite) -> bool:
    last = body.body[-1] if body.body else None
    if isinstance(last, cst.SimpleStatementLine):
        last = last.body[-1] if last.body else None
    return isinstance(last, cst.Return)


def _names_amp(node: cst.CSTNode) -> bool:
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name) and current.value in _AMP_NAMES:
            return True
        if isinstance(current, cst.Attribute) and current.attr.value in _AMP_NAMES:
            return True
        stack.extend(child_nodes(current))
    return False
