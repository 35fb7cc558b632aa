"""How a custom `torch.autograd.Function` is set up for the dtypes autocast gives it: the
`custom_fwd` / `custom_bwd` decorators on its methods and the devices they name, and whether a
call of it passes forward half tensors, tensors of two dtypes, or tensors cast already
(AMP203).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m

from amp_lint.analysis.autograd.functions import bound_arguments, cast_parameters
from amp_lint.analysis.interpreter.frames import ExecutionContext
from amp_lint.analysis.syntax.names import ModuleNames
from amp_lint.analysis.syntax.outline import source_text
from amp_lint.analysis.values.dtypes import DTypeKind
from amp_lint.analysis.values.literals import string_literal


@dataclass(frozen=True)
class Decorated:
    """The custom_fwd / custom_bwd decorators on a method: the devices they name (None for a
    `device_type=` that is not a literal, which may be any device)."""

    devices: frozenset[str | None]

    @property
    def present(self) -> bool:
        return bool(self.devices)

    def covers(self, device: str | None) -> bool:
        if not self.devices:
            return False
        return device is None or None in self.devices or device in self.devices


def decorators_of(
    method: cst.FunctionDef, names: ModuleNames, known: dict[str, str | None]
) -> Decorated:
    devices: set[str | None] = set()
    for decorator in method.decorators:
        expr = decorator.decorator
        func = expr.func if isinstance(expr, cst.Call) else expr
        qualified = names.qualified_name(func)
        if qualified not in known:
            continue
        fixed = known[qualified]
        if fixed is not None or not isinstance(expr, cst.Call):
            devices.add(fixed)
            continue
        device = None
        for arg in expr.args:
            if arg.keyword is not None and arg.keyword.value == "device_type":
                text = string_literal(arg.value)
                if text is not None:
                    device = text.split(":", 1)[0]
        devices.add(device)
    return Decorated(frozenset(devices))


def mixed_inputs(forward: cst.FunctionDef, call: cst.Call, ctx: ExecutionContext) -> str | None:
    """ "`offset` is float16 and `self.bias` float32" when the call passes tensors of both
    dtypes to parameters that forward does not cast to a common dtype itself."""
    cast = cast_parameters(forward)
    half: list[str] = []
    single: list[str] = []
    for param, argument in bound_arguments(forward, call):
        if param in cast:
            continue
        dtype = ctx.dtype(argument)
        if dtype.is_half:
            half.append(f"`{source_text(argument)}` is {dtype.describe()}")
        elif dtype.kind is DTypeKind.FLOAT32:
            single.append(f"`{source_text(argument)}` float32")
    if not (half and single):
        return None
    return f"with inputs of two dtypes ({half[0]} and {single[0]})"


def half_argument(forward: cst.FunctionDef, call: cst.Call, ctx: ExecutionContext) -> bool:
    """The call passes forward a tensor known to be half precision."""
    return any(ctx.dtype(argument).is_half for _, argument in bound_arguments(forward, call))


def passes_objects(forward: cst.FunctionDef, call: cst.Call, ctx: ExecutionContext) -> bool:
    """The call passes a container (a list or dict variable, an `nn.ModuleList`) or another
    object the analysis knows is not a tensor: `cast_inputs` rebuilds it, so a list the
    Function appends to or a dict its backward writes into stays empty for the caller
    (reformer, DeepSpeed's Domino linear)."""
    for _, argument in bound_arguments(forward, call):
        value = ctx.value(argument)
        if value.elements is not None or value.each is not None or value.instance_of:
            return True
    return False


def handles_dtypes(forward: cst.FunctionDef, call: cst.Call, ctx: ExecutionContext) -> bool:
    """Forward casts some of its inputs to a common dtype itself (`weight.type_as(input)`),
    or the call casts what it passes (`fn(input.float(), ...)`), or passes a value a dtype
    guard ruled half out for (`if input.dtype == torch.float16: return fn(input.float(),
    ...).half()` above the call): the author dealt with the dtypes autocast produces, and
    only a mismatch that remains is reported."""
    if cast_parameters(forward):
        return True
    for _, argument in bound_arguments(forward, call):
        value = ctx.value(argument)
        if value.conversion is not None or value.dtype.not_half:
            return True
    return False


_AUTOCAST_CONTEXTS = frozenset(
    {
        "torch.autocast",
        "torch.amp.autocast",
        "torch.amp.autocast_mode.autocast",
        "torch.cuda.amp.autocast",
        "torch.cpu.amp.autocast",
    }
)


def restores_forward_autocast(backward: cst.FunctionDef, names: ModuleNames) -> bool:
    """Backward enters autocast in the state forward (or setup_context) saved on `ctx`:
    `with torch.autocast(device, enabled=ctx._fwd_used_autocast, dtype=ctx._dtype):`, what
    `custom_bwd` does, written by hand (DeepSpeed's ZeRO-3 linear, a setup_context-style
    Function, which custom_fwd/custom_bwd cannot decorate)."""
    params = backward.params.params
    if not params:
        return False
    ctx = params[0].name.value
    for item in m.findall(backward.body, m.WithItem(item=m.Call())):
        assert isinstance(item, cst.WithItem) and isinstance(item.item, cst.Call)
        call = item.item
        if names.qualified_name(call.func) not in _AUTOCAST_CONTEXTS:
            continue
        for arg in call.args:
            enabled = arg.keyword is not None and arg.keyword.value == "enabled"
            if enabled and m.findall(arg.value, m.Attribute(value=m.Name(ctx))):
                return True
    return False
