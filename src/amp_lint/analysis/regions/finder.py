"""Autocast regions: where code runs under torch.autocast, on which device, in which dtype.

Recognised spellings: `torch.autocast`, `torch.amp.autocast`, the deprecated
`torch.cuda.amp.autocast` / `torch.cpu.amp.autocast` (any import alias, via ModuleNames),
Hugging Face accelerate's `accelerator.autocast()`, used as `with` items, as decorators, or
stored in a variable and entered later. Regions also come from assumptions (an nn.Module's
forward in a file that uses fp16 autocast; configured functions).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from amp_lint.analysis.regions.region import AutocastRegion
from amp_lint.analysis.syntax.names import ModuleNames, dotted_name
from amp_lint.analysis.syntax.outline import small_statements
from amp_lint.analysis.values.dtypes import BFLOAT16, FLOAT16, dtype_from_torch_name
from amp_lint.analysis.values.literals import string_literal
from amp_lint.analysis.values.optables import load_op_tables

# Decorator -> the device it is fixed to (None: the `device_type=` argument says).
CUSTOM_FWD = {
    "torch.amp.custom_fwd": None,
    "torch.amp.autocast_mode.custom_fwd": None,
    "torch.cuda.amp.custom_fwd": "cuda",
    "torch.cuda.amp.autocast_mode.custom_fwd": "cuda",
}
CUSTOM_BWD = {
    "torch.amp.custom_bwd": None,
    "torch.amp.autocast_mode.custom_bwd": None,
    "torch.cuda.amp.custom_bwd": "cuda",
    "torch.cuda.amp.autocast_mode.custom_bwd": "cuda",
}


# Qualified names of the autocast context managers, with their device and argument order.
_TORCH_AUTOCAST = ("torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast")
_DEVICE_AUTOCAST = {
    "torch.cuda.amp.autocast": "cuda",
    "torch.cuda.amp.autocast_mode.autocast": "cuda",
    "torch.cpu.amp.autocast": "cpu",
    "torch.cpu.amp.autocast_mode.autocast": "cpu",
}
# transformers' `maybe_autocast` takes torch.autocast's arguments and opens the same region
# (or none when it would change nothing); its models write their float32 islands with it.
_AUTOCAST_WRAPPERS = ("transformers.utils.generic.maybe_autocast", "utils.generic.maybe_autocast")


def _opens_torch_autocast(qualified: str | None) -> bool:
    """`torch.autocast` itself, or a wrapper that takes its arguments."""
    if qualified is None:
        return False
    return qualified in _TORCH_AUTOCAST or qualified.lstrip(".").endswith(_AUTOCAST_WRAPPERS)


# torch.get_autocast_dtype defaults: float16 on CUDA (and XPU), bfloat16 on CPU.
_DEFAULT_DTYPE = {"cuda": FLOAT16, "xpu": FLOAT16, "cpu": BFLOAT16, "mps": FLOAT16}
_ACCELERATE_PRECISION = {"fp16": FLOAT16, "bf16": BFLOAT16}
GRAD_SCALERS = {
    "torch.amp.GradScaler": None,
    "torch.amp.grad_scaler.GradScaler": None,
    "torch.GradScaler": None,
    "torch.cuda.amp.GradScaler": "cuda",
    "torch.cuda.amp.grad_scaler.GradScaler": "cuda",
    "torch.cpu.amp.GradScaler": "cpu",
}
ACCELERATOR_CLASSES = ("accelerate.Accelerator", "accelerate.accelerator.Accelerator")

__all__ = ["AutocastRegion", "accelerate_settings", "grad_scaler_device", "region_from_call"]


def region_from_call(
    call: cst.Call, names: ModuleNames, accelerate: AccelerateSettings
) -> AutocastRegion | None:
    """The region a call such as `torch.autocast("cuda", dtype=torch.bfloat16)` opens."""
    qualified = names.qualified_name(call.func)
    if qualified is not None and _opens_torch_autocast(qualified):
        device_expr = call_argument(call, 0, "device_type")
        device = _device_literal(device_expr)
        dtype = _dtype_argument(call, 1, names, device)
        enabled = flag_literal(call_argument(call, 2, "enabled"))
        if not supports_autocast(device, dtype):
            enabled = False  # the targeted torch disables (or refuses) this region
        return AutocastRegion(device, dtype, enabled, qualified, call, device_expr)
    if qualified in _DEVICE_AUTOCAST:
        device = _DEVICE_AUTOCAST[qualified]
        dtype = _dtype_argument(call, 1, names, device)
        enabled = flag_literal(call_argument(call, 0, "enabled"))
        return AutocastRegion(device, dtype, enabled, qualified, call, None)
    if accelerate.is_accelerator_autocast(call):
        return AutocastRegion(
            None, accelerate.dtype, accelerate.enabled, "accelerator.autocast", call
        )
    return None


def casting_decorator_region(call: cst.Call, names: ModuleNames) -> AutocastRegion | None:
    """`@torch.amp.custom_fwd(device_type=..., cast_inputs=torch.float32)` on a function (any
    function, not only a Function's forward): under an autocast of its device it casts the
    floating inputs and runs the body with autocast off, a disabled region (the body's
    inputs are cast by casts_inputs). Without `cast_inputs` it only records the state."""
    qualified = names.qualified_name(call.func)
    if qualified not in CUSTOM_FWD or casts_inputs_to(call, names) is None:
        return None
    device_expr = call_argument(call, 0, "device_type")
    device = CUSTOM_FWD[qualified] or _device_literal(device_expr)
    spelling = f"{qualified}(cast_inputs=...)"
    return AutocastRegion(device, None, False, spelling, call, device_expr, casts_inputs=True)


def casts_inputs_to(call: cst.Call, names: ModuleNames) -> str | None:
    """The dtype name `cast_inputs=` gives (`"float32"`), or None without it."""
    for argument in call.args:
        if argument.keyword is not None and argument.keyword.value == "cast_inputs":
            qualified = names.qualified_name(argument.value) or ""
            return qualified.rpartition(".")[2] or "float32"
    return None


def supports_autocast(device: str | None, dtype: str | None) -> bool:
    """Whether the targeted torch runs `torch.autocast(device, dtype=dtype)` as an autocast
    region: MPS accepts float16 from torch 2.5 and bfloat16 from 2.6; before, autocast warns
    and disables itself for that dtype, or refuses the device (the op table's [support])."""
    if device != "mps" or dtype is None:
        return True
    return dtype in load_op_tables().mps_autocast_dtypes


def region_arguments(
    call: cst.Call, region: AutocastRegion
) -> tuple[cst.BaseExpression | None, cst.BaseExpression | None]:
    """The device and dtype arguments of the autocast call that opened `region`."""
    if _opens_torch_autocast(region.spelling):
        return call_argument(call, 0, "device_type"), call_argument(call, 1, "dtype")
    if region.spelling in _DEVICE_AUTOCAST:
        return None, call_argument(call, 1, "dtype")
    return None, None


def default_dtype(device: str | None) -> str | None:
    """What `torch.autocast(device)` without `dtype=` uses: float16 on CUDA and XPU,
    bfloat16 on CPU; None when the device is not known."""
    return _DEFAULT_DTYPE.get(device or "")


def grad_scaler_device(call: cst.Call, names: ModuleNames) -> tuple[bool, str | None]:
    """(is a GradScaler constructor, its device when known)."""
    qualified = names.qualified_name(call.func)
    if qualified not in GRAD_SCALERS:
        return False, None
    fixed = GRAD_SCALERS[qualified]
    if fixed is not None:
        return True, fixed
    device_arg = call_argument(call, 0, "device")
    return True, _device_literal(device_arg) if device_arg is not None else "cuda"


@dataclass(frozen=True)
class AccelerateSettings:
    """What `Accelerator(mixed_precision=...)` calls in the module say, and the names bound
    to Accelerator instances."""

    instance_names: frozenset[str] = frozenset()
    dtype: str | None = None
    enabled: bool | None = None

    def is_accelerator_autocast(self, call: cst.Call) -> bool:
        func = call.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "autocast":
            return False
        receiver = dotted_name(func.value)
        if receiver is None:
            return False
        last = receiver.rsplit(".", 1)[-1]
        return receiver in self.instance_names or last.lower().endswith("accelerator")


def accelerate_settings(module: cst.Module, names: ModuleNames) -> AccelerateSettings:
    instance_names: set[str] = set()
    precisions: set[str | None] = set()
    for small in small_statements(module):
        if not isinstance(small, cst.Assign) or not isinstance(small.value, cst.Call):
            continue
        if names.qualified_name(small.value.func) not in ACCELERATOR_CLASSES:
            continue
        for target in small.targets:
            name = dotted_name(target.target)
            if name:
                instance_names.add(name)
        # Without the argument, `accelerate launch` configuration decides: unknown here.
        precisions.add(string_literal(call_argument(small.value, 2, "mixed_precision")))
    frozen = frozenset(instance_names)
    if len(precisions) != 1 or None in precisions:
        return AccelerateSettings(frozen, None, None)
    (precision,) = precisions
    if precision == "no":
        return AccelerateSettings(frozen, None, False)
    return AccelerateSettings(frozen, _ACCELERATE_PRECISION.get(precision or ""), None)


def call_argument(call: cst.Call, position: int, keyword: str) -> cst.BaseExpression | None:
    """The argument given by `keyword`, or else the one at `position` among the positional
    ones; None when the call passes neither."""
    positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    return positional[position].value if position < len(positional) else None


def _device_literal(node: cst.BaseExpression | None) -> str | None:
    text = string_literal(node)
    return text.split(":", 1)[0] if text else None


def flag_literal(node: cst.BaseExpression | None) -> bool | None:
    """A flag argument's value: True or False written as such, True when absent (the default
    of the flags read here: `enabled`, `mode`), None when decided at run time."""
    if node is None:
        return True
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


def _dtype_argument(
    call: cst.Call, position: int, names: ModuleNames, device: str | None
) -> str | None:
    node = call_argument(call, position, "dtype")
    if node is None:
        return _DEFAULT_DTYPE.get(device or "")
    dtype = dtype_from_torch_name(names.qualified_name(node))
    if dtype is None:
        return None
    return dtype.precision if dtype.is_half else dtype.kind.value
