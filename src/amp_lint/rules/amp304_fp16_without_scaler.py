"""AMP304 fp16-without-scaler: backpropagating through float16 autocast without loss scaling."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from amp_lint.analysis.dtypes import FLOAT16
from amp_lint.analysis.module import ModuleFacts
from amp_lint.analysis.training_setup import (
    snippet,
    tensor_backward_calls,
    training_setup,
)
from amp_lint.rules.base import Report, Rule


class Fp16WithoutScaler(Rule):
    code = "AMP304"
    name = "fp16-without-scaler"
    vocabulary = (b"autocast",)
    summary = (
        "Checks for functions that backpropagate (`loss.backward()`, `torch.autograd.backward`, "
        "`torch.autograd.grad`) through a float16 autocast region when the module has no "
        "GradScaler."
    )
    why = """\
Under float16 autocast the backward pass of every autocast op (matmuls, convolutions, linear
layers) runs in float16 too. float16 cannot hold a magnitude below 2**-24 ≈ 6e-8: smaller
gradients **silently become 0**. There is no error and no NaN; the affected weights simply
stop updating, and late in training, when gradients are small, that is most of them.

`torch.amp.GradScaler` exists for this: it multiplies the loss by a large factor (65536 to
start) before `backward()`, so the float16 gradients stay representable, then divides the
float32 parameter gradients by the same factor before the optimizer step, and skips the steps
whose gradients overflowed. PyTorch's AMP recipe pairs every float16 autocast training loop
with one. Measured on CPU (torch 2.13): a linear layer under float16 autocast whose loss
gradient is 1e-8 per output gets an all-zero weight gradient and does not move; float32,
bfloat16 and float16 with a GradScaler all move it.

`torch.autocast("cuda")` without `dtype=` is float16: that is CUDA's default autocast dtype.
bfloat16 has float32's exponent range and needs no scaler."""
    example = """\
import torch

for x, y in loader:
    with torch.autocast("cuda"):
        loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
"""
    fixed_example = """\
import torch

scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    with torch.autocast("cuda"):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
"""
    fix_safety = """\
There is no fix (lint only): adding a GradScaler means rewriting the backward call, every
`optimizer.step()` and gradient clipping (which needs `scaler.unscale_(optimizer)` first),
and saving the scaler's state with checkpoints. Alternatively switch the region to
`dtype=torch.bfloat16` where the hardware supports it."""
    known_limitations = """\
The autocast region and the backward call must be in the same function (or both at module
level): a loss computed under autocast in a helper and backpropagated by its caller is not
seen. Only regions known to be float16 count: an explicit `dtype=torch.float16`, or CUDA's
default (a device spelled as a literal, or the deprecated `torch.cuda.amp.autocast`). A
dtype or device held in a variable is not followed, and `accelerator.autocast()` is left to
accelerate, whose `accelerator.backward(loss)` scales the loss itself.

A module that creates a GradScaler anywhere is not flagged, and neither is a function that
mentions a name containing "scaler" (`scaler.scale(loss).backward()`, a `grad_scaler`
parameter, timm's `loss_scaler(loss, optimizer)`). Framework backward calls that take the
loss as an argument (`accelerator.backward(loss)`, DeepSpeed's `engine.backward(loss)`,
Lightning's `self.manual_backward(loss)` and `fabric.backward(loss)`) are not tensor
backward calls and are never flagged; a tensor's `.backward(gradient)` with a positional
argument is flagged only when the tensor's name contains "loss"."""

    def check_module(self, facts: ModuleFacts) -> Iterator[Report]:
        setup = training_setup(facts.module, facts.names)
        if setup.scalers:
            return
        float16 = {
            id(found.call): found
            for found in setup.autocasts
            if found.region.is_active
            and found.region.dtype == FLOAT16
            and found.region.spelling != "accelerator.autocast"
        }
        if not float16:
            return
        for scope in setup.scopes:
            regions = [float16[id(call)] for call in scope.calls() if id(call) in float16]
            if not regions:
                continue
            backwards = tensor_backward_calls(scope, facts.names)
            if not backwards or scope.mentions("scaler"):
                continue
            region = regions[0]
            where = f"`{snippet(region.call)}` (line {facts.line_of(region.call)})"
            for call in backwards:
                yield Report(call, _message(call, where))


def _message(call: cst.Call, where: str) -> str:
    return (
        f"`{snippet(call)}` backpropagates through the float16 autocast region {where} without "
        "a GradScaler: gradients below 6e-8 silently flush to 0 in float16 and those weights "
        "stop updating; scale the loss with `torch.amp.GradScaler` "
        "(`scaler.scale(loss).backward()`, `scaler.step(optimizer)`, `scaler.update()`) "
        "or use `dtype=torch.bfloat16`"
    )
