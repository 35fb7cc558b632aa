"""AMP003 half-reduction: reductions that really run (or are fed) in float16."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from amp_lint.analysis.interpreter.frames import ExecutionContext
from amp_lint.analysis.syntax.contractions import contraction
from amp_lint.analysis.syntax.naming import subject_name
from amp_lint.analysis.syntax.outline import positional_arguments
from amp_lint.analysis.syntax.sequence_sums import sequence_sum
from amp_lint.analysis.values.dtypes import DType, DTypeKind
from amp_lint.analysis.values.semantics import op_name_for_function
from amp_lint.findings import Fix
from amp_lint.fixes.upcasts import upcast_fix
from amp_lint.rules.base import Report, Rule
from amp_lint.rules.common import UPCAST_FIX_SAFETY, brief, code, half_brief, half_phrase

# Reductions whose float16 *result* overflows past 65504 (sum of 4096 values of ±300 is
# already inf; var of ±300 data is 90000). mean/std/norm accumulate in float32 and return
# values within the input's range, so they are only flagged when fed a half product.
OVERFLOWING_REDUCTIONS = frozenset(["sum", "nansum", "cumsum", "prod", "cumprod", "var"])
REDUCTIONS = OVERFLOWING_REDUCTIONS | frozenset(
    ["mean", "nanmean", "std", "norm", "var_mean", "std_mean", "logsumexp"]
)
_SQUARING = frozenset(["square", "pow"])


class HalfReduction(Rule):
    code = "AMP003"
    name = "half-reduction"
    summary = (
        "Checks for reductions that run in float16 on the device in use (sums, products, "
        "variances), for squares or products computed in float16 before a reduction, and "
        "for sums over the sequence axis hidden in linear attention's float16 contractions."
    )
    why = """\
float16 tops out at 65504. PyTorch accumulates reductions in float32 internally but stores
the result in the input's dtype, so a float16 `sum` of 4096 values around 300 is `inf`, and
so is `var` of data with a spread of ±300.

Autocast protects some of this, differently per device. Under **CUDA** autocast `sum`,
`prod`, `cumsum`, `pow`, `softmax`, `exp`, `log` and `norm` run in float32; under **CPU**
autocast none of them do. Outside an autocast region (for example on an autocast output
after the `with` block ends) nothing is upcast on any device. amp-lint reads PyTorch's own
per-device op lists to decide.

A square or product taken in float16 (`x * x`, `x.square()`, and `x ** 2` where `pow` is
not upcast) overflows for |x| > 256 *before* the reduction sees it, so even CUDA's float32
`sum` returns `inf`. The loss or statistic is then inf/NaN and GradScaler skips every step.

Linear attention (fast-transformers, Performer, "Transformers are RNNs") hides such sums in
contractions that autocast runs in the low dtype on both devices: `k.transpose(-2, -1) @ v`
(einsum `"...nd,...ne->...de"`) sums over the sequence axis, and so does the normaliser
`q @ k.sum(dim=-2)` (`"...nd,...d->...n"`). matmul accumulates in float32 but stores a half
result. Measured on torch 2.13 CPU with float16 autocast, ELU+1 features of a LayerNorm and a
Linear (64-dim heads): the normaliser grows by about 88 per token (22,543 at 256 tokens,
45,459 at 512) and is `inf` from about 750 tokens, so the attention output silently becomes 0
(measured at 768 to 8192 tokens); past about 12,000 tokens q·(kᵀv) overflows too and the
output is NaN (measured at 16,384). bfloat16 stayed within 1.1% of float32. Softmax attention
`softmax(q @ k.transpose(-2, -1)) @ v` is not such a sum: its weights sum to 1 over the keys,
and neither is efficient attention's kᵀv with `k.softmax(dim=-2)`."""
    example = """\
import torch

model = torch.nn.Linear(512, 512)
with torch.autocast("cpu", dtype=torch.float16):
    out = model(x)  # float16
    energy = (out * out).sum()
    total = out.sum()
"""
    fixed_example = """\
import torch

model = torch.nn.Linear(512, 512)
with torch.autocast("cpu", dtype=torch.float16):
    out = model(x)  # float16
    energy = (out.float() * out.float()).sum()
    total = out.float().sum()
"""
    fix_safety = (
        """\
The fix upcasts with `.float()` before the reduction. It is **unsafe**: the result becomes
float32 instead of float16, which changes numerics and the dtype seen by later code. There is
no fix for linear attention's contractions: `.float()` operands are cast back by autocast,
and a float32 `kᵀv` is cast back to half by the matmul that consumes it, so the whole
attention (kᵀv, the normaliser and their products) must move into
`with torch.autocast(..., enabled=False):` with `.float()` operands, by hand."""
        + UPCAST_FIX_SAFETY
    )
    known_limitations = """\
Only flagged when the input is known to be float16 (or half of unknown precision under a
region whose dtype may be float16); bfloat16 has float32's range and is not flagged. With an
autocast device that is not known statically, ops that CUDA upcasts and CPU does not are not
flagged. Linear attention is recognised by shape: a matmul whose left operand is
`x.transpose(-2, -1)` (or `.mT`) and whose right one is not transposed; an einsum of two
operands summing one index that sits at the same place in both, after a batch index or `...`
and before their last (feature) indices, which are kept; a matmul or einsum with an operand
that is a `sum`/`cumsum` over the sequence axis (`dim=-2`, or the axis the equation keeps as
the queries' positions), written in place or assigned to a local name. An operand assigned a
`softmax` over the summed axis anywhere in the function is taken as bounded and not flagged.
Values that are small by construction (Performer's `exp(x - max)` features scaled by m^-1/2)
cannot be told apart and are flagged."""
    node_types = (cst.Call, cst.BinaryOperation)

    def check_node(self, node: cst.CSTNode, ctx: ExecutionContext) -> Iterator[Report]:
        contracted = _sequence_contraction(node, ctx)
        if contracted is not None:
            yield contracted
            return
        if not isinstance(node, cst.Call):
            return
        report = _hazard(node, ctx)
        if report is None:
            return
        # `x.sum().sum()`: the inner reduction is reported, and its fix makes this one run in
        # float32 too. (Reported and fixed from the outside in, a chain of n took n fix passes.)
        _, operand = _reduction(node, ctx)
        if isinstance(operand, cst.Call) and _hazard(operand, ctx) is not None:
            return
        yield report


def _hazard(node: cst.Call, ctx: ExecutionContext) -> Report | None:
    reduction, operand = _reduction(node, ctx)
    if reduction is None or operand is None:
        return None
    operand_dtype = ctx.dtype(operand)
    if not operand_dtype.may_be_float16:
        return None
    squared = _half_square(operand, ctx)
    if squared is not None:
        return Report(
            node,
            f"`{code(squared)}` is computed in {half_phrase(operand_dtype)} before "
            f"`{reduction}`: it overflows to inf for |x| > 256 even if the reduction "
            "itself runs in float32; upcast with `.float()` first",
            _fix(_square_operands(squared), "Square in float32", ctx),
            summary=f"`{brief(squared, 22)}` overflows to inf in float16 for |x| > 256 before "
            f"`{reduction}`; use `.float()` first",
        )
    if reduction not in OVERFLOWING_REDUCTIONS:
        return None
    if not ctx.dtype(node).may_be_float16:
        return None  # autocast runs it in float32 on this device
    where = _where(ctx)
    return Report(
        node,
        f"`{code(node)}` runs in {half_phrase(operand_dtype)} {where}: a result above "
        f"65504 silently becomes inf; call `.float()` before `.{reduction}()`",
        _fix([operand], "Reduce in float32", ctx),
        summary=f"`{brief(node, 22)}` runs in {half_brief(operand_dtype)}: above 65504 it silently "
        f"becomes inf; call `.float()` first",
    )


def _sequence_contraction(node: cst.CSTNode, ctx: ExecutionContext) -> Report | None:
    """A float16 matmul or einsum whose values are sums over the sequence axis (linear
    attention's kᵀv and its normaliser q·Σk). Lint only: `.float()` alone is undone by
    autocast, and the island must hold what consumes the result too."""
    found = contraction(node, ctx)
    if found is None or not ctx.dtype(found.node).may_be_float16:
        return None
    hidden = sequence_sum(found, ctx)
    if hidden is None:
        return None
    dtype = ctx.dtype(found.node)
    fix = (
        "compute the attention in float32: `.float()` operands inside `with "
        "torch.autocast(..., enabled=False):` (under autocast `.float()` alone is cast back)"
    )
    if hidden.kind == "keys-values":
        message = (
            f"`{code(node)}` runs in {half_phrase(dtype)} and sums over the sequence axis (kᵀv "
            "of linear attention): its values grow with the sequence length, and they or the "
            f"products that use them silently become inf past 65504 on long inputs; {fix}"
        )
        what = "sums the sequence"
    else:
        message = (
            f"`{code(node)}` runs in {half_phrase(dtype)} on `{code(hidden.summed)}`, a sum "
            "over the sequence axis: the normaliser q·Σk grows with the sequence length "
            "(about 88 per token for 64-dim ELU+1 features, inf from about 750 tokens) and "
            f"silently becomes inf, so the attention output becomes 0 or NaN; {fix}"
        )
        what = "divides by a sequence sum"
    summary = (
        f"`{brief(node, 18)}` {what} in {half_brief(dtype)}: inf on long inputs; use float32, "
        "autocast off"
    )
    return Report(node, message, summary=summary)


def _reduction(
    node: cst.Call, ctx: ExecutionContext
) -> tuple[str | None, cst.BaseExpression | None]:
    qualified = ctx.qualified_name(node.func)
    if qualified is not None:
        op = op_name_for_function(qualified)
        positional = positional_arguments(node)
        if op in REDUCTIONS and positional:
            return op, positional[0]
        return None, None
    if isinstance(node.func, cst.Attribute) and node.func.attr.value in REDUCTIONS:
        return node.func.attr.value, node.func.value
    return None, None


def _half_square(operand: cst.BaseExpression, ctx: ExecutionContext) -> cst.BaseExpression | None:
    """The float16 product or square feeding a reduction, if that is what the operand is."""
    if isinstance(operand, cst.BinaryOperation) and ctx.dtype(operand).may_be_float16:
        if isinstance(operand.operator, cst.Multiply):
            # x * 2 scales; x * y and x * x can square the magnitude; x * mask (0 or 1,
            # speechbrain's padding masks) cannot.
            sides = (ctx.dtype(operand.left), ctx.dtype(operand.right))
            if any(
                _is_mask(side, dtype) for side, dtype in zip((operand.left, operand.right), sides)
            ):
                return None
            return operand if all(s.is_known_tensor for s in sides) else None
        if isinstance(operand.operator, cst.Power):
            exponent = ctx.constant(operand.right)
            return operand if exponent is not None and exponent >= 2 else None
        return None
    if (
        isinstance(operand, cst.Call)
        and isinstance(operand.func, cst.Attribute)
        and operand.func.attr.value in _SQUARING
        and ctx.qualified_name(operand.func) is None
    ):
        return operand if ctx.dtype(operand).may_be_float16 else None
    return None


def _is_mask(node: cst.BaseExpression, dtype: DType) -> bool:
    """A boolean tensor, or one named as a mask (`mask`, `self.padding_mask.unsqueeze(-1)`,
    `masks[:, None]`)."""
    return dtype.kind is DTypeKind.BOOL or "mask" in subject_name(node).lower()


def _square_operands(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(node, cst.BinaryOperation):
        if isinstance(node.operator, cst.Power):
            return [node.left]
        return [node.left, node.right]
    assert isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
    return [node.func.value]


def _fix(operands: list[cst.BaseExpression], title: str, ctx: ExecutionContext) -> Fix | None:
    operands_with_dtypes = [(o, ctx.dtype(o)) for o in operands]
    shared = bool(ctx.frame.chain)
    return upcast_fix(title, operands_with_dtypes, ctx.facts.names, ctx.dtype, shared=shared)


def _where(ctx: ExecutionContext) -> str:
    region = ctx.active_region
    if region is None:
        return "(no autocast here, so nothing upcasts it)"
    return f"(under {region.describe()}, which does not upcast it)"
