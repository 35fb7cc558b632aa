"""AMP203's fix: `custom_fwd` on an autograd Function's forward and `custom_bwd` on its
backward, for the devices of the autocast regions it is applied in, in the spelling the
project's torch floor has (`torch.amp`'s from torch 2.4, `torch.cuda.amp`'s before)."""

from __future__ import annotations

import libcst as cst

from amp_lint.analysis.autograd.dtype_handling import Decorated
from amp_lint.analysis.syntax.module import ModuleFacts
from amp_lint.findings import Edit, Fix, FixSafety
from amp_lint.fixes.amp_api import torch_spelling

# `torch.amp.custom_fwd(device_type=...)` exists from this release on.
_DEVICE_DECORATORS_SINCE = (2, 4)


def custom_fwd_fix(
    forward: cst.FunctionDef,
    backward: cst.FunctionDef | None,
    fwd: Decorated,
    bwd: Decorated | None,
    targets: tuple[str, ...],
    facts: ModuleFacts,
    *,
    cast_inputs: bool = True,
) -> Fix | None:
    """`cast_inputs` false: `custom_fwd` without it, which only records forward's autocast
    state for `custom_bwd` and passes the arguments through untouched (a Function taking
    lists, dicts or layers, which `cast_inputs` would rebuild)."""
    names = facts.names
    torch = torch_spelling(names)
    if torch is None:
        return None
    floor = facts.config.torch_version
    legacy = floor is not None and floor < _DEVICE_DECORATORS_SINCE
    if legacy:
        # `torch.amp.custom_fwd` is torch 2.4's: older releases have the CUDA ones only
        # (`torch.cuda.amp.custom_fwd`), and nothing for CPU autocast.
        if "cuda" not in targets:
            return None
        targets = ("cuda",)
    edits: list[Edit] = []
    added_fwd = [
        _fwd_decorator(torch, d, legacy, cast_inputs) for d in targets if not fwd.covers(d)
    ]
    if added_fwd:
        edits.append(Edit(forward, _with_decorators(forward, added_fwd)))
    if backward is not None and bwd is not None:
        added_bwd = [_bwd_decorator(torch, d, legacy) for d in targets if not bwd.covers(d)]
        if added_bwd:
            edits.append(Edit(backward, _with_decorators(backward, added_bwd)))
    if not edits:
        return None
    spelled = "torch.cuda.amp" if legacy else " and ".join(f'"{d}"' for d in targets)
    return Fix(
        FixSafety.UNSAFE,
        f"Decorate forward with `custom_fwd` and backward with `custom_bwd` ({spelled})",
        edits=tuple(edits),
        imports=("torch",) if torch == "torch" and "torch" not in names.bindings else (),
    )


def _fwd_decorator(torch: str, device: str, legacy: bool, cast_inputs: bool) -> str:
    cast = f"cast_inputs={torch}.float32"
    if legacy:
        legacy_fwd = f"{torch}.cuda.amp.custom_fwd"
        return f"{legacy_fwd}({cast})" if cast_inputs else legacy_fwd
    if not cast_inputs:
        return f'{torch}.amp.custom_fwd(device_type="{device}")'
    return f'{torch}.amp.custom_fwd(device_type="{device}", {cast})'


def _bwd_decorator(torch: str, device: str, legacy: bool) -> str:
    return (
        f"{torch}.cuda.amp.custom_bwd"
        if legacy
        else f'{torch}.amp.custom_bwd(device_type="{device}")'
    )


def _with_decorators(method: cst.FunctionDef, added: list[str]) -> cst.FunctionDef:
    """`added` inserted right under `@staticmethod` (or last, next to the `def`)."""
    decorators = list(method.decorators)
    position = len(decorators)
    for i, decorator in enumerate(decorators):
        expr = decorator.decorator
        if isinstance(expr, cst.Name) and expr.value == "staticmethod":
            position = i + 1
    new = [cst.Decorator(decorator=cst.parse_expression(text)) for text in added]
    return method.with_changes(decorators=[*decorators[:position], *new, *decorators[position:]])
