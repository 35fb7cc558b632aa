"""AMP004 half-division: float16 division by a denominator guarded with a too-small eps,
directly or under a root (`h / torch.sqrt(v + 1e-12)`, `h * torch.rsqrt(v + 1e-12)`)."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from amp_lint.analysis.interpreter.frames import ExecutionContext
from amp_lint.analysis.syntax.outline import dotted_name, positional_arguments
from amp_lint.analysis.syntax.tensor_op_calls import OpCall, op_call
from amp_lint.analysis.values.dtypes import DTypeKind
from amp_lint.findings import Fix
from amp_lint.fixes.upcasts import upcast_fix
from amp_lint.rules.base import Report, Rule
from amp_lint.rules.common import (
    FLOAT16_OVERFLOWING_EPS_BELOW,
    FLOAT16_ROUNDS_TO_ZERO_BELOW,
    UPCAST_FIX_SAFETY,
    brief,
    code,
    half_phrase,
)

_DIVISIONS = frozenset(["div", "true_divide", "divide"])


class HalfDivision(Rule):
    code = "AMP004"
    name = "half-division"
    summary = (
        "Checks for divisions computed in float16 whose denominator is guarded by an epsilon "
        "that float16 cannot honour (`x / (s.std() + 1e-8)`)."
    )
    why = """\
`x / (d + eps)` is written so that a zero `d` is harmless. In float16 the guard fails:

* an eps below about 3e-8 (`1e-8`, `1e-10`, `1e-12`) **rounds to 0** in float16, so
  `d + 1e-8 == d`: a zero denominator gives `inf` (or `0/0 = NaN`);
* an eps below 1/65504 ≈ 1.5e-5 survives, but dividing by it alone exceeds the float16
  maximum: with `d == 0`, `x / (d + 1e-6)` is `inf` for any |x| > 0.066.

The first case bites even when the division itself runs in float32 (`1 / (d + 1e-8)` is a
reciprocal, which CUDA autocast upcasts): the guard `d + 1e-8` was already computed in
float16 and lost its eps. Division is not on any autocast list, so it runs in the operands'
dtype: float16 whenever the denominator comes from a float16 op (a matmul/conv output, or
a `mean`/`std`/`abs` of one). Normalisations (`(x - mu) / (sigma + eps)`), cosine
similarities and attention renormalisations written this way produce inf/NaN on the first
constant feature.

Under a root (`x / torch.sqrt(v + 1e-12)`, `x / (v + eps) ** 0.5`, `x * torch.rsqrt(v +
1e-12)`, RMS and layer norms written by hand) only the first case applies: an eps that
rounds to 0 leaves `sqrt(0) = 0` and `rsqrt(0) = inf`, so a zero `v` gives inf or NaN
(`0 * inf`), also where CUDA autocast runs `rsqrt` or `pow` in float32, since they receive
the guard already computed in float16. An eps that float16 keeps (3e-8 and up rounds to at
least 2**-24) keeps the root at 2**-12 or more and 1/root at 4096 or less: `x / root`
overflows only where |x| > 65504·sqrt(eps) (207 for 1e-5), float16's ordinary range limit
rather than a failed guard, so it is not reported. bfloat16 has float32's exponent range and
is not affected."""
    example = """\
import torch

with torch.autocast("cuda"):
    h = encoder(x)  # float16
    z = (h - h.mean(0)) / (h.std(0) + 1e-8)
"""
    fixed_example = """\
import torch

with torch.autocast("cuda"):
    h = encoder(x)  # float16
    z = (h - h.mean(0)).float() / (h.std(0).float() + 1e-8)
"""
    fix_safety = (
        """\
The fix computes the division in float32 (`.float()` on the numerator and on the half part
of the denominator, under the root if there is one); for `torch.rsqrt(v + eps)` and
`(v + eps) ** -0.5`, which are reported on their own, `.float()` on `v`. It is **unsafe**:
the result becomes float32 instead of float16."""
        + UPCAST_FIX_SAFETY
    )
    known_limitations = """\
Only denominators that carry an explicit epsilon (`d + eps`, `torch.add(d, eps)`,
`d.clamp(min=eps)`, `torch.clamp(d, min=eps)`, `d.clamp_min(eps)`,
`torch.maximum(d, torch.tensor(eps))`), directly or under `torch.sqrt`, `.sqrt()`, `** 0.5`
or `torch.pow(., 0.5)`, and inverse roots of such a guard (`torch.rsqrt`, `.rsqrt()`,
`** -0.5`) are flagged: a division by a bare value that may be zero is a bug in float32 too.
A root assigned to a variable before the division (`r = torch.sqrt(v + eps); x / r`), other
powers and `torch.reciprocal` are not followed. Epsilons held in variables are followed when
they are assigned a literal in the same function or module. A value divided by its own last
entry, peak or norm (`y / (y[:, -1:] + eps)`, `x / (x.norm() + eps)`) is reported only when
eps rounds to 0 in float16: otherwise the quotient is bounded by 1 and 1/eps never shows
(measured on CPU float16 for inputs down to 0)."""
    node_types = (cst.BinaryOperation, cst.Call)
    accepts_assumptions = True

    def check_node(self, node: cst.CSTNode, ctx: ExecutionContext) -> Iterator[Report]:
        inside = _inverse_root(node, ctx)
        if inside is not None:
            yield from _check_inverse_root(node, inside, ctx)
            return
        parts = _division(node, ctx)
        if parts is None:
            return
        numerator, denominator = parts
        assert isinstance(node, cst.BaseExpression)
        # `d / torch.sqrt(v + eps)`: the guard sits under the root.
        rooted = _root(denominator, ctx)
        guard = denominator if rooted is None else rooted
        guarded = _guard(guard, ctx)
        if guarded is None:
            return
        base, eps = guarded
        if not ctx.dtype(base).may_be_float16:
            return
        division_dtype = ctx.dtype(node)
        guard_dtype = ctx.dtype(guard)
        if eps < FLOAT16_ROUNDS_TO_ZERO_BELOW and guard_dtype.may_be_float16:
            # The guard is computed in float16 and loses eps, whatever the division runs in.
            what = (
                f"the guard `{code(guard)}` is computed in {half_phrase(guard_dtype)}, "
                f"where {eps:g} rounds to 0, so a zero denominator gives inf or NaN"
            )
            summary = f"{eps:g} is 0 in float16: zero denominators give inf/NaN; divide in float32"
        elif rooted is None and division_dtype.may_be_float16 and not _part_of(base, numerator):
            # Not under a root: an eps float16 keeps leaves 1/root at 4096 or less, and
            # x / root overflows only for |x| > 65504 * sqrt(eps) (see `why`).
            what = (
                f"it divides in {half_phrase(division_dtype)} and 1/{eps:g} exceeds the "
                "float16 maximum 65504, so a near-zero denominator gives inf"
            )
            summary = (
                f"1/{eps:g} > float16's max 65504: near-zero denominators give inf; "
                "divide in float32"
            )
        else:
            return
        message = f"`{code(node)}`: {what}; compute the division in float32 with `.float()`"
        summary = f"`{brief(node, 20)}`: {summary}"
        yield Report(node, message, _fix(numerator, base, ctx), summary=summary)


def _check_inverse_root(
    node: cst.CSTNode, inside: cst.BaseExpression, ctx: ExecutionContext
) -> Iterator[Report]:
    """`torch.rsqrt(v + eps)`, `(v + eps) ** -0.5`: a division by a root, reported where
    the inf appears, whatever then multiplies it (`h * torch.rsqrt(v + eps)`)."""
    guarded = _guard(inside, ctx)
    if guarded is None:
        return
    base, eps = guarded
    guard_dtype = ctx.dtype(inside)
    if not (
        eps < FLOAT16_ROUNDS_TO_ZERO_BELOW
        and ctx.dtype(base).may_be_float16
        and guard_dtype.may_be_float16
    ):
        return
    message = (
        f"`{code(node)}`: the guard `{code(inside)}` is computed in {half_phrase(guard_dtype)}, "
        f"where {eps:g} rounds to 0, so a zero value gives an inf inverse root and inf or NaN "
        "in what it scales; compute the guard in float32 with `.float()`"
    )
    summary = (
        f"`{brief(node, 20)}`: {eps:g} is 0 in float16: zero values give inf; add eps in float32"
    )
    fix = upcast_fix(
        "Compute the guard in float32",
        [(base, ctx.dtype(base))],
        ctx.facts.names,
        ctx.dtype,
        shared=bool(ctx.frame.chain),
    )
    yield Report(node, message, fix, summary=summary)


def _division(
    node: cst.CSTNode, ctx: ExecutionContext
) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Divide):
        return node.left, node.right
    if not isinstance(node, cst.Call):
        return None
    positional = positional_arguments(node)
    qualified = ctx.qualified_name(node.func)
    if qualified is not None:
        if qualified in ("torch.div", "torch.true_divide", "torch.divide") and len(positional) >= 2:
            return positional[0], positional[1]
        return None
    if isinstance(node.func, cst.Attribute) and node.func.attr.value in _DIVISIONS and positional:
        return node.func.value, positional[0]
    return None


def _guard(
    denominator: cst.BaseExpression, ctx: ExecutionContext
) -> tuple[cst.BaseExpression, float] | None:
    """(the guarded value, eps) for `d + eps`, `eps + d`, `torch.add(d, eps)` and clamps or
    maxima with a minimum of eps."""
    if isinstance(denominator, cst.BinaryOperation) and isinstance(denominator.operator, cst.Add):
        left, right = denominator.left, denominator.right
        return _tensor_and_eps([(left, right), (right, left)], ctx)
    if isinstance(denominator, cst.Call):
        return (
            _add_guard(denominator, ctx)
            or _clamp_guard(denominator, ctx)
            or _maximum_guard(denominator, ctx)
        )
    return None


def _add_guard(call: cst.Call, ctx: ExecutionContext) -> tuple[cst.BaseExpression, float] | None:
    """`torch.add(d, eps)`, `d.add(eps)` (without `alpha=`)."""
    op = op_call(call, ctx, frozenset(["add"]))
    if op is None or op.keywords:
        return None
    return _tensor_and_eps(_operand_pairs(op), ctx)


def _root(node: cst.BaseExpression, ctx: ExecutionContext) -> cst.BaseExpression | None:
    """What `torch.sqrt(g)`, `g.sqrt()`, `g ** 0.5`, `torch.pow(g, 0.5)` take the root of."""
    return _power_of(node, ctx, "sqrt", 0.5)


def _inverse_root(node: cst.CSTNode, ctx: ExecutionContext) -> cst.BaseExpression | None:
    """What `torch.rsqrt(g)`, `g.rsqrt()`, `g ** -0.5`, `torch.pow(g, -0.5)` take the
    inverse root of."""
    if not isinstance(node, cst.BaseExpression):
        return None
    return _power_of(node, ctx, "rsqrt", -0.5)


def _power_of(
    node: cst.BaseExpression, ctx: ExecutionContext, function: str, exponent: float
) -> cst.BaseExpression | None:
    if isinstance(node, cst.BinaryOperation):
        if isinstance(node.operator, cst.Power) and ctx.constant(node.right) == exponent:
            return node.left
        return None
    op = op_call(node, ctx, frozenset([function, "pow"]))
    if op is None:
        return None
    if op.op == function:
        return op.tensor if not op.positional else None
    power = op.argument(0, "exponent")
    return op.tensor if power is not None and ctx.constant(power) == exponent else None


def _clamp_guard(call: cst.Call, ctx: ExecutionContext) -> tuple[cst.BaseExpression, float] | None:
    positional = positional_arguments(call)
    keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    qualified = ctx.qualified_name(call.func)
    if qualified in ("torch.clamp", "torch.clip", "torch.clamp_min") and positional:
        base = positional[0]
        bound = keywords.get("min") or (positional[1] if len(positional) > 1 else None)
    elif (
        isinstance(call.func, cst.Attribute)
        and qualified is None
        and call.func.attr.value in ("clamp", "clip", "clamp_min")
    ):
        base = call.func.value
        bound = keywords.get("min") or (positional[0] if positional else None)
    else:
        return None
    eps = ctx.constant(bound) if bound is not None else None
    return (base, eps) if _small(eps) and eps is not None else None


def _maximum_guard(
    call: cst.Call, ctx: ExecutionContext
) -> tuple[cst.BaseExpression, float] | None:
    """`torch.maximum(d, torch.tensor(eps))` (either order), `d.maximum(...)`, `fmax`, and
    the two-tensor `torch.max(d, torch.tensor(eps))`. A 0-dimensional eps takes d's dtype."""
    op = op_call(call, ctx, frozenset(["maximum", "fmax", "max"]))
    # `d.max(1)` is a reduction over dimension 1, not a maximum with 1.
    if op is None or (op.is_method and op.op == "max"):
        return None
    return _tensor_and_eps(_operand_pairs(op), ctx)


def _operand_pairs(op: OpCall) -> list[tuple[cst.BaseExpression, cst.BaseExpression]]:
    """(tensor, other) of a two-operand op: both orders for `torch.f(a, b)`, whose operands
    may be either way round; the receiver first for `a.f(b)`."""
    if op.tensor is None or len(op.positional) != 1:
        return []
    pairs = [(op.tensor, op.positional[0])]
    return pairs if op.is_method else [*pairs, (op.positional[0], op.tensor)]


def _tensor_and_eps(
    pairs: list[tuple[cst.BaseExpression, cst.BaseExpression]], ctx: ExecutionContext
) -> tuple[cst.BaseExpression, float] | None:
    for base, other in pairs:
        eps = ctx.constant(other)
        if _small(eps) and ctx.dtype(base).kind is not DTypeKind.SCALAR:
            assert eps is not None
            return base, eps
    return None


def _part_of(base: cst.BaseExpression, numerator: cst.BaseExpression) -> bool:
    """`y / (y[:, -1:] + eps)`, `x / (x.abs().amax(-1) + eps)`, `x / (x.norm() + eps)`: a
    value normalised by its own last entry, peak or norm. Where the denominator is near zero
    the numerator is too, so the quotient stays small and 1/eps never shows; only an eps
    that rounds to 0 (0/0) remains a hazard, which is reported above. A spread (`x.std()`)
    bounds nothing: `x / (x.std() + eps)` is still reported."""
    name = dotted_name(numerator)
    return name is not None and name == _bounding_root(base)


def _bounding_root(node: cst.BaseExpression) -> str | None:
    """The variable `node` takes an entry, a peak or a norm of (`x[:, -1:]`,
    `x.abs().max(-1)[0]`, `x.norm(dim=-1)`); None for anything else."""
    while True:
        if isinstance(node, cst.Subscript):
            node = node.value
        elif (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value in _BOUNDING_METHODS
        ):
            node = node.func.value
        else:
            return dotted_name(node)


# Methods whose result bounds each entry of the tensor in magnitude.
_BOUNDING_METHODS = frozenset(["abs", "max", "amax", "norm"])


def _small(eps: float | None) -> bool:
    return eps is not None and 0 < eps < FLOAT16_OVERFLOWING_EPS_BELOW


def _fix(
    numerator: cst.BaseExpression, base: cst.BaseExpression, ctx: ExecutionContext
) -> Fix | None:
    operands = [(base, ctx.dtype(base))]
    if (numerator_dtype := ctx.dtype(numerator)).is_half:
        operands.insert(0, (numerator, numerator_dtype))
    return upcast_fix(
        "Divide in float32", operands, ctx.facts.names, ctx.dtype, shared=bool(ctx.frame.chain)
    )
