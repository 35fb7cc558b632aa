"""What AMP203 says: the run-time failure, and the remedy that matches the fix it offers
(the decorators, `custom_fwd` without `cast_inputs` where that would rebuild the arguments,
or casting at the call where neither decorator form is right)."""

from __future__ import annotations

import os

import libcst as cst

from amp_lint.analysis.autograd.applied_functions import FunctionClass
from amp_lint.analysis.regions.finder import AutocastRegion
from amp_lint.rules.base import Report
from amp_lint.rules.common import brief, code

# What works for a setup_context-style Function, which the decorators cannot fix.
SETUP_CONTEXT_REMEDY = (
    "compute forward in float32 under `torch.autocast(..., enabled=False)` and save float32 "
    "copies in setup_context"
)


def decorated_setup_context(node: cst.Call, function: FunctionClass) -> Report:
    name = function.info.name
    message = (
        f"`{code(node)}` applies `{name}` (defined at {function.defined_at}), a Function "
        "whose forward takes no `ctx` (setup_context style), with `custom_bwd` on backward: "
        "custom_fwd keeps its state on forward's first argument, so backward raises "
        f"`AttributeError: ... has no attribute '_fwd_used_autocast'`; remove the decorators, "
        f"{SETUP_CONTEXT_REMEDY}"
    )
    summary = (
        f"`{brief(name, 15)}`: custom_bwd on a setup_context Function raises AttributeError; "
        "cast in forward and setup_context"
    )
    return Report(node, message, summary=summary)


def summary_for(
    function: FunctionClass,
    fwd_missing: bool,
    bwd_missing: bool,
    rebuilt: bool = False,
    needs_cast: bool = False,
    kernel: bool = False,
) -> str:
    """`_message` in one short line: which decorator is missing, what breaks, what to add;
    for a Function of another file, where it is defined (the fix goes there)."""
    name = brief(function.info.name, 15)
    if function.uses_setup_context:
        return (
            f"`{name}.forward` gets half inputs, backward mixes dtypes; compute forward and "
            "save inputs in float32"
        )
    if function.path is not None:
        path, line = function.definition
        where = f"`{name}` ({brief(_short_path(path), 30)}:{line})"
        missing = "`custom_fwd`" if fwd_missing else "`custom_bwd`"
        also = "/`custom_bwd`" if fwd_missing and bwd_missing else ""
        return f"{where} lacks {missing}: backward can mix dtypes; add {missing}{also} there"
    if fwd_missing and rebuilt and needs_cast:
        return (
            f"`{name}.forward` gets half inputs; cast them at the call, autocast off "
            "(cast_inputs would copy its lists/objects)"
        )
    if fwd_missing and kernel:
        return (
            f"`{name}.forward` lacks `custom_fwd`: half reaches its kernel; cast_inputs="
            "torch.float32 if it takes float32"
        )
    if fwd_missing:
        fwd = "`custom_fwd` without cast_inputs" if rebuilt else "`torch.amp.custom_fwd`"
        added = fwd + ("/`custom_bwd`" if bwd_missing else "")
        return f"`{name}.forward` lacks `custom_fwd`: backward mixes dtypes; add {added}"
    return f"`{name}.backward` lacks `custom_bwd`: it can mix dtypes; add `torch.amp.custom_bwd`"


def _short_path(path: str) -> str:
    """`ops.py`, or `causal_product/__init__.py` for a package's `__init__.py`."""
    parent, name = os.path.split(path)
    return f"{os.path.basename(parent)}/{name}" if name == "__init__.py" and parent else name


def message_for(
    call: cst.Call,
    function: FunctionClass,
    region: AutocastRegion,
    fwd_missing: bool,
    bwd_missing: bool,
    mixed: str | None,
    remedy: str,
) -> str:
    where = f"`{code(call)}` runs under {region.describe()}"
    if mixed is not None:
        where += f" {mixed}"
    info = function.info
    defined = f" (defined at {function.defined_at})"
    on = f' for device "{region.device}"' if region.device is not None else ""
    if fwd_missing:
        problem = (
            f"`{info.name}.forward`{defined} has no `custom_fwd`{on}, so it receives "
            "half-precision inputs and runs with autocast on while `backward` runs with it "
            "off: backward mixes half and float32 tensors (`expected m1 and m2 to have the "
            "same dtype`) or a custom kernel fails with \"not implemented for 'Half'\""
        )
    else:
        problem = (
            f"`{info.name}.backward`{defined} has no `custom_bwd`{on}, so it does not run with the "
            "autocast state of forward and can mix half and float32 tensors "
            "(`expected m1 and m2 to have the same dtype`)"
        )
    return f"{where}: {problem}; {remedy}"


def remedy_for(
    function: FunctionClass,
    fwd_missing: bool,
    bwd_missing: bool,
    targets: tuple[str, ...],
    rebuilt: bool,
    needs_cast: bool,
    kernel: bool = False,
) -> str:
    """What to do, matching the fix offered: the decorators (without `cast_inputs` where it
    would rebuild the arguments), or casting at the call where neither form is right; where
    forward calls a compiled kernel, `cast_inputs=torch.float32` if that kernel takes
    float32, which only its source says."""
    if function.uses_setup_context:
        return (
            "custom_fwd cannot decorate a forward without `ctx` (it keeps its state on the "
            f"first input, and setup_context saves the inputs uncast): {SETUP_CONTEXT_REMEDY}"
        )
    if rebuilt and needs_cast and fwd_missing:
        return (
            "cast its tensor inputs to float32 at the call and apply it under "
            "`torch.autocast(..., enabled=False)` (`custom_fwd(cast_inputs=...)` would "
            "rebuild the list, dict, layer or callable arguments it takes)"
        )
    if len(targets) == 1:
        device = f'device_type="{targets[0]}"'
        per = ""
    else:
        device = "device_type=..."
        per = " (one per device: " + ", ".join(f'"{d}"' for d in targets) + ")"
    if rebuilt:
        fwd_text = (
            f"`@torch.amp.custom_fwd({device})` (no `cast_inputs`: it would rebuild the "
            "non-tensor arguments; backward then runs in forward's autocast state)"
        )
    elif kernel:
        fwd_text = (
            f"`@torch.amp.custom_fwd({device}, cast_inputs=torch.float32)` if its kernel "
            "takes float32 (no automatic fix: a compiled kernel's dtypes are not visible; one "
            "that takes half only needs its inputs cast to one half dtype instead)"
        )
    else:
        fwd_text = f"`@torch.amp.custom_fwd({device}, cast_inputs=torch.float32)`"
    bwd_text = f"`@torch.amp.custom_bwd({device})`"
    if fwd_missing and bwd_missing:
        return f"decorate forward with {fwd_text} and backward with {bwd_text}{per}"
    if fwd_missing:
        return f"decorate forward with {fwd_text}{per}"
    return f"decorate backward with {bwd_text}{per}"
