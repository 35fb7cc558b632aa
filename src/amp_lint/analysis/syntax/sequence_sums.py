"""Sums over the sequence axis hidden in linear attention's contractions: keys times values
(`k.transpose(-2, -1) @ v`) and the normaliser (`q @ k.sum(dim=-2)`).

Linear attention (Katharopoulos et al. 2020, Performer, efficient attention) replaces
softmax(q kᵀ) v by φ(q) (φ(k)ᵀ v), normalised by φ(q) · Σₙ φ(k)ₙ. Both products sum over the
sequence axis: their values grow with the sequence length instead of averaging over it, as
softmax weights (which sum to 1) do in ordinary attention. What is read here is the shape of
the code only; whether the values are half is the interpreter's business.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from amp_lint.analysis.interpreter.frames import ExecutionContext
from amp_lint.analysis.syntax.attention_roles import keys_and_values, softmaxed_scores
from amp_lint.analysis.syntax.contractions import Contraction, Equation
from amp_lint.analysis.syntax.local_assignments import assigned_values, local_assignments
from amp_lint.analysis.syntax.outline import positional_arguments
from amp_lint.analysis.values.dtypes import DTypeKind

_SUMS = frozenset(["sum", "cumsum"])
_SOFTMAX_FUNCTIONS = frozenset(["torch.softmax", "torch.nn.functional.softmax"])
# Methods that keep a tensor's values (and so its magnitude): dtype conversions, views,
# an added axis, zero padding.
_VALUE_KEEPING_METHODS = frozenset(
    ["type_as", "type", "to", "float", "half", "contiguous", "unsqueeze", "detach", "clone"]
)
_VALUE_KEEPING_FUNCTIONS = frozenset(["torch.nn.functional.pad"])


@dataclass(frozen=True)
class SequenceSum:
    """A contraction whose values are sums over the sequence axis.

    `kind` is "keys-values" (kᵀv: the contraction itself runs over the sequence) or
    "normaliser" (q · Σₙ k: one operand is a sum over the sequence, `summed`)."""

    kind: str
    summed: cst.BaseExpression  # the operand summed over the sequence axis


def sequence_sum(found: Contraction, ctx: ExecutionContext) -> SequenceSum | None:
    if found.equation is None:
        return _matmul_sequence_sum(found, ctx)
    return _einsum_sequence_sum(found, found.equation, ctx)


def _matmul_sequence_sum(found: Contraction, ctx: ExecutionContext) -> SequenceSum | None:
    left, right = found.operands
    keys = _transposed_last_two(left)
    if keys is not None and _transposed_last_two(right) is None:
        # (…, d, n) @ (…, n, e): a sum over axis -2 of both, the sequence of an (…, n, d) layout.
        if _normalised_over(keys, -2, None, ctx) or softmaxed_scores(ctx):
            return None
        if not keys_and_values(keys, right):
            return None
        return SequenceSum("keys-values", left)
    if _transposed_last_two(left) is None:
        summed = _summed_tensor(right, ctx)
        if summed is not None and summed[0] == "sum" and summed[2] == -2:
            if _normalised_over(summed[1], -2, None, ctx):
                return None
            return SequenceSum("normaliser", right)
    return None


def _einsum_sequence_sum(
    found: Contraction, equation: Equation, ctx: ExecutionContext
) -> SequenceSum | None:
    contracted = equation.contracted
    if len(contracted) != 1:
        return None
    (index,) = contracted
    first, second = equation.operands
    if _keys_values(equation, index) and keys_and_values(*found.operands):
        for operand, indices, leading in zip(found.operands, equation.operands, equation.ellipsis):
            axis = indices.index(index) - len(indices)
            if _normalised_over(operand, axis, None if leading else len(indices), ctx):
                return None
        return SequenceSum("keys-values", found.node)
    for summed, other, own in ((1, 0, second), (0, 1, first)):
        reading = _summed_tensor(found.operands[summed], ctx)
        if reading is None or index != equation.operands[other][-1:]:
            continue
        op, tensor, dim = reading
        if dim >= 0 and any(equation.ellipsis):
            continue  # counted from the start, past an ellipsis of unknown length
        letter = _sequence_letter(op, dim, own, equation.operands[other])
        if letter is None or letter not in equation.output or letter == index:
            continue
        if _normalised_over(tensor, dim, None, ctx):
            return None
        return SequenceSum("normaliser", found.operands[summed])
    return None


_SEQUENCE_LETTERS = frozenset("nlstNLST")


def _keys_values(equation: Equation, index: str) -> bool:
    """kᵀv's shape: the summed index sits at the same place in both operands, after a batch
    index or `...` and before the feature index, and both feature indices are kept
    (`...nd,...ne->...de`, `nshd,nshm->nhmd`); not `bhid,bhjd->bhij` (q kᵀ sums features)
    nor `bhij,bhjd->bhid` (weights times values sums keys, the last index of the weights).
    The same shape also sums channels (criss-cross attention's `bchw,bciw->bwhi`), which
    only the letters tell apart: the summed index must be spelled as a sequence axis is in
    linear-attention code (n, l, s or t, either case)."""
    if index not in _SEQUENCE_LETTERS:
        return False
    positions = set()
    for indices, leading in zip(equation.operands, equation.ellipsis):
        if index not in indices:
            return False
        place = indices.index(index)
        if place == len(indices) - 1 or (place == 0 and not leading):
            return False
        if indices[-1] not in equation.output:
            return False
        positions.add(place - len(indices))
    return len(positions) == 1


def _sequence_letter(op: str, dim: int, own: str, other: str) -> str | None:
    """The index of the axis a sum or cumsum ran over, named by the equation: a cumsum keeps
    its axis (`own[dim]`); a sum removed it, so the other operand (queries of the same layout
    as the keys) names it, when removing it from that operand leaves the summed one's."""
    if op == "cumsum":
        return own[dim] if -len(own) <= dim < len(own) else None
    if not -len(other) <= dim < len(other):
        return None
    letter = other[dim]
    return letter if other.replace(letter, "") == own else None


def _summed_tensor(
    node: cst.BaseExpression, ctx: ExecutionContext, seen: frozenset[str] = frozenset()
) -> tuple[str, cst.BaseExpression, int] | None:
    """(`sum` or `cumsum`, the tensor, the axis) for `k.sum(dim=-2)`, `torch.cumsum(k, -2)`,
    through value-keeping steps (`.unsqueeze(-1)`, `.type_as(q)`, `+ eps`) and a local name
    every assignment of which is such a sum."""
    node = _through_value_keeping(node, ctx)
    if isinstance(node, cst.Name):
        if node.value in seen:
            return None  # `s = s + eps`
        values = local_assignments(node, ctx)
        found = [_summed_tensor(value, ctx, seen | {node.value}) for value in values]
        first = found[0] if found else None
        if first is not None and all(f is not None and f[::2] == first[::2] for f in found):
            return first
        return None
    if not isinstance(node, cst.Call):
        return None
    qualified = ctx.qualified_name(node.func)
    positional = positional_arguments(node)
    if qualified is not None:
        op = qualified.rsplit(".", 1)[-1]
        if qualified != f"torch.{op}" or op not in _SUMS or not positional:
            return None
        tensor, rest = positional[0], positional[1:]
    elif isinstance(node.func, cst.Attribute) and node.func.attr.value in _SUMS:
        op, tensor, rest = node.func.attr.value, node.func.value, positional
    else:
        return None
    dim = _integer(_argument(node, rest, 0, "dim"))
    return (op, tensor, dim) if dim is not None else None


def _through_value_keeping(node: cst.BaseExpression, ctx: ExecutionContext) -> cst.BaseExpression:
    while True:
        if isinstance(node, cst.Call):
            qualified = ctx.qualified_name(node.func)
            positional = positional_arguments(node)
            if qualified in _VALUE_KEEPING_FUNCTIONS and positional:
                node = positional[0]
                continue
            if (
                qualified is None
                and isinstance(node.func, cst.Attribute)
                and node.func.attr.value in _VALUE_KEEPING_METHODS
            ):
                node = node.func.value
                continue
        if isinstance(node, cst.Subscript) and _adds_axes_only(node):
            node = node.value
            continue
        if (
            isinstance(node, cst.BinaryOperation)
            and isinstance(node.operator, cst.Add)
            and ctx.dtype(node.right).kind is DTypeKind.SCALAR
        ):
            node = node.left  # `k.sum(-2) + eps`
            continue
        return node


def _adds_axes_only(node: cst.Subscript) -> bool:
    """`t[..., None]`, `t[:, None]`: indexing that only adds axes."""
    for element in node.slice:
        inner = element.slice
        if isinstance(inner, cst.Slice) and inner.lower is None and inner.upper is None:
            continue
        if isinstance(inner, cst.Index) and isinstance(inner.value, (cst.Ellipsis, cst.Name)):
            if isinstance(inner.value, cst.Name) and inner.value.value != "None":
                return False
            continue
        return False
    return True


def _transposed_last_two(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """`x` for `x.transpose(-2, -1)`, `x.transpose(-1, -2)`, `x.mT`."""
    if isinstance(node, cst.Attribute) and node.attr.value == "mT":
        return node.value
    if (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value in ("transpose", "swapaxes", "swapdims")
        and len(node.args) == 2
        and all(a.keyword is None for a in node.args)
    ):
        dims = {_integer(a.value) for a in node.args}
        return node.func.value if dims == {-2, -1} else None
    return None


# --- values bounded by a softmax ----------------------------------------------------------


def _normalised_over(
    node: cst.BaseExpression,
    axis: int,
    rank: int | None,
    ctx: ExecutionContext,
    seen: frozenset[str] = frozenset(),
) -> bool:
    """The tensor is a softmax over `axis` (negative, counted from the end; `rank` when the
    number of axes is known): its values along that axis sum to 1, so a sum over it is a
    weighted average, as in `k = k.softmax(dim=-2)` of efficient attention."""
    node = _through_value_keeping(node, ctx)
    if isinstance(node, cst.Name):
        if node.value in seen:
            return False
        # Any assignment will do (`k = k.softmax(dim=-2)` rebinds a parameter): precision first.
        values, _ = assigned_values(node, ctx)
        inner = seen | {node.value}
        return any(_normalised_over(value, axis, rank, ctx, inner) for value in values)
    dim = _softmax_dim(node, ctx)
    if dim is None:
        return False
    return dim == axis or (rank is not None and dim == axis + rank)


def _softmax_dim(node: cst.BaseExpression, ctx: ExecutionContext) -> int | None:
    if not isinstance(node, cst.Call):
        return None
    positional = positional_arguments(node)
    qualified = ctx.qualified_name(node.func)
    if qualified in _SOFTMAX_FUNCTIONS:
        return _integer(_argument(node, positional[1:], 0, "dim"))
    if (
        qualified is None
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == "softmax"
    ):
        return _integer(_argument(node, positional, 0, "dim"))
    return None


# --- small readings -----------------------------------------------------------------------


def _argument(
    call: cst.Call, positional: list[cst.BaseExpression], position: int, keyword: str
) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    return positional[position] if position < len(positional) else None


def _integer(node: cst.BaseExpression | None) -> int | None:
    """A literal integer, possibly negative (`-2`)."""
    if isinstance(node, cst.Integer):
        return int(node.value) if node.value.isdigit() else None
    if (
        isinstance(node, cst.UnaryOperation)
        and isinstance(node.operator, cst.Minus)
        and isinstance(node.expression, cst.Integer)
        and node.expression.value.isdigit()
    ):
        return -int(node.expression.value)
    return None
