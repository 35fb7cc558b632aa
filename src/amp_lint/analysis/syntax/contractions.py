"""Contractions read from syntax: einsum equations, and the axes a matmul sums over.

The sums over a sequence axis hidden in linear attention are read from these in
sequence_sums.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from amp_lint.analysis.interpreter.frames import ExecutionContext
from amp_lint.analysis.syntax.outline import positional_arguments
from amp_lint.analysis.values.literals import string_literal

_MATMUL_FUNCTIONS = frozenset(["torch.matmul", "torch.bmm", "torch.mm"])
_MATMUL_METHODS = frozenset(["matmul", "bmm", "mm"])
_EINSUM_FUNCTIONS = frozenset(["torch.einsum", "torch.functional.einsum"])


@dataclass(frozen=True)
class Equation:
    """An einsum equation: each operand's indices, and whether it starts with `...`."""

    operands: tuple[str, ...]
    ellipsis: tuple[bool, ...]
    output: str

    @property
    def contracted(self) -> frozenset[str]:
        return frozenset("".join(self.operands)) - frozenset(self.output)


def parse_equation(text: str | None) -> Equation | None:
    """`"...nd,...ne->...de"`; None for implicit outputs, repeated or non-letter indices,
    and ellipses anywhere but the start."""
    if text is None or "->" not in text:
        return None
    inputs, output = text.replace(" ", "").split("->", 1)
    operands: list[str] = []
    ellipsis: list[bool] = []
    for part in inputs.split(","):
        leading = part.startswith("...")
        part = part[3:] if leading else part
        if not part.isalpha() or len(set(part)) != len(part):
            return None
        operands.append(part)
        ellipsis.append(leading)
    output = output[3:] if output.startswith("...") else output
    if not output.isalpha() and output != "":
        return None
    return Equation(tuple(operands), tuple(ellipsis), output)


@dataclass(frozen=True)
class Contraction:
    """A product `operands` computed by `node` (`a @ b`, `torch.einsum(eq, a, b)`)."""

    node: cst.BaseExpression
    operands: tuple[cst.BaseExpression, ...]
    equation: Equation | None  # None for a matmul


def contraction(node: cst.CSTNode, ctx: ExecutionContext) -> Contraction | None:
    """`node` as a two-operand matmul or einsum."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.MatrixMultiply):
        return Contraction(node, (node.left, node.right), None)
    if not isinstance(node, cst.Call) or any(a.keyword is not None or a.star for a in node.args):
        return None
    positional = positional_arguments(node)
    qualified = ctx.qualified_name(node.func)
    if qualified in _MATMUL_FUNCTIONS and len(positional) == 2:
        return Contraction(node, (positional[0], positional[1]), None)
    if qualified in _EINSUM_FUNCTIONS and len(positional) == 3:
        equation = parse_equation(string_literal(positional[0]))
        if equation is None or len(equation.operands) != 2:
            return None
        return Contraction(node, (positional[1], positional[2]), equation)
    func = node.func
    if (
        qualified is None
        and isinstance(func, cst.Attribute)
        and func.attr.value in _MATMUL_METHODS
        and len(positional) == 1
    ):
        return Contraction(node, (func.value, positional[0]), None)
    return None
