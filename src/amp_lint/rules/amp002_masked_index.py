"""AMP002 masked-index: index tensors whose values were computed in half precision."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from amp_lint.analysis.interpreter.frames import ExecutionContext
from amp_lint.analysis.syntax.outline import positional_arguments
from amp_lint.analysis.values.dtypes import BFLOAT16
from amp_lint.analysis.values.value import Value
from amp_lint.findings import Fix
from amp_lint.fixes.upcasts import upcast_fix
from amp_lint.rules.base import Report, Rule
from amp_lint.rules.common import UPCAST_FIX_SAFETY, brief, code, subscript_indices

# Calls that take an index tensor, and where it is (position, keyword).
_INDEX_METHODS = {
    "index_select": (1, "index"),
    "gather": (1, "index"),
    "take": (0, "index"),
    "take_along_dim": (0, "indices"),
}
_INDEX_FUNCTIONS = {
    "torch.index_select": (2, "index"),
    "torch.gather": (2, "index"),
    "torch.take": (1, "index"),
    "torch.nn.functional.embedding": (0, "input"),
}


class MaskedIndex(Rule):
    code = "AMP002"
    name = "masked-index"
    summary = (
        "Checks for indexing with integer indices that were computed in half precision, "
        "where large or fractional values round to the wrong integer."
    )
    why = """\
Boolean and advanced indexing of half tensors is **not** a crash risk, whatever blog posts
say: `x[mask]`, `x[idx]` and `x[mask] = 0` behave the same in float16, bfloat16 and
float32, so amp-lint does not flag them.

What does go wrong is an index whose *values* were computed in half precision, typically a
coordinate or bin scaled under autocast and then converted with `.long()`:
float16 represents integers exactly only up to 2048 (bfloat16 only up to 256), and both
round fractional values coarsely, so `(coords * width).long()` silently picks the wrong
pixel, bin or embedding row. No error is raised."""
    example = """\
import torch

head = torch.nn.Linear(256, 2).cuda()
with torch.autocast("cuda"):
    coords = head(features)  # float16
    idx = (coords * 4096).long()
    picked = table[idx]
"""
    fixed_example = """\
import torch

head = torch.nn.Linear(256, 2).cuda()
with torch.autocast("cuda"):
    coords = head(features)  # float16
    idx = (coords.float() * 4096).long()
    picked = table[idx]
"""
    fix_safety = (
        """\
The fix computes the index arithmetic in float32 (`.float()` on the half operands before
the conversion to integer). It is **unsafe**: it changes which indices are produced, which is
the point, but is a numerical change all the same. There is no fix when the half value is
converted directly (`h.long()`): the rounding happened when `h` was computed."""
        + UPCAST_FIX_SAFETY
    )
    known_limitations = """\
Only conversions that amp-lint can see (`.long()`, `.int()`, `.to(torch.long)` and friends
applied to a value known to be half precision) are followed, within a function and into
functions called under autocast.

The fix only moves the arithmetic to float32; it cannot undo rounding already present in the
half operands. A value that autocast produced (a layer's output) carries float16's 11 or
bfloat16's 8 significant bits: integers above 2048 (float16) or 256 (bfloat16), and fractions
scaled by large factors, are wrong before the index arithmetic starts. The runtime case shows
the fix restoring exact indices for coordinates up to 255; with coordinates up to 999, bfloat16
runs stayed wrong after the fix (we measured it while building the case). Produce such values in
float32 (an fp32 island around the layer) instead."""
    node_types = (cst.Subscript, cst.Call)

    def check_node(self, node: cst.CSTNode, ctx: ExecutionContext) -> Iterator[Report]:
        for index in self._indices(node, ctx):
            value = ctx.value(index)
            if value.integer_from is None or value.conversion is None:
                continue
            limit = "256" if value.integer_from.precision == BFLOAT16 else "2048"
            precision = value.integer_from.describe()
            origin = (
                f"converts a {precision} value to integers"
                if index is value.conversion
                else f"comes from `{code(value.conversion)}`, which converts a {precision} "
                "value to integers"
            )
            message = (
                f"index `{code(index)}` {origin}: integers above {limit} and fractional values "
                "round to the wrong index, silently; compute it in float32 (`.float()` before "
                "the arithmetic)"
            )
            summary = (
                f"index `{brief(index, 18)}` from {precision} rounds wrong above {limit} or when "
                "fractional; compute it in float32"
            )
            yield Report(index, message, self._fix(value, ctx), summary=summary)

    def _indices(self, node: cst.CSTNode, ctx: ExecutionContext) -> list[cst.BaseExpression]:
        if isinstance(node, cst.Subscript):
            return subscript_indices(node)
        assert isinstance(node, cst.Call)
        where = None
        qualified = ctx.qualified_name(node.func)
        if qualified in _INDEX_FUNCTIONS:
            where = _INDEX_FUNCTIONS[qualified]
        elif isinstance(node.func, cst.Attribute) and qualified is None:
            where = _INDEX_METHODS.get(node.func.attr.value)
        if where is None:
            return []
        position, keyword = where
        positional = positional_arguments(node)
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == keyword:
                return [arg.value]
        return [positional[position]] if position < len(positional) else []

    def _fix(self, value: Value, ctx: ExecutionContext) -> Fix | None:
        assert value.conversion is not None and isinstance(value.conversion.func, cst.Attribute)
        computed = value.conversion.func.value
        operands = _half_operands(computed, ctx)
        if not operands:
            return None
        return upcast_fix(
            "Compute the index in float32",
            [(operand, ctx.dtype(operand)) for operand in operands],
            ctx.facts.names,
            ctx.dtype,
            shared=bool(ctx.frame.chain),
        )


def _half_operands(node: cst.BaseExpression, ctx: ExecutionContext) -> list[cst.BaseExpression]:
    """The half-precision leaves of the arithmetic that produced an index; none when the
    index is a plain conversion of an already rounded value."""
    if (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and not node.args
        and node.func.attr.value in ("floor", "round", "ceil", "trunc")
    ):
        return _half_operands(node.func.value, ctx)
    if not isinstance(node, cst.BinaryOperation):
        return []
    return [
        side
        for side in (node.left, node.right)
        if isinstance(side, (cst.Name, cst.Attribute, cst.Subscript, cst.Call))
        and ctx.dtype(side).is_half
    ] + [
        leaf
        for side in (node.left, node.right)
        if isinstance(side, cst.BinaryOperation)
        for leaf in _half_operands(side, ctx)
    ]
