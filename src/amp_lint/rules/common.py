"""Small facts and phrases several rules share."""

from __future__ import annotations

import math

import libcst as cst

from amp_lint.analysis.interpreter.frames import ExecutionContext
from amp_lint.analysis.syntax.names import dotted_name
from amp_lint.analysis.syntax.outline import source_text
from amp_lint.analysis.values.dtypes import DType
from amp_lint.analysis.values.half_overflow import FLOAT16_MAX
from amp_lint.analysis.values.value import Origin
from amp_lint.rules.base import Report

# The smallest float16 subnormal is 2**-24 ≈ 5.96e-8; anything below half of it rounds to 0.
FLOAT16_ROUNDS_TO_ZERO_BELOW = 2.0**-25
# 1/eps above the float16 maximum: dividing by eps alone already overflows.
FLOAT16_OVERFLOWING_EPS_BELOW = 1.0 / FLOAT16_MAX


def half_phrase(dtype: DType) -> str:
    """ "float16", or a hedge when the autocast dtype is not known."""
    if dtype.is_float16:
        return "float16"
    return "float16 (when the autocast dtype is float16)"


def half_brief(dtype: DType) -> str:
    """`half_phrase` for summaries: the hedge in fewer words."""
    return "float16" if dtype.is_float16 else "float16 (if autocast is)"


def outside_float16_range(constant: float | None) -> bool:
    return constant is not None and math.isfinite(constant) and abs(constant) > FLOAT16_MAX


def code(node: cst.CSTNode) -> str:
    """The node as written, on one line (messages are one line), shortened."""
    return source_text(node)


# Summaries quote code shorter than messages do: a summary is meant to fit, with its path,
# in a line of about 160 columns.
BRIEF_LIMIT = 30


def brief(code_or_node: cst.CSTNode | str, limit: int = BRIEF_LIMIT) -> str:
    """Code for a summary: on one line and at most `limit` characters ("x.masked_fill(m...")."""
    if not isinstance(code_or_node, str):
        return source_text(code_or_node, limit)
    text = " ".join(code_or_node.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def repeatable(node: cst.BaseExpression) -> bool:
    """An expression a fix may write twice without evaluating anything twice."""
    return dotted_name(node) is not None


def is_tensor_index(index: cst.BaseExpression, ctx: ExecutionContext) -> bool:
    """A boolean mask or integer index tensor: indexing that goes through index_put_/index,
    unlike slices and Python ints, which take views and copy with a cast."""
    dtype = ctx.dtype(index)
    if dtype.is_known_tensor and not dtype.is_floating_tensor:
        return True
    name = dotted_name(index)
    return name is not None and "mask" in name.rsplit(".", 1)[-1].lower()


def subscript_indices(node: cst.Subscript) -> list[cst.BaseExpression]:
    return [element.slice.value for element in node.slice if isinstance(element.slice, cst.Index)]


def passed_in(node: cst.BaseExpression, ctx: ExecutionContext) -> Origin | None:
    """The caller's argument a constant came from, when it was passed into this function
    (not written here, nor a parameter's default)."""
    return ctx.value(node).origin


def origin_intro(origin: Origin, sink: cst.CSTNode, ctx: ExecutionContext) -> str:
    """ "`-1e20` passed to `replace_masked_values` reaches `x.masked_fill(m, v)` (a.py:9)"."""
    return (
        f"`{origin.text}` passed to `{origin.callee}` reaches `{code(sink)}` "
        f"({ctx.facts.path}:{ctx.facts.line_of(sink)})"
    )


def quoted_error(error: str, limit: int = 45) -> str:
    """A runtime error's text for a summary: its start, as PyTorch words it, in quotes."""
    return f'"{brief(error, limit)}"'


def origin_brief(origin: Origin) -> str:
    """ "`-1e20` passed to `replace_masked_values`", for summaries."""
    return f"`{brief(origin.text, 15)}` passed to `{brief(origin.callee, 20)}`"


def report_at_origin(origin: Origin, sink: cst.CSTNode, message: str, summary: str) -> Report:
    """A report placed where the constant was passed, which is where it must be fixed; no
    fix is offered there (the right value depends on the tensor the callee fills)."""
    if origin.node is not None:
        return Report(origin.node, message, summary=summary)
    return Report(sink, message, elsewhere=origin, summary=summary)


def written_tensor(node: cst.BaseExpression) -> cst.BaseExpression:
    """The tensor an expression is: `x` for `x.zero_()` or `x.fill_(0).t_()` (in-place
    methods return their receiver), for naming its dtype in advice and fixes."""
    while (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value.endswith("_")
        and not node.func.attr.value.startswith("_")
    ):
        node = node.func.value
    return node


# The fix-safety paragraph of every rule whose fix upcasts with fixes/upcasts.py.
UPCAST_FIX_SAFETY = """

Library code may receive float64, which autocast leaves alone, and `.float()` would cast it
down. So `.float()` is written only on a value known to be half (not resting on library mode's
assumption) or float32; a value that may be float64 (autocast made it half from an input of
unknown dtype) gets `x.to(torch.promote_types(x.dtype, torch.float32))` on each of its half
names, which keeps float64, and no fix when it holds a matmul (autocast would cast the upcast
back). A value known to be float64 is left as it is. `tests/test_fix_runtime.py` runs each fix
in float32 and float64."""
