"""Code that runs only for one precision: the body of `if mixed_precision == "bf16":`,
`elif args.bf16:` or `if dtype == torch.bfloat16:`. A GradScaler made there serves bfloat16
training alone (accelerate's `Accelerator.__init__` did this until 0.x)."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from amp_lint.analysis.syntax.names import ModuleNames, dotted_name
from amp_lint.analysis.syntax.outline import calls_in, walk_statements
from amp_lint.analysis.values.dtypes import dtype_from_torch_name
from amp_lint.analysis.values.literals import string_literal

_BF16_STRINGS = frozenset(["bf16", "bfloat16", "bf16-mixed", "bf16-true", "bf16_mixed"])
_BF16_FLAGS = frozenset(["bf16", "use_bf16", "is_bf16", "enable_bf16", "bf16_enabled"])


def bfloat16_only_calls(module: cst.Module, names: ModuleNames) -> dict[int, cst.BaseExpression]:
    """id(call) -> the test of the branch, taken only for bfloat16, that makes the call."""
    found: dict[int, cst.BaseExpression] = {}
    for statement in walk_statements(module):
        if not isinstance(statement, cst.If):
            continue
        if _is_bfloat16_test(statement.test, names):
            for inner in _statements_of(statement.body):
                for call in _calls(inner):
                    found.setdefault(id(call), statement.test)
    return found


def _is_bfloat16_test(test: cst.BaseExpression, names: ModuleNames) -> bool:
    if isinstance(test, cst.BooleanOperation):
        if isinstance(test.operator, cst.And):
            return _is_bfloat16_test(test.left, names) or _is_bfloat16_test(test.right, names)
        return False
    if isinstance(test, cst.Comparison):
        if len(test.comparisons) != 1 or not isinstance(test.comparisons[0].operator, cst.Equal):
            return False
        return any(
            _means_bfloat16(side, names) for side in (test.left, test.comparisons[0].comparator)
        )
    name = dotted_name(test)
    return name is not None and name.rsplit(".", 1)[-1].lower() in _BF16_FLAGS


def _means_bfloat16(node: cst.BaseExpression, names: ModuleNames) -> bool:
    if isinstance(node, cst.SimpleString):
        text = string_literal(node)
        return text is not None and text.lower() in _BF16_STRINGS
    dtype = dtype_from_torch_name(names.qualified_name(node))
    return dtype is not None and dtype.is_half and not dtype.may_be_float16


def _statements_of(body: cst.BaseSuite) -> Iterator[cst.CSTNode]:
    """The statements of a branch body, nested blocks included (not its `else`)."""
    if isinstance(body, cst.SimpleStatementSuite):
        yield from body.body
        return
    assert isinstance(body, cst.IndentedBlock)
    lines = [
        s for s in body.body if isinstance(s, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
    ]
    yield from walk_statements(cst.Module(body=lines))


def _calls(statement: cst.CSTNode) -> Iterator[cst.Call]:
    if isinstance(statement, cst.SimpleStatementLine):
        for small in statement.body:
            yield from calls_in(small)
    elif isinstance(statement, cst.BaseSmallStatement):
        yield from calls_in(statement)
