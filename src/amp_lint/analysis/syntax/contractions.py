"""Contractions read from syntax: einsum equations, the axes a matmul sums over, and the sums
over a sequence axis hidden in linear attention (`k.transpose(-2, -1) @ v`, the normaliser
`q @ k.sum(dim=-2)`).

Linear attention (Katharopoulos et al. 2020, Performer, efficient attention) replaces
softmax(q kᵀ) v by φ(q) (φ(k)ᵀ v), normalised by φ(q) · Σₙ φ(k)ₙ. Both products sum over the
sequence axis: their values grow with the sequence length instead of averaging over it, as
softmax weights (which sum to 1) do in ordinary attention. What is read here is the shape of
the code only; whether the values are half is the interpreter's business.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from amp_lint.analysis.interpreter.frames import ExecutionContext
from amp_lint.analysis.syntax.outline import (
    positional_arguments,
    subtree_nodes,
    walk_function_statements,
)
from amp_lint.analysis.values.dtypes import DTypeKind
from amp_lint.analysis.values.literals import string_literal

_MATMUL_FUNCTIONS = frozenset(["torch.matmul", "torch.bmm", "torch.mm"])
_MATMUL_METHODS = frozenset(["matmul", "bmm", "mm"])
_EINSUM_FUNCTIONS = frozenset(["torch.einsum", "torch.functional.einsum"])
_SUMS = frozenset(["sum", "cumsum"])
_SOFTMAX_FUNCTIONS = frozenset(["torch.softmax", "torch.nn.functional.softmax"])
# Methods that keep a tensor's values (and so its magnitude): dtype conversions, views,
# an added axis, zero padding.
_VALUE_KEEPING_METHODS = frozenset(
    ["type_as", "type", "to", "float", "half", "contiguous", "unsqueeze", "detach", "clone"]
)
_VALUE_KEEPING_FUNCTIONS = frozenset(["torch.nn.functional.pad"])


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


# --- sums over the sequence axis ----------------------------------------------------------


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
        if _normalised_over(keys, -2, None, ctx) or _softmaxed_scores(ctx):
            return None
        if not _keys_and_values(keys, right):
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
    if _keys_values(equation, index) and _keys_and_values(*found.operands):
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
        values, _ = _assigned_values(node, ctx)
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


# How linear-attention code names its keys and values. A transposed product or an einsum of
# kᵀv's shape is also every Gram matrix, normal equation and covariance (`A.mT @ A` over
# three coordinates in geometry code), whose contracted axis is short: the names are what
# says the contracted axis is a sequence of keys.
_KEY_NAMES = frozenset(["k", "key", "keys", "k_prime", "kprime", "k_feat", "k_features"])
_VALUE_NAMES = frozenset(["v", "value", "values", "ones_like"])
# Functions whose first argument is the tensor (feature maps, ones of its shape), and
# methods that keep their subject's name (layout, dtype and feature-map methods).
_FEATURE_MAPS = frozenset(["softmax", "elu", "relu", "exp", "sigmoid", "ones_like"])
_MODULES = frozenset(["torch", "F", "nn", "functional"])
_LAYOUT_METHODS = frozenset(
    [
        *("transpose", "permute", "contiguous", "unsqueeze", "view", "reshape", "flatten"),
        *("float", "type_as", "to", "softmax", "exp", "relu", "sigmoid"),
    ]
)


def _keys_and_values(keys: cst.BaseExpression, values: cst.BaseExpression) -> bool:
    """The operands of a kᵀv-shaped contraction are named as keys and values."""
    key, value = _operand_name(keys), _operand_name(values)
    return (
        key is not None
        and value is not None
        and (key.lower() in _KEY_NAMES or key.lower().startswith("k_"))
        and (value.lower() in _VALUE_NAMES or value.lower().startswith("v_"))
    )


def _operand_name(node: cst.BaseExpression) -> str | None:
    """The name a contraction operand is written with: `k` for `k`, `self.k`, `k[:, 0]`,
    `k.transpose(-2, -1)`, `F.elu(k) + 1`, `torch.softmax(k, dim=-1)`; `ones_like` for
    `torch.ones_like(v)`."""
    for _ in range(8):
        if isinstance(node, cst.Name):
            return node.value
        if isinstance(node, cst.Attribute) and node.attr.value in ("mT", "T", "H", "mH"):
            node = node.value
        elif isinstance(node, cst.Attribute):
            return node.attr.value
        elif isinstance(node, cst.Subscript):
            node = node.value
        elif isinstance(node, cst.BinaryOperation):
            node = node.left
        elif isinstance(node, cst.Call):
            inner = _named_through_call(node)
            if inner is None or isinstance(inner, str):
                return inner
            node = inner
        else:
            return None
    return None


def _named_through_call(call: cst.Call) -> cst.BaseExpression | str | None:
    """What names a call's result: its subject (`k.transpose(...)`), its first argument
    (`F.elu(k)`, `torch.ones_like(v)` gives "ones_like"), or nothing (any other call)."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "ones_like":
        return "ones_like"
    if isinstance(func, cst.Name):
        return call.args[0].value if func.value in _FEATURE_MAPS and call.args else None
    if not isinstance(func, cst.Attribute):
        return None
    if isinstance(func.value, cst.Name) and func.value.value in _MODULES:
        return call.args[0].value if func.attr.value in _FEATURE_MAPS and call.args else None
    return func.value if func.attr.value in _LAYOUT_METHODS else None


def _softmaxed_scores(ctx: ExecutionContext) -> bool:
    """The statement computes attention scores, not kᵀv: its result goes through a softmax
    in the same statement (`(q.transpose(-2, -1) @ k).softmax(dim=-1)`) or the name it
    assigns does later in the function (`attn = ...; attn = attn.softmax(dim=-1)`). A
    channels-first layout (…, d, n) makes `q.transpose(-2, -1) @ k` sum the features."""
    statement = ctx.statement
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    if _mentions_softmax(statement):
        return True
    names = {
        target.target.value
        for small in statement.body
        if isinstance(small, cst.Assign)
        for target in small.targets
        if isinstance(target.target, cst.Name)
    }
    function = ctx.frame.function
    if not names or function is None:
        return False
    return any(
        _mentions_softmax(later, names)
        for later in walk_function_statements(function)
        if later is not statement
    )


def _mentions_softmax(node: cst.CSTNode, of: set[str] | None = None) -> bool:
    """A softmax call in `node` (applied to one of the names `of`, when given)."""
    for call in subtree_nodes(node):
        if not isinstance(call, cst.Call):
            continue
        func = call.func
        name = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", "")
        if name not in ("softmax", "log_softmax"):
            continue
        if of is None:
            return True
        subjects = [func.value] if isinstance(func, cst.Attribute) else []
        subjects += [arg.value for arg in call.args[:1]]
        if any(isinstance(subject, cst.Name) and subject.value in of for subject in subjects):
            return True
    return False


def local_assignments(name: cst.Name, ctx: ExecutionContext) -> list[cst.BaseExpression]:
    """The values assigned to `name` by plain assignments in the running function; empty when
    any other binding (a parameter, a tuple target, a loop, `+=`) may give it its value."""
    values, complete = _assigned_values(name, ctx)
    return values if complete else []


def _assigned_values(
    name: cst.Name, ctx: ExecutionContext
) -> tuple[list[cst.BaseExpression], bool]:
    """The values plain assignments in the running function give `name`, and whether those
    are all its bindings."""
    function = ctx.frame.function
    if function is None:
        return [], False
    complete = not _is_parameter(function, name.value)
    values: list[cst.BaseExpression] = []
    for statement in walk_function_statements(function):
        for binding in _bindings(statement, name.value):
            if binding is None:
                complete = False
            else:
                values.append(binding)
    return values, complete


def _bindings(statement: cst.BaseStatement, name: str) -> Iterator[cst.BaseExpression | None]:
    """What `statement` assigns to `name`: a value, or None for a binding not read here."""
    if isinstance(statement, cst.For) and _binds(statement.target, name):
        yield None
    if isinstance(statement, cst.With):
        for item in statement.items:
            if item.asname is not None and _binds(item.asname.name, name):
                yield None
    if not isinstance(statement, cst.SimpleStatementLine):
        return
    for small in statement.body:
        if isinstance(small, cst.Assign):
            for target in small.targets:
                if isinstance(target.target, cst.Name) and target.target.value == name:
                    yield small.value
                elif _binds(target.target, name):
                    yield None
        elif isinstance(small, cst.AnnAssign) and _binds(small.target, name):
            yield small.value if isinstance(small.target, cst.Name) else None
        elif isinstance(small, cst.AugAssign) and _binds(small.target, name):
            yield None


def _binds(target: cst.BaseExpression, name: str) -> bool:
    if isinstance(target, cst.Name):
        return target.value == name
    if isinstance(target, (cst.Tuple, cst.List)):
        return any(_binds(element.value, name) for element in target.elements)
    if isinstance(target, cst.StarredElement):
        return _binds(target.value, name)
    return False


def _is_parameter(function: cst.FunctionDef, name: str) -> bool:
    params = function.params
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            every.append(star)
    return any(param.name.value == name for param in every)


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
