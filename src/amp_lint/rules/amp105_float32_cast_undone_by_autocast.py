"""AMP105 float32-cast-undone-by-autocast: `.float()` on an operand of a matmul, linear, conv
or einsum inside an enabled half autocast region, where autocast casts it straight back."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from amp_lint.analysis.interpreter.frames import ExecutionContext
from amp_lint.analysis.regions.finder import CUSTOM_FWD, AutocastRegion
from amp_lint.analysis.syntax.contractions import parse_equation
from amp_lint.analysis.syntax.local_assignments import local_assignments
from amp_lint.analysis.syntax.naming import is_count_or_mask_name, subject_name
from amp_lint.analysis.syntax.outline import positional_arguments, statement_nodes
from amp_lint.analysis.values.dtypes import FLOAT32, DTypeKind, dtype_from_torch_name
from amp_lint.analysis.values.literals import string_literal
from amp_lint.analysis.values.semantics import NN_MODULE_OPS, op_name_for_function, op_result
from amp_lint.findings import Edit, Fix, FixSafety
from amp_lint.fixes.builders import device_code_for_island, fp32_island, torch_name
from amp_lint.rules.base import Report, Rule
from amp_lint.rules.common import brief, code

# The data operands of the ops autocast may lower, by position (einsum: after the equation).
_OPERANDS: dict[str, tuple[int, ...]] = {
    "matmul": (0, 1),
    "mm": (0, 1),
    "bmm": (0, 1),
    "mv": (0, 1),
    "linear": (0, 1, 2),
    "addmm": (0, 1, 2),
    "addbmm": (0, 1, 2),
    "baddbmm": (0, 1, 2),
    "addmv": (0, 1, 2),
    "conv1d": (0, 1, 2),
    "conv2d": (0, 1, 2),
    "conv3d": (0, 1, 2),
    "conv_transpose1d": (0, 1, 2),
    "conv_transpose2d": (0, 1, 2),
    "conv_transpose3d": (0, 1, 2),
    "prelu": (0, 1),
    "chain_matmul": (0, 1, 2, 3),
}
_METHODS = frozenset(["matmul", "mm", "bmm", "mv", "addmm", "baddbmm", "addbmm", "addmv"])
# Steps that keep a tensor's dtype: a `.float()` seen through them is still the operand's.
_SHAPE_METHODS = frozenset(
    [
        "t",
        "transpose",
        "permute",
        "reshape",
        "view",
        "unsqueeze",
        "squeeze",
        "flatten",
        "contiguous",
        "expand",
        "swapaxes",
        "swapdims",
    ]
)
_SHAPE_ATTRIBUTES = frozenset(["T", "mT", "H", "mH"])
_CONVERSIONS = frozenset(["float", "to", "type", "double"])


@dataclass(frozen=True)
class _LoweredOp:
    op: str
    operands: tuple[cst.BaseExpression, ...]


class Float32CastUndoneByAutocast(Rule):
    code = "AMP105"
    name = "float32-cast-undone-by-autocast"
    summary = (
        "Checks for operands cast to float32 (`.float()`, `.to(torch.float32)`) of a matmul, "
        "linear, conv or einsum inside an enabled float16/bfloat16 autocast region, where "
        "autocast casts them back to half precision."
    )
    why = """\
Inside an enabled autocast region, ops on autocast's lower-precision list cast *every*
floating-point float32 input to the autocast dtype, whatever made it float32. So
`a.float() @ b.float()` under `torch.autocast("cpu", dtype=torch.bfloat16)` returns
bfloat16, and under float16 returns float16: the author's float32 computation silently runs
in half precision. Measured on torch 2.13 CPU: `@`, `torch.matmul`, `mm`, `bmm`, `einsum`
(with a summed index), `F.linear`, `addmm`, `baddbmm` and `F.conv2d` of `.float()`,
`.to(torch.float32)`, `.to(dtype=torch.float32)` or `.type(torch.float32)` operands return
float16/bfloat16. On CPU `dot` and `mv` are not on the list and return float32 (CUDA lists
`mv`); amp-lint reads PyTorch's per-device lists rather than hard-coding them.

Where float32 mattered, the result is wrong: a covariance computed as
`x.float().T @ x.float() / n - mean.T * mean` over 4096 samples of features around 30 gives
`inf` under float16 autocast (the second moment sums to 3.7 million, past 65504) and is off
by 164% under bfloat16 (the second moment keeps 8 bits, and the subtraction cancels them).
Rotary embeddings' `inv_freq.float() @ positions.float()` over 4096 positions gives cosines
off by up to 2.0 (of a range of 2) under bfloat16 and float16 autocast: angles of thousands
of radians keep 8 or 11 bits. Hugging Face transformers wraps that line in
`torch.autocast(device_type=..., enabled=False)` for this reason (PR 29285).

`.float()` does what its author meant for elementwise ops (`*`, `+`, `sum`), which promote
to float32, and for anything outside an enabled region; float64 (`.double()`) is never cast
by autocast. To compute a lowered op in float32, disable autocast around it:
`with torch.autocast(device_type=..., enabled=False):` with float32 operands."""
    example = """\
import torch

with torch.autocast("cuda", dtype=torch.float16):
    h = model(x)
    gram = h.float().T @ h.float()  # float16 anyway
"""
    fixed_example = """\
import torch

with torch.autocast("cuda", dtype=torch.float16):
    h = model(x)
    with torch.autocast("cuda", enabled=False):
        gram = h.float().T @ h.float()  # float32
"""
    fix_safety = """\
The fix wraps the statement in `with torch.autocast(<device>, enabled=False):`, using the
region's device when it is a literal and otherwise the device of the cast tensor
(`h.device.type`). It is **unsafe**: the result becomes float32 instead of half, which changes
numerics (that is the point) and the dtype later code sees (a float32 result written in place
into a half buffer then raises). There is no fix unless the statement is a single simple
statement whose every op input is known to be float32 and which calls nothing but torch
functions and tensor methods: in the island a half operand would meet float32 ones and raise,
and a model called there would run in float32. Reached through a call (`via ...`), the island
uses the tensor's device, since the helper may run under other regions."""
    known_limitations = """\
A cast is recognised as an operand written in place (`a.float()`, through `.T`,
`.transpose(...)`, `.view(...)` and other shape steps) or as a local name every assignment of
which is such a cast. nn.Module calls count for the torch.nn layers whose op autocast lowers
(`nn.Linear`, the convolutions). With a region whose device is not known statically, an op is
flagged only when CUDA and CPU both lower it. A `custom_fwd(cast_inputs=torch.float32)`
function runs with autocast disabled and is not flagged."""
    node_types = (cst.Call, cst.BinaryOperation)

    def check_node(self, node: cst.CSTNode, ctx: ExecutionContext) -> Iterator[Report]:
        region = ctx.active_region
        if region is None or not region.lower_precision.is_half or _casts_inputs(ctx):
            return
        lowered = _lowered_op(node, ctx, region)
        if lowered is None or not ctx.dtype(_result_node(node)).is_half:
            return
        casts = [o for o in lowered.operands if _explicit_float32(o, ctx)]
        if not casts:
            return
        half = region.lower_precision.describe()
        cast = casts[0]
        device = f'"{region.device}"' if region.device else "..."
        message = (
            f"`{code(cast)}` is an operand of `{lowered.op}`, which {region.describe()} runs in "
            f"{half}: autocast casts it back, so `{code(node)}` silently computes in {half} "
            f"({_loss(region)}); to compute in float32, run it inside "
            f"`with torch.autocast({device}, enabled=False):`"
        )
        summary = (
            f"`{brief(cast, 18)}` cast back by autocast: `{lowered.op}` silently runs in {half}; "
            "use autocast(enabled=False)"
        )
        yield Report(node, message, _island_fix(node, cast, lowered, region, ctx), summary=summary)


def _loss(region: AutocastRegion) -> str:
    """What computing in the region's dtype costs, in words."""
    if region.dtype == "bfloat16":
        return "bfloat16 keeps 8 significant bits: sums of large terms lose their small differences"
    float16 = "a float16 result past 65504 becomes inf, and 11 significant bits are kept"
    return float16 if region.dtype == "float16" else float16 + "; bfloat16 keeps 8"


def _casts_inputs(ctx: ExecutionContext) -> bool:
    """Running in a `custom_fwd(cast_inputs=...)` forward, where autocast is disabled."""
    function = ctx.frame.function
    if function is None:
        return False
    for decorator in function.decorators:
        call = decorator.decorator
        if (
            isinstance(call, cst.Call)
            and ctx.qualified_name(call.func) in CUSTOM_FWD
            and any(a.keyword is not None and a.keyword.value == "cast_inputs" for a in call.args)
        ):
            return True
    return False


def _result_node(node: cst.CSTNode) -> cst.BaseExpression:
    assert isinstance(node, cst.BaseExpression)
    return node


def _lowered_op(
    node: cst.CSTNode, ctx: ExecutionContext, region: AutocastRegion
) -> _LoweredOp | None:
    """The op `node` runs and its data operands, when autocast lowers it on the region's
    device (read from the op tables through `op_result`)."""
    found = _op(node, ctx)
    if found is None:
        return None
    inputs = [FLOAT32] * len(found.operands)
    return found if op_result(found.op, inputs, region).is_half else None


def _op(node: cst.CSTNode, ctx: ExecutionContext) -> _LoweredOp | None:
    if isinstance(node, cst.BinaryOperation):
        if isinstance(node.operator, cst.MatrixMultiply):
            return _LoweredOp("matmul", (node.left, node.right))
        return None
    if not isinstance(node, cst.Call) or any(a.star for a in node.args):
        return None
    positional = positional_arguments(node)
    qualified = ctx.qualified_name(node.func)
    if qualified is not None:
        op = op_name_for_function(qualified)
        if op == "einsum":
            equation = parse_equation(string_literal(positional[0])) if positional else None
            if equation is None or not equation.contracted:
                return None  # elementwise equations run `mul`, which promotes
            return _LoweredOp(op, tuple(positional[1:]))
        if op in _OPERANDS:
            operands = [positional[i] for i in _OPERANDS[op] if i < len(positional)]
            operands += [
                a.value
                for a in node.args
                if a.keyword is not None and a.keyword.value in ("input", "weight", "bias")
            ]
            return _LoweredOp(op, tuple(operands))
        return None
    func = node.func
    if isinstance(func, cst.Attribute) and func.attr.value in _METHODS:
        if ctx.dtype(func.value).is_known_tensor:
            return _LoweredOp(func.attr.value, (func.value, *positional))
        return None
    instance = ctx.value(func).instance_of
    if instance is not None and instance.startswith("torch.nn.") and positional:
        op = NN_MODULE_OPS.get(instance.rsplit(".", 1)[-1])
        if op is not None and op in _OPERANDS:
            return _LoweredOp(op, (positional[0],))
    return None


def _explicit_float32(node: cst.BaseExpression, ctx: ExecutionContext) -> bool:
    """`x.float()`, `x.to(torch.float32)`, `x.to(dtype=torch.float32)`, `x.type(torch.float32)`
    (seen through shape steps), or a local name only ever assigned such a cast; and float32
    where it is used."""
    if ctx.dtype(node).kind is not DTypeKind.FLOAT32:
        return False
    return _is_cast(node, ctx, frozenset())


def _counts_or_masks(subject: cst.BaseExpression, ctx: ExecutionContext) -> bool:
    """The cast converts integers or booleans (token counts, masks) into a floating tensor:
    a type conversion the op needs, not a request for float32 precision."""
    if ctx.dtype(subject).kind in (DTypeKind.INTEGER, DTypeKind.BOOL):
        return True
    if isinstance(subject, cst.Comparison):  # `(h > 0).float()`: a 0/1 mask, exact in half
        return True
    return is_count_or_mask_name(subject_name(subject))


def _is_cast(node: cst.BaseExpression, ctx: ExecutionContext, seen: frozenset[str]) -> bool:
    node = _through_shape_steps(node)
    if isinstance(node, cst.Name):
        if node.value in seen:
            return False
        values = local_assignments(node, ctx)
        inner = seen | {node.value}
        return bool(values) and all(_is_cast(value, ctx, inner) for value in values)
    if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Attribute):
        return False
    if ctx.qualified_name(node.func) is not None:
        return False  # torch.float(...) is no tensor method
    if _counts_or_masks(node.func.value, ctx):
        return False
    method = node.func.attr.value
    if method == "float":
        return not node.args
    if method in ("to", "type"):
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value != "dtype":
                continue
            if dtype_from_torch_name(ctx.qualified_name(arg.value)) == FLOAT32:
                return True
    return False


def _through_shape_steps(node: cst.BaseExpression) -> cst.BaseExpression:
    while True:
        if isinstance(node, cst.Attribute) and node.attr.value in _SHAPE_ATTRIBUTES:
            node = node.value
        elif (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value in _SHAPE_METHODS
        ):
            node = node.func.value
        elif isinstance(node, cst.Subscript):
            node = node.value
        else:
            return node


# --- the fix ------------------------------------------------------------------------------


def _island_fix(
    node: cst.CSTNode,
    cast: cst.BaseExpression,
    lowered: _LoweredOp,
    region: AutocastRegion,
    ctx: ExecutionContext,
) -> Fix | None:
    line = ctx.statement
    if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
        return None
    if not _island_safe(line, ctx, region):
        return None
    # Reached through a call, the helper may run under other regions: the tensor's device
    # is right wherever it runs.
    device_literal = region.device if not ctx.frame.chain else None
    receiver = _through_shape_steps(cast)
    tensor = receiver
    if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute):
        tensor = receiver.func.value  # `h` of `h.float()`
    device_expr = region.device_expr if not ctx.frame.chain else None
    device = device_code_for_island(device_literal, device_expr, tensor)
    if device is None:
        return None
    torch, needs_import = torch_name(ctx.facts.names)
    return Fix(
        FixSafety.UNSAFE,
        "Run it with autocast disabled",
        edits=(Edit(line, fp32_island(line, device, torch, scripted=ctx.facts.may_be_scripted)),),
        imports=("torch",) if needs_import else (),
    )


def _island_safe(
    line: cst.SimpleStatementLine, ctx: ExecutionContext, region: AutocastRegion
) -> bool:
    """In an fp32 island this statement still runs: every op autocast lowers has float32
    inputs only (a half one would meet float32 ones and raise), and it calls nothing but
    torch functions and tensor methods (a model called there would run in float32)."""
    for inner in statement_nodes(line):
        if isinstance(inner, cst.Call):
            qualified = ctx.qualified_name(inner.func)
            if qualified is None or not qualified.startswith("torch."):
                func = inner.func
                if not isinstance(func, cst.Attribute):
                    return False
                conversion = func.attr.value in _CONVERSIONS | _SHAPE_METHODS
                if not conversion and not ctx.dtype(func.value).is_known_tensor:
                    return False
        lowered = _lowered_op(inner, ctx, region)
        if lowered is not None and any(
            ctx.dtype(o).kind is not DTypeKind.FLOAT32 for o in lowered.operands
        ):
            return False
    return True
