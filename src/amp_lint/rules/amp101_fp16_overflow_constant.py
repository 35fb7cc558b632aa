"""AMP101 fp16-overflow-constant: fills, clamps and `where` with constants outside the float16
range on half-precision tensors."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from amp_lint.analysis.interpreter.frames import ExecutionContext
from amp_lint.analysis.syntax.naming import name_words
from amp_lint.analysis.syntax.outline import dotted_name
from amp_lint.analysis.syntax.tensor_op_calls import OpCall, op_call
from amp_lint.analysis.values.half_overflow import (
    CHECKED_FILLS,
    CLAMPS,
    FILL_WORDS,
    Overflow,
    constant_overflow,
    dtype_argument,
)
from amp_lint.findings import Edit, Fix, FixSafety
from amp_lint.fixes.builders import finfo_limit, torch_name
from amp_lint.rules.base import Report, Rule
from amp_lint.rules.common import (
    brief,
    code,
    half_phrase,
    origin_brief,
    origin_intro,
    passed_in,
    repeatable,
    report_at_origin,
)

_OPS = frozenset([*CHECKED_FILLS, *CLAMPS, "full", "where"])


class Fp16OverflowConstant(Rule):
    code = "AMP101"
    name = "fp16-overflow-constant"
    summary = (
        "Checks for `masked_fill`, `fill_`, `full`, `index_fill`, `clamp`, `F.threshold` and "
        "`torch.where` given a constant outside the float16 range (`-1e9`, "
        "`torch.finfo(torch.float32).min`) for a tensor that is float16 under autocast."
    )
    why = """\
Under float16 autocast the output of a matmul, linear or conv is float16, whose largest
finite value is 65504. The constants written to mean "minus infinity" in float32 code
(`-1e9`, `-1e10`, `float(2**30)`, `torch.finfo(torch.float32).min`) do not fit:

* `masked_fill(_)`, `fill_`, `index_fill(_)`, `torch.full`/`full_like`/`new_full` and the
  `value` of `F.threshold` convert the constant with an overflow check, on CPU and CUDA:
  `RuntimeError: value cannot be converted to type c10::Half without overflow`. The classic
  case is an attention mask, `scores.masked_fill(mask, -1e9)` after `q @ k.transpose(-2, -1)`.
* `torch.where(mask, x, -1e9)` raises nothing: the constant silently becomes `-inf`, and a
  softmax over a row that is entirely masked is then NaN.
* `clamp`/`clip`/`clamp_min`/`clamp_max` raise the same error on CPU. On CUDA the bounds are
  compared in float32, so a bound beyond the range on its own side does nothing, and one on
  the other side (`clamp(min=1e5)`) turns every value into inf.

bfloat16 has float32's exponent range and holds `-1e9`, so bfloat16 autocast is not flagged
for these; but `torch.finfo(torch.float32).min` (-3.4028e38) is beyond the largest bfloat16
(3.3895e38) and raises there too (`c10::BFloat16`), so it is flagged for any half tensor.
`float('-inf')` and `torch.finfo(x.dtype).min` are always representable."""
    example = """\
import torch

with torch.autocast("cuda"):
    scores = q @ k.transpose(-2, -1)  # float16
    scores = scores.masked_fill(pad, -1e9)
    probs = scores.softmax(-1)
"""
    fixed_example = """\
import torch

with torch.autocast("cuda"):
    scores = q @ k.transpose(-2, -1)  # float16
    scores = scores.masked_fill(pad, torch.finfo(scores.dtype).min)
    probs = scores.softmax(-1)
"""
    fix_safety = """\
The fix replaces the constant with the filled tensor's own limit,
`torch.finfo(x.dtype).min` (or `.max`; `torch.finfo(dtype)` for `torch.full(..., dtype=dtype)`).
It is **unsafe**: when the code runs in float32 the value changes (-1e9 becomes -3.4e38),
which changes results that depend on it, e.g. a clamp bound or `finfo.min + bias`. No fix
is offered when the tensor is not a plain name (it would be written twice)."""
    known_limitations = """\
The tensor's dtype must be known to be half precision: a function parameter of unknown
dtype is not flagged. Constants held in 0-dimensional tensors (`torch.tensor(-1e9)`) are
not followed. Index assignment `x[m] = -1e9` is AMP001's. The `threshold` argument of
`F.threshold` (checked on CUDA only) and `nn.Threshold` modules are not checked. A helper of
a library that is not linted is read from its name: one named for masking or filling
(`replace_masked_values`, `mask_logits`) given a float16 tensor and a constant beyond the
float16 range is reported, since it usually fills with it (allennlp's did); a helper that
uses the constant otherwise gives a false report there."""
    node_types = (cst.Call,)
    accepts_assumptions = True

    def check_node(self, node: cst.CSTNode, ctx: ExecutionContext) -> Iterator[Report]:
        call = op_call(node, ctx, _OPS)
        if call is None:
            if isinstance(node, cst.Call):
                report = _opaque_mask_helper(node, ctx)
                if report is not None:
                    yield report
            return
        if call.op == "where":
            yield from self._where(call, ctx)
        elif call.op in CLAMPS:
            yield from self._clamp(call, ctx)
        else:
            report = self._fill(call, ctx)
            if report is not None:
                yield report

    # --- fills that raise ------------------------------------------------------------------

    def _fill(self, call: OpCall, ctx: ExecutionContext) -> Report | None:
        if call.op == "full":
            if call.is_method:
                return None
            value = call.argument(0, "fill_value")  # after the size
            reference = None
        else:
            position, keyword = CHECKED_FILLS[call.op]
            value = call.argument(position, keyword)
            reference = call.tensor
        dtype_expr = call.keywords.get("dtype")
        if dtype_expr is not None:
            dtype = dtype_argument(dtype_expr, ctx)
        elif reference is not None:
            dtype = ctx.dtype(reference)
        else:
            return None
        overflow = constant_overflow(value, dtype, ctx)
        if value is None or overflow is None:
            return None
        origin = passed_in(value, ctx)
        if origin is not None:
            message = (
                f"{origin_intro(origin, call.call, ctx)} as the value to fill a "
                f"{_tensor_phrase(overflow)} tensor with, {overflow.range_text}: it raises "
                f"{overflow.error}; pass `torch.finfo(dtype).{overflow.limit}` of that "
                "tensor's dtype instead"
            )
            summary = (
                f"{origin_brief(origin)} raises {overflow.brief_error}; pass "
                f"`torch.finfo(dtype).{overflow.limit}`"
            )
            return report_at_origin(origin, call.call, message, summary)
        message = (
            f"`{code(call.call)}` fills a {_tensor_phrase(overflow)} tensor with "
            f"{overflow.constant:.3g}, {overflow.range_text}: it raises {overflow.error}; "
            f"{_advice(reference, dtype_expr, overflow)}"
        )
        summary = (
            f"`{brief(call.call, 20)}` raises {overflow.brief_error}; "
            f"{_advice(reference, dtype_expr, overflow, briefly=True)}"
        )
        fix = _fix(value, reference, dtype_expr, overflow, ctx)
        return Report(call.call, message, fix, summary=summary)

    # --- clamps ----------------------------------------------------------------------------

    def _clamp(self, call: OpCall, ctx: ExecutionContext) -> Iterator[Report]:
        tensor = call.tensor
        if tensor is None:
            return
        dtype = ctx.dtype(tensor)
        region = ctx.active_region
        device = region.device if region is not None else None
        for position, keyword in CLAMPS[call.op]:
            bound = call.argument(position, keyword)
            overflow = constant_overflow(bound, dtype, ctx)
            if bound is None or overflow is None:
                continue
            # CUDA compares in float32 and casts the result: a lower bound above the range
            # (or an upper bound below it) gives ±inf; a bound beyond it on its own side is
            # a no-op there.
            pulls_out = (keyword == "min") == (overflow.constant > 0)
            if device == "cuda":
                if not (overflow.is_float16 and pulls_out):
                    continue
                sign = "inf" if overflow.constant > 0 else "-inf"
                what = f"every value becomes {sign} on CUDA"
                what_briefly = what
            else:
                what = f"it raises {overflow.error} on CPU"
                what_briefly = f"raises {overflow.brief_error} on CPU"
                if device == "cpu":
                    pass
                elif pulls_out and overflow.is_float16:
                    what += " (on CUDA every value becomes inf)"
                else:
                    what += " (on CUDA it does nothing)"
            origin = passed_in(bound, ctx)
            if origin is not None:
                message = (
                    f"{origin_intro(origin, call.call, ctx)} as the {keyword} bound of a clamp "
                    f"of a {_tensor_phrase(overflow)} tensor, {overflow.range_text}: {what}; "
                    f"pass `torch.finfo(dtype).{overflow.limit}` of that tensor's dtype instead"
                )
                summary = (
                    f"{origin_brief(origin)} as a clamp bound {what_briefly}; pass "
                    f"`torch.finfo(dtype).{overflow.limit}`"
                )
                yield report_at_origin(origin, call.call, message, summary)
                continue
            message = (
                f"`{code(call.call)}` clamps a {_tensor_phrase(overflow)} tensor to "
                f"{keyword}={overflow.constant:.3g}, {overflow.range_text}: {what}; "
                f"{_advice(tensor, None, overflow)}"
            )
            summary = (
                f"`{brief(call.call, 20)}`: {what_briefly}; {_advice(tensor, None, overflow, True)}"
            )
            yield Report(bound, message, _fix(bound, tensor, None, overflow, ctx), summary=summary)

    # --- where: silently ±inf --------------------------------------------------------------

    def _where(self, call: OpCall, ctx: ExecutionContext) -> Iterator[Report]:
        if call.is_method:
            pairs = [(call.argument(1, "other"), call.tensor)]
        else:
            first, second = call.argument(0, "input"), call.argument(1, "other")
            pairs = [(first, second), (second, first)]
        result = ctx.dtype(call.call)
        for constant_node, tensor in pairs:
            if constant_node is None or tensor is None:
                continue
            if not ctx.dtype(tensor).is_half:
                continue
            overflow = constant_overflow(constant_node, result, ctx)
            if overflow is None:
                continue
            sign = "-inf" if overflow.constant < 0 else "inf"
            origin = passed_in(constant_node, ctx)
            if origin is not None:
                message = (
                    f"{origin_intro(origin, call.call, ctx)}, mixed into a "
                    f"{_tensor_phrase(overflow)} tensor, {overflow.range_text}: it silently "
                    f"becomes {sign}; pass `torch.finfo(dtype).{overflow.limit}` of that "
                    "tensor's dtype instead"
                )
                summary = (
                    f"{origin_brief(origin)} silently becomes {sign} in {overflow.precision}; "
                    f"pass `torch.finfo(dtype).{overflow.limit}`"
                )
                yield report_at_origin(origin, call.call, message, summary)
                continue
            message = (
                f"`{code(call.call)}` mixes {overflow.constant:.3g} into a "
                f"{_tensor_phrase(overflow)} tensor, {overflow.range_text}: it silently "
                f"becomes {sign} (a softmax over a fully masked row is then NaN); "
                f"{_advice(tensor, None, overflow)}"
            )
            summary = (
                f"`{brief(call.call)}`: {overflow.constant:.3g} silently becomes {sign} in "
                f"{overflow.precision}; {_advice(tensor, None, overflow, briefly=True)}"
            )
            fix = _fix(constant_node, tensor, None, overflow, ctx)
            yield Report(constant_node, message, fix, summary=summary)


def _opaque_mask_helper(call: cst.Call, ctx: ExecutionContext) -> Report | None:
    """`util.replace_masked_values(scores, mask, -1e7)`: a helper from a library amp-lint
    does not lint, named for masking, given a float16 tensor and a constant beyond float16's
    range; what it does with them is read from its name."""
    name = dotted_name(call.func)
    if name is None or not name_words(name) & FILL_WORDS:
        return None
    values = [arg.value for arg in call.args if arg.star == ""]
    tensors = [v for v in values if ctx.dtype(v).is_half]
    if not tensors or not ctx.is_opaque_call(call):
        return None
    for value in values:
        overflow = constant_overflow(value, ctx.dtype(tensors[0]), ctx)
        if overflow is None or not overflow.is_float16 or value is tensors[0]:
            continue
        helper = name.rsplit(".", 1)[-1]
        message = (
            f"`{code(call)}` passes {overflow.constant:.3g}, {overflow.range_text}, with a "
            f"{_tensor_phrase(overflow)} tensor to `{helper}`, which amp-lint cannot see "
            f"into: if it fills the tensor with it, as its name says, it raises "
            f"{overflow.error}; {_advice(tensors[0], None, overflow)}"
        )
        summary = (
            f"`{brief(call, 22)}` likely raises {overflow.brief_error}; "
            f"{_advice(tensors[0], None, overflow, briefly=True)}"
        )
        fix = _fix(value, tensors[0], None, overflow, ctx)
        return Report(call, message, fix, summary=summary)
    return None


def _tensor_phrase(overflow: Overflow) -> str:
    return half_phrase(overflow.dtype) if overflow.is_float16 else overflow.dtype.describe()


def _advice(
    reference: cst.BaseExpression | None,
    dtype_expr: cst.BaseExpression | None,
    overflow: Overflow,
    briefly: bool = False,
) -> str:

    def quoted(node: cst.CSTNode) -> str:
        return brief(node, 10) if briefly else code(node)

    if dtype_expr is not None:
        what = f"torch.finfo({quoted(dtype_expr)})"
    elif reference is not None:
        what = f"torch.finfo({quoted(reference)}.dtype)"
    else:
        what = "torch.finfo(<dtype>)"
    return f"use `{what}.{overflow.limit}`"


def _fix(
    value: cst.BaseExpression,
    reference: cst.BaseExpression | None,
    dtype_expr: cst.BaseExpression | None,
    overflow: Overflow,
    ctx: ExecutionContext,
) -> Fix | None:
    negative = overflow.constant < 0
    if dtype_expr is not None:
        if not repeatable(dtype_expr):
            return None
        torch, needs_torch = torch_name(ctx.facts.names)
        dtype_code = cst.Module([]).code_for_node(dtype_expr)
        limit_name = "min" if negative else "max"
        limit = cst.parse_expression(f"{torch}.finfo({dtype_code}).{limit_name}")
    elif reference is not None and repeatable(reference):
        limit, needs_torch = finfo_limit(reference, negative, ctx.facts.names)
    else:
        return None
    return Fix(
        FixSafety.UNSAFE,
        "Use the dtype's own limit",
        edits=(Edit(value, limit),),
        imports=("torch",) if needs_torch else (),
    )
