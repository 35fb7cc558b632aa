"""AMP001 masked-assign: index assignment into half tensors that raises or stores ±inf."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from amp_lint.analysis.interpreter.frames import ExecutionContext
from amp_lint.analysis.values.dtypes import FLOAT32, DType
from amp_lint.findings import Edit, Fix, FixSafety
from amp_lint.fixes.builders import finfo_limit, method_call, to_dtype_of
from amp_lint.rules.base import Report, Rule
from amp_lint.rules.common import (
    brief,
    code,
    half_phrase,
    is_tensor_index,
    origin_brief,
    origin_intro,
    outside_float16_range,
    passed_in,
    repeatable,
    report_at_origin,
    subscript_indices,
)


class MaskedAssign(Rule):
    code = "AMP001"
    name = "masked-assign"
    summary = (
        "Checks for index assignments `x[m] = v` that fail because `x` is half precision under "
        "autocast: a value tensor of another dtype, a constant outside the float16 range, or a "
        "write through a `.float()` alias."
    )
    why = """\
Autocast casts the inputs of listed ops, but an index assignment is the in-place
`index_put_`, which autocast never touches. So:

* `x[mask] = y` where `x` is float16 (an autocast output) and `y` is float32 (or the
  reverse: a float32 buffer receiving an autocast output) raises
  `RuntimeError: Index put requires the source and destination dtypes match, got Half for
  the destination and Float for the source.` Writes with slices or Python ints copy with a
  cast and are fine; a boolean mask or an index tensor is not.
* `x[mask] = -1e9` into a float16 tensor silently stores `-inf` (|c| > 65504), and a later
  softmax over a fully masked row turns into NaN.
* `y = x.float()` returns `x` itself when `x` is already float32 (autocast disabled), so
  `y[mask] = 0` then writes into `x` too, and autograd fails with "one of the variables
  needed for gradient computation has been modified by an inplace operation".

A plain in-range scalar write (`x[mask] = 0`) is fine in half precision and not flagged."""
    example = """\
import torch

with torch.autocast("cuda"):
    scores = q @ k.transpose(-2, -1)  # float16
    scores[mask] = bias[mask]  # bias is float32
    scores[pad] = -1e9
"""
    fixed_example = """\
import torch

with torch.autocast("cuda"):
    scores = q @ k.transpose(-2, -1)  # float16
    scores[mask] = bias[mask].to(scores.dtype)
    scores[pad] = torch.finfo(scores.dtype).min
"""
    fix_safety = """\
* Casting the value with `.to(x.dtype)` is **safe**: it does nothing when the dtypes
  already match, and the original raises when they do not.
* Replacing an out-of-range constant with `torch.finfo(x.dtype).min`/`.max` is **unsafe**:
  in float32 runs it changes the stored value (e.g. -1e9 becomes -3.4e38).
* Adding `.clone()` to `y = x.float()` is **unsafe**: it stops in-place writes from reaching
  `x`, which changes what `x` holds when autocast is off."""
    known_limitations = """\
The value's dtype must be known: a function parameter of unknown dtype is not flagged. A
0-dimensional value tensor of another dtype is accepted by PyTorch like a scalar, which
static analysis cannot tell apart from a 1-element one."""
    node_types = (cst.Assign,)
    accepts_assumptions = True

    def check_node(self, node: cst.CSTNode, ctx: ExecutionContext) -> Iterator[Report]:
        assert isinstance(node, cst.Assign)
        for target in node.targets:
            if isinstance(target.target, cst.Subscript):
                report = self._check_write(target.target, node.value, ctx)
                if report is not None:
                    yield report

    def _check_write(
        self, target: cst.Subscript, value: cst.BaseExpression, ctx: ExecutionContext
    ) -> Report | None:
        destination = target.value
        dest_dtype = ctx.dtype(destination)
        written = ctx.value(value)
        if dest_dtype.may_be_float16 and outside_float16_range(written.constant):
            return self._constant_report(target, destination, value, dest_dtype, ctx)
        tensor_index = any(is_tensor_index(i, ctx) for i in subscript_indices(target))
        if tensor_index and _mismatched(dest_dtype, written.dtype):
            return self._mismatch_report(target, destination, value, dest_dtype, written.dtype)
        return self._alias_report(target, destination, ctx)

    def _constant_report(
        self,
        target: cst.Subscript,
        destination: cst.BaseExpression,
        value: cst.BaseExpression,
        dest_dtype: DType,
        ctx: ExecutionContext,
    ) -> Report:
        constant = ctx.constant(value) or 0.0
        sign = "-inf" if constant < 0 else "inf"
        which = "min" if constant < 0 else "max"
        origin = passed_in(value, ctx)
        if origin is not None:
            message = (
                f"{origin_intro(origin, target, ctx)} as the value stored into a "
                f"{half_phrase(dest_dtype)} tensor, outside the float16 range (±65504): it "
                f"silently becomes {sign}; pass `torch.finfo(dtype).{which}` of that tensor's "
                "dtype instead"
            )
            summary = (
                f"{origin_brief(origin)} is stored into a float16 tensor: it silently becomes "
                f"{sign}; pass `torch.finfo(dtype).{which}`"
            )
            return report_at_origin(origin, target, message, summary)
        message = (
            f"`{code(target)} = {code(value)}` stores a constant outside the float16 range "
            f"(±65504) into a {half_phrase(dest_dtype)} tensor: it silently becomes {sign}; "
            f"use `torch.finfo({code(destination)}.dtype).{'min' if constant < 0 else 'max'}`"
        )
        summary = (
            f"`{brief(f'{code(target)} = {code(value)}')}` silently stores {sign} in float16; "
            f"use `torch.finfo({brief(destination, 20)}.dtype).{which}`"
        )
        fix = None
        if repeatable(destination):
            limit, needs_torch = finfo_limit(destination, constant < 0, ctx.facts.names)
            fix = Fix(
                FixSafety.UNSAFE,
                "Use the dtype's own limit",
                edits=(Edit(value, limit),),
                imports=("torch",) if needs_torch else (),
            )
        return Report(target, message, fix, summary=summary)

    def _mismatch_report(
        self,
        target: cst.Subscript,
        destination: cst.BaseExpression,
        value: cst.BaseExpression,
        dest_dtype: DType,
        value_dtype: DType,
    ) -> Report:
        message = (
            f'`{code(target)} = {code(value)}` raises "Index put requires the source and '
            f"destination dtypes match, got {dest_dtype.torch_name()} for the destination and "
            f'{value_dtype.torch_name()} for the source" (index assignment is never autocast); '
            f"cast the value with `.to({code(destination)}.dtype)`"
        )
        summary = (
            f'`{brief(f"{code(target)} = {code(value)}", 25)}` raises "Index put requires '
            f'... dtypes match"; use `.to({brief(destination, 20)}.dtype)`'
        )
        fix = None
        if repeatable(destination):
            fix = Fix(
                FixSafety.SAFE,
                "Cast the value to the destination's dtype",
                edits=(Edit(value, to_dtype_of(value, destination)),),
            )
        return Report(target, message, fix, summary=summary)

    def _alias_report(
        self, target: cst.Subscript, destination: cst.BaseExpression, ctx: ExecutionContext
    ) -> Report | None:
        written_into = ctx.value(destination)
        conversion = written_into.conversion
        if conversion is None or written_into.dtype != FLOAT32:
            return None
        assert isinstance(conversion.func, cst.Attribute)
        source = conversion.func.value
        if not repeatable(source) or not ctx.dtype(source).is_half:
            return None
        message = (
            f"`{code(destination)}` comes from `{code(conversion)}`, which returns "
            f"`{code(source)}` itself when it is already float32 (autocast off), so "
            f"`{code(target)} = ...` also writes into `{code(source)}` and autograd raises "
            '"one of the variables needed for gradient computation has been modified by an '
            'inplace operation"; add `.clone()` to the conversion'
        )
        summary = (
            f"`{brief(target, 20)} = ...` also writes `{brief(source, 15)}` via "
            f'`{brief(conversion, 20)}`: "...modified by an inplace operation"; add `.clone()`'
        )
        fix = Fix(
            FixSafety.UNSAFE,
            "Clone after the conversion",
            edits=(Edit(conversion, method_call(conversion, "clone")),),
        )
        return Report(target, message, fix, summary=summary)


def _mismatched(destination: DType, value: DType) -> bool:
    """Two known floating dtypes that differ, at least one of them half."""
    if not (destination.is_floating_tensor and value.is_floating_tensor):
        return False
    if not (destination.is_half or value.is_half):
        return False
    if destination.is_half and value.is_half:
        known = destination.precision and value.precision
        return bool(known) and destination.precision != value.precision
    return destination.kind != value.kind
