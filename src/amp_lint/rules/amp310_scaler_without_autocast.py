"""AMP310 scaler-without-autocast: a GradScaler scales a loss no autocast region computed."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from amp_lint.analysis.regions.finder import GRAD_SCALERS
from amp_lint.analysis.regions.region import AutocastRegion
from amp_lint.analysis.scaler.autocast import ScaledWithoutAutocast, scaled_without_autocast
from amp_lint.analysis.scaler.names import SCALER_VOCABULARY
from amp_lint.analysis.syntax.module import ModuleFacts
from amp_lint.analysis.syntax.outline import positional_arguments
from amp_lint.analysis.training.training_setup import snippet
from amp_lint.rules.base import Report, Rule
from amp_lint.rules.common import brief, code


class ScalerWithoutAutocast(Rule):
    code = "AMP310"
    name = "scaler-without-autocast"
    vocabulary = SCALER_VOCABULARY
    summary = (
        "Checks for `scaler.scale(loss).backward()` with an enabled GradScaler where the loss "
        "(and the forward it comes from) is computed outside every autocast region, in a "
        "module whose code never enters autocast in float16 or bfloat16 (its only regions, if "
        "any, run in float32 or are disabled)."
    )
    why = """\
A GradScaler does not make training mixed precision: it only multiplies the loss by the
scale before `backward()` and divides the gradients by it in `scaler.step`. The float16
computation comes from `torch.autocast`, which the forward and the loss must run under.
Without it the model runs in float32 as before: no speed-up, no memory saved, plus the
scaler's work on every step (an inf/NaN check over all gradients, the division, the
scale's bookkeeping). Nothing warns; the author believes they train in mixed precision.

Measured on CPU (torch 2.13, `torch.amp.GradScaler("cpu")`, a 64-256-64 MLP, SGD, batch
128): after 20 steps the weights trained with the scaler and no autocast were bit-identical
to plain float32 training; with one thread, the fastest of 300 interleaved steps took 1.04
ms with the scaler against 0.85 ms without (about 1.2 times; tests/test_scaler_topics.py
prints the ratio on the machine it runs on). With `torch.autocast("cpu",
dtype=torch.float16)` around the forward and the loss, the weights differed from float32's
by about 5e-4 relative: the linear layers ran in float16.

A region that is no mixed precision changes nothing: `torch.autocast("cpu",
dtype=torch.float32)` warns "In CPU autocast, but the target dtype is not supported.
Disabling autocast." and a Linear under it returns float32 (torch 2.13, measured); CUDA
autocast accepts float32 without a check (torch/amp/autocast_mode.py validates the dtype
only for other devices) and runs its lower-precision ops in float32; `enabled=False` turns
autocast off."""
    example = """\
import torch

scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
"""
    fixed_example = """\
import torch

scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
"""
    fix_safety = """\
There is no fix (lint only): which statements make up the forward and the loss, and the
device type, are the author's to choose; the fix also changes every step's numbers (that
is its point), and the model must then be checked for float16 hazards (AMP0xx, AMP1xx)."""
    known_limitations = """\
Autocast can be applied far from the loss, so the rule fires only where none can be:
the module's code (comments and docstrings aside: a commented-out region is the commonest
form of the bug) never mentions autocast (any spelling, a parameter or helper named so, a
string) except to open regions that are no mixed precision: `dtype=torch.float32`, or a
literal `enabled=False` outside a `forward` or `__call__` (there it is a float32 island
inside a caller's region); nor accelerate, Lightning, Fabric, DeepSpeed or apex, nor a
half dtype or `.half()` (a half model is AMP305's), nor tiny-cuda-nn (`tinycudann`, whose
fused networks compute in float16 themselves; in a project, in any file of the program). A
bfloat16 region, or one whose dtype or `enabled` is decided at run time, counts as mixed
precision. The GradScaler is built in
the module and not disabled by a literal `enabled=False` (`enabled=use_amp` counts: it is
enabled exactly when AMP is asked for): in the same function, as `self.NAME` in one method,
at module level (or under `if __name__ == "__main__":`) and read by the function, or passed
to a parameter of a module-level function by every call of it in the file (followed three
callers deep), when the function is named nowhere else in the file and no call sits in a
`with` that could be a region; a parameter of a method, or of a function the file never
calls, has unknown callers and is not followed. The loss is assigned from a call in the
same function as the scaled backward, and neither is inside a `with` whose context manager
could be a region (a name such as `with ctx:`, or a call whose name speaks of precision or
contexts, `with amp_ctx():`). In a project, it is also silent when, among the linted files
of the program around the file (those it imports, transitively, those that import it with
theirs, and files of registered classes), a `forward` or `__call__` enters autocast
itself, a call of the function goes to a file whose code mentions autocast, or a file that
names the function mentions autocast in its code (it may call it under a region). In a
single file (the flake8 plugin) only the file itself is seen. A forward made float16 by
code outside the linted files (a model library that autocasts inside its own `forward`) is
not seen."""

    def check_module(self, facts: ModuleFacts) -> Iterator[Report]:
        for found in scaled_without_autocast(facts):
            yield _report(found, facts)


def _report(found: ScaledWithoutAutocast, facts: ModuleFacts) -> Report:
    device = _device(found.constructor, facts)
    assert isinstance(found.scale.func, cst.Attribute)
    scaler = code(found.scale.func.value)
    enabled = "" if _enabled_literally(found.constructor) else " (when it is enabled)"
    if found.inert is None:
        where = "nothing in this file enters autocast"
        short = "without autocast"
    else:
        where = _inert_words(found.inert, facts)
        short = "with a float32 autocast" if found.inert.is_active else "with a disabled autocast"
    message = (
        f"`{code(found.scale)}` scales a loss computed outside any mixed-precision autocast "
        f"region (`{snippet(found.loss)}`, line {facts.line_of(found.loss)}) and {where}: "
        "mixed precision is silently inactive, the forward runs in float32 and "
        f"`{scaler}`{enabled} only multiplies and divides by the scale, at a cost on every "
        "step (assuming the model's own `forward` does not enter autocast: no linted file's "
        "does); wrap the forward and the loss in "
        f'`with torch.autocast("{device}", dtype=torch.float16):`'
        + ("" if found.inert is None else ", or drop the scaler if float32 is meant")
    )
    fix = (
        "wrap forward+loss in `torch.autocast`"
        if found.inert is None
        else "autocast forward+loss in float16, or drop it"
    )
    summary = f"`{brief(scaler, 14)}` {short}: forward runs in float32, AMP inactive; {fix}"
    return Report(found.scale, message, summary=summary)


def _inert_words(region: AutocastRegion, facts: ModuleFacts) -> str:
    """What the file's only autocast region does instead of mixed precision."""
    assert region.node is not None
    opened = f"`{brief(region.node, 60)}` (line {facts.line_of(region.node)})"
    if not region.is_active:
        return f"the file's only autocast region, {opened}, is disabled"
    return (
        f"the file's only autocast region, {opened}, runs in float32: CUDA autocast then runs "
        'its float16 ops in float32, CPU autocast warns "the target dtype is not supported. '
        'Disabling autocast."'
    )


def _device(constructor: cst.Call, facts: ModuleFacts) -> str:
    fixed = GRAD_SCALERS.get(facts.names.qualified_name(constructor.func) or "")
    if fixed is not None:
        return fixed
    arguments = positional_arguments(constructor)
    device = next(
        (a.value for a in constructor.args if a.keyword and a.keyword.value == "device"),
        arguments[0] if arguments else None,
    )
    if isinstance(device, cst.SimpleString) and isinstance(device.evaluated_value, str):
        return device.evaluated_value
    return "cuda"


def _enabled_literally(constructor: cst.Call) -> bool:
    for arg in constructor.args:
        if arg.keyword is not None and arg.keyword.value == "enabled":
            return isinstance(arg.value, cst.Name) and arg.value.value == "True"
    return not any(arg.star for arg in constructor.args)
