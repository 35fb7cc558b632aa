"""AMP102 fp16-eps-underflow: an epsilon below float16's smallest subnormal, added to, clamped
with or passed as `eps=` for float16 values, where it rounds to 0."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from amp_lint.analysis.interpreter.frames import ExecutionContext
from amp_lint.analysis.syntax.tensor_op_calls import OpCall, consumer, denominators, op_call
from amp_lint.analysis.values import semantics
from amp_lint.analysis.values.dtypes import DType, DTypeKind
from amp_lint.fixes.upcasts import upcast_fix
from amp_lint.rules.base import Report, Rule
from amp_lint.rules.common import (
    FLOAT16_ROUNDS_TO_ZERO_BELOW,
    UPCAST_FIX_SAFETY,
    brief,
    code,
    half_brief,
    half_phrase,
)

_ADDS = frozenset(["add", "add_"])
_CLAMPS = frozenset(["clamp", "clamp_", "clip", "clip_", "clamp_min", "clamp_min_"])
# Functions that guard a norm with `norm.clamp_min(eps)` in the dtype the norm is computed in:
# function -> (position of eps after the tensor, its default, the other tensor's position).
# The norm's dtype comes from the op tables (float32 under CUDA autocast, not on CPU).
_EPS_FUNCTIONS: dict[str, tuple[int, float, int | None]] = {
    "normalize": (2, 1e-12, None),
    "cosine_similarity": (2, 1e-8, 0),
}
_OPS = _ADDS | _CLAMPS | frozenset(_EPS_FUNCTIONS)

# What the op that consumes `x + eps` does when eps is lost and x is 0.
_CONSEQUENCES = {
    "log": "`log` of it is -inf",
    "log2": "`log2` of it is -inf",
    "log10": "`log10` of it is -inf",
    "sqrt": "`sqrt` of it has an infinite gradient",
    "rsqrt": "`rsqrt` of it is inf",
    "reciprocal": "`reciprocal` of it is inf",
}
# The same, for summaries.
_BRIEF_CONSEQUENCES = {
    "log": "log(0) gives -inf",
    "log2": "log2(0) gives -inf",
    "log10": "log10(0) gives -inf",
    "sqrt": "sqrt's gradient at 0 is inf",
    "rsqrt": "rsqrt(0) gives inf",
    "reciprocal": "1/0 gives inf",
}


class Fp16EpsUnderflow(Rule):
    code = "AMP102"
    name = "fp16-eps-underflow"
    summary = (
        "Checks for epsilons below float16's smallest subnormal (`1e-8`, `1e-10`, `1e-12`) "
        "added to, clamped with or passed as `eps=` for values computed in float16, where "
        "they round to 0 (`torch.log(p + 1e-10)`, `x.clamp(min=1e-8).log()`)."
    )
    why = """\
The smallest positive float16 is 2**-24 ≈ 5.96e-8; anything below about 3e-8 rounds to 0.
An epsilon meant to keep a value away from zero therefore vanishes when the value is
float16: `p + 1e-10` is still exactly 0 where `p` is 0, and `p.clamp(min=1e-8)` clamps to 0.
What the epsilon guarded then fails:

* `torch.log(p + 1e-10)` is `-inf` (and `0 * -inf` is NaN in a cross-entropy written by
  hand) where `sigmoid`/`softmax` outputs underflowed to 0;
* `torch.sqrt(x + 1e-12)` is fine forwards but its gradient at 0 is inf;
* `F.normalize(x, eps=1e-12)` and `F.cosine_similarity(a, b, eps=1e-8)` (whose defaults are
  these epsilons) compute `x / norm.clamp_min(eps)`: a zero row gives 0/0 = NaN.

The add or clamp runs in float16 whenever its operand does (neither is on any autocast
list), so this holds under CUDA autocast too, even where the next op (`log`, `rsqrt`) is
upcast to float32: the epsilon was already lost. Where the operand itself is float32 (the
output of `sum`, `softmax` or `norm` under CUDA autocast, which PyTorch runs in float32;
CPU autocast does not) nothing is flagged; the rule follows the per-device op tables, so
`F.normalize` is flagged under CPU autocast and for `.half()` tensors only. bfloat16 has
float32's exponent range and keeps these epsilons. Divisions by `d + eps` are AMP004's."""
    example = """\
import torch

with torch.autocast("cuda"):
    p = torch.sigmoid(head(x))  # float16: 0 for logits below -17
    loss = -(y * torch.log(p + 1e-10) + (1 - y) * torch.log(1 - p + 1e-10))
"""
    fixed_example = """\
import torch

with torch.autocast("cuda"):
    p = torch.sigmoid(head(x))  # float16: 0 for logits below -17
    loss = -(y * torch.log(p.float() + 1e-10) + (1 - y) * torch.log((1 - p).float() + 1e-10))
"""
    fix_safety = (
        """\
The fix computes the guarded expression in float32 with `.float()` on the half-precision
operand (the input tensor of `F.normalize`/`F.cosine_similarity`). It is **unsafe**: the
result becomes float32 instead of float16, and values that had already rounded to 0 in
float16 stay 0 (the eps then guards them, but their float32 value is not recovered). For a
cross-entropy, `F.binary_cross_entropy_with_logits` or `log_softmax` on the logits is the
better rewrite, which the fixer does not attempt. In-place ops (`p.clamp_(min=1e-8)`,
`p.add_(1e-8)`) get no fix: they write back into the float16 tensor, and `.float()` in front
of them would guard a copy that is thrown away."""
        + UPCAST_FIX_SAFETY
    )
    known_limitations = """\
Only `x + eps`, `torch.add`/`x.add(eps)`, lower clamp bounds (`clamp`, `clip`,
`clamp_min`) and the `eps` of `F.normalize`/`F.cosine_similarity` are checked; augmented
assignments (`x += 1e-8`) and epsilons inside other library functions are not. The operand's
dtype must be known to be half precision: a function parameter of unknown dtype is not
flagged. `F.batch_norm`/`F.instance_norm` with `eps=1e-12` also give NaN on CPU in float16
but are not checked; `F.layer_norm`, `F.group_norm` and `F.rms_norm` compute with the eps in
float32 and are fine."""
    node_types = (cst.BinaryOperation, cst.Call)
    accepts_assumptions = True

    def check_node(self, node: cst.CSTNode, ctx: ExecutionContext) -> Iterator[Report]:
        if isinstance(node, cst.BinaryOperation):
            report = self._binary_add(node, ctx)
        else:
            call = op_call(node, ctx, _OPS)
            if call is None:
                return
            if call.op in _EPS_FUNCTIONS:
                report = self._eps_function(call, ctx)
            elif call.op in _ADDS:
                report = self._add_call(call, ctx)
            else:
                report = self._clamp(call, ctx)
        if report is not None:
            yield report

    # --- x + eps ---------------------------------------------------------------------------

    def _binary_add(self, node: cst.BinaryOperation, ctx: ExecutionContext) -> Report | None:
        if not isinstance(node.operator, cst.Add):
            return None
        for base, other in ((node.left, node.right), (node.right, node.left)):
            eps = _tiny(ctx.constant(other))
            if eps is not None and ctx.dtype(base).kind is not DTypeKind.SCALAR:
                return self._guard_report(node, base, eps, ctx.dtype(node), ctx)
        return None

    def _add_call(self, call: OpCall, ctx: ExecutionContext) -> Report | None:
        other = call.argument(0, "other")
        if call.tensor is None or other is None or "alpha" in call.keywords:
            return None
        eps = _tiny(ctx.constant(other))
        if eps is None:
            return None
        dtype = ctx.dtype(call.tensor) if call.op == "add_" else ctx.dtype(call.call)
        return self._guard_report(call.call, call.tensor, eps, dtype, ctx)

    def _clamp(self, call: OpCall, ctx: ExecutionContext) -> Report | None:
        bound = call.argument(0, "min")
        if call.tensor is None or bound is None:
            return None
        eps = _tiny(ctx.constant(bound))
        if eps is None:
            return None
        return self._guard_report(call.call, call.tensor, eps, ctx.dtype(call.tensor), ctx)

    def _guard_report(
        self,
        node: cst.BaseExpression,
        base: cst.BaseExpression,
        eps: float,
        dtype: DType,
        ctx: ExecutionContext,
    ) -> Report | None:
        if not dtype.may_be_float16 or not ctx.dtype(base).is_half:
            return None
        if id(node) in denominators(ctx.statement, ctx):
            return None  # `a / (d + eps)`: AMP004 reports it
        used_by = consumer(node, ctx.statement, ctx)
        consequence = _CONSEQUENCES.get(used_by or "")
        if consequence is None:
            consequence = "whatever it guards (a log, sqrt or division) still sees 0"
        what = f"{eps:g} rounds to 0 in {half_phrase(dtype)}, so the guard does nothing"
        briefly = (
            f"`{brief(node, 22)}`: {eps:g} is 0 in {half_brief(dtype)}, so "
            f"{_BRIEF_CONSEQUENCES.get(used_by or '', 'it guards nothing')}"
        )
        if _in_place(node):
            # The result is written back into the half tensor: `.float()` would guard a copy.
            message = (
                f"`{code(node)}`: {what} and where the values are 0 {consequence}; an in-place "
                f"op cannot store eps in `{code(base)}`: compute out of place in float32 "
                f"(`{code(base)}.float()`)"
            )
            return Report(node, message, summary=f"{briefly}; compute out of place in float32")
        message = (
            f"`{code(node)}`: {what} and where the values are 0 {consequence}; compute it in "
            f"float32 with `.float()` on `{code(base)}`"
        )
        fix = upcast_fix(
            "Compute in float32",
            [(base, ctx.dtype(base))],
            ctx.facts.names,
            ctx.dtype,
            shared=bool(ctx.frame.chain),
        )
        summary = f"{briefly}; compute it in float32"
        return Report(node, message, fix, summary=summary)

    # --- F.normalize(x, eps=1e-12) ---------------------------------------------------------

    def _eps_function(self, call: OpCall, ctx: ExecutionContext) -> Report | None:
        if call.is_method or call.tensor is None:
            return None
        eps_position, default, other_position = _EPS_FUNCTIONS[call.op]
        eps_node = call.argument(eps_position, "eps")
        eps = _tiny(default if eps_node is None else ctx.constant(eps_node))
        if eps is None:
            return None
        tensors = [call.tensor]
        if other_position is not None:
            other = call.argument(other_position, "x2")
            if other is None:
                return None
            tensors.append(other)
        dtypes = [ctx.dtype(t) for t in tensors]
        # The dtype autocast computes the norm in, per device (float32 on CUDA).
        norm_dtype = semantics.op_result(call.op, dtypes, ctx.active_region)
        if not norm_dtype.may_be_float16:
            return None
        eps_text = f"eps={eps:g}" if eps_node is not None else f"its default eps={eps:g}"
        message = (
            f"`{code(call.call)}` computes its norm in {half_phrase(norm_dtype)}, where "
            f"{eps_text} rounds to 0: a zero vector gives 0/0 = NaN instead of 0; compute it "
            "in float32 with `.float()` on the input"
        )
        half = [(t, d) for t, d in zip(tensors, dtypes) if d.is_half]
        fix = upcast_fix(
            "Compute in float32", half, ctx.facts.names, ctx.dtype, shared=bool(ctx.frame.chain)
        )
        summary = (
            f"`{brief(call.call, 25)}`: eps={eps:g} is 0 in {half_brief(norm_dtype)}, so a zero "
            "vector gives NaN; use `.float()` input"
        )
        return Report(call.call, message, fix, summary=summary)


def _in_place(node: cst.BaseExpression) -> bool:
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value.endswith("_")
    )


def _tiny(eps: float | None) -> float | None:
    """eps when it is a positive number that float16 rounds to 0."""
    if eps is None or not 0 < eps < FLOAT16_ROUNDS_TO_ZERO_BELOW:
        return None
    return float(eps)
