"""Reading calls of tensor ops the same way whichever spelling the code uses.

`x.masked_fill(m, v)`, `torch.masked_fill(x, m, v)` and `torch.Tensor.masked_fill(x, m, v)`
are one op with the tensor in a different place; `F.normalize(x, 2, -1, 1e-12)` and
`F.normalize(x, eps=1e-12)` pass the same argument. Rules that look at one argument of an op
read it through `op_call`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from amp_lint.analysis.interpreter.frames import ExecutionContext
from amp_lint.analysis.syntax.outline import child_nodes, positional_arguments

# Namespaces whose functions take the tensor as their first argument.
_FUNCTION_PREFIXES = ("torch.nn.functional.", "torch.Tensor.", "torch.")
_DIVISIONS = frozenset(["div", "divide", "true_divide"])


@dataclass(frozen=True)
class OpCall:
    """One call of a tensor op, with the tensor separated from the other arguments."""

    call: cst.Call
    op: str  # "masked_fill", "clamp", "normalize", ...
    tensor: cst.BaseExpression | None  # the receiver or the first argument (`input=`)
    # The arguments after the tensor, positional ones first, in the op's own order.
    positional: tuple[cst.BaseExpression, ...]
    keywords: dict[str, cst.BaseExpression]
    is_method: bool

    def argument(self, position: int, keyword: str) -> cst.BaseExpression | None:
        """The argument at `position` (counted after the tensor) or passed as `keyword`."""
        if keyword in self.keywords:
            return self.keywords[keyword]
        return self.positional[position] if position < len(self.positional) else None


def op_call(node: cst.CSTNode, ctx: ExecutionContext, ops: frozenset[str]) -> OpCall | None:
    """`node` as a call of one of `ops`: a tensor method (a receiver that is not a module or
    class such as `torch`) or a function of torch, torch.nn.functional or torch.Tensor."""
    if not isinstance(node, cst.Call):
        return None
    keywords = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
    positional = positional_arguments(node)
    qualified = ctx.qualified_name(node.func)
    if qualified is not None:
        for prefix in _FUNCTION_PREFIXES:
            if qualified.startswith(prefix):
                op = qualified[len(prefix) :]
                break
        else:
            return None
        if op not in ops:
            return None
        if positional:
            return OpCall(node, op, positional[0], tuple(positional[1:]), keywords, False)
        tensor = keywords.pop("input", None) or keywords.pop("self", None)
        return OpCall(node, op, tensor, (), keywords, False)
    func = node.func
    if isinstance(func, cst.Attribute) and func.attr.value in ops:
        return OpCall(node, func.attr.value, func.value, tuple(positional), keywords, True)
    return None


def denominators(statement: cst.CSTNode, ctx: ExecutionContext) -> set[int]:
    """Identities of the expressions the statement divides by: `a / d`, `torch.div(a, d)`,
    `a.div(d)` (AMP004 reports epsilon guards written there)."""
    found: set[int] = set()
    for node in _expressions(statement):
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Divide):
            found.add(id(node.right))
        elif isinstance(node, cst.Call):
            positional = positional_arguments(node)
            qualified = ctx.qualified_name(node.func)
            if qualified is not None:
                if qualified.rsplit(".", 1)[-1] in _DIVISIONS and len(positional) >= 2:
                    found.add(id(positional[1]))
            elif (
                isinstance(node.func, cst.Attribute)
                and node.func.attr.value in _DIVISIONS
                and positional
            ):
                found.add(id(positional[0]))
    return found


def consumer(node: cst.BaseExpression, statement: cst.CSTNode, ctx: ExecutionContext) -> str | None:
    """The op that takes `node` as its tensor (`torch.log(node)`, `node.sqrt()`), if any."""
    for candidate in _expressions(statement):
        if not isinstance(candidate, cst.Call):
            continue
        func = candidate.func
        qualified = ctx.qualified_name(func)
        if qualified is not None:
            positional = positional_arguments(candidate)
            if positional and positional[0] is node:
                return qualified.rsplit(".", 1)[-1]
        elif isinstance(func, cst.Attribute) and func.value is node:
            return func.attr.value
    return None


def _expressions(statement: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The nodes of one statement, without descending into the bodies of compound statements
    (a `with` or `if` statement's header only)."""
    stack: list[cst.CSTNode] = [statement]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(
            child
            for child in child_nodes(current)
            if not isinstance(child, (cst.BaseSuite, cst.BaseStatement))
        )
