"""AMP304 fp16-without-scaler: backpropagating through float16 autocast without loss scaling."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from amp_lint.analysis.autograd.graph import fp16_graph
from amp_lint.analysis.interpreter.frames import ExecutionContext
from amp_lint.analysis.syntax.module import ModuleFacts
from amp_lint.analysis.training.training_setup import (
    Scope,
    backpropagated_tensor,
    snippet,
    training_setup,
)
from amp_lint.analysis.values.value import Fp16Graph
from amp_lint.rules.base import Report, Rule
from amp_lint.rules.common import brief


class Fp16WithoutScaler(Rule):
    reported_in_tests = False
    code = "AMP304"
    name = "fp16-without-scaler"
    summary = (
        "Checks for backward calls (`loss.backward()`, `torch.autograd.backward`, "
        "`torch.autograd.grad`) of a tensor computed under a float16 autocast region that "
        "records gradients, in a module with no GradScaler."
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
The region and the backward call are linked by value flow: the tensor differentiated must be
computed from a value made under the float16 region (through assignments, containers, calls
and returns, a region object made at module level, an `@torch.autocast(...)` decorator on a
`forward` or helper, a helper in another linted file that enters the region itself). What
the analysis cannot follow (a loss stored on `self` by one method and backpropagated by
another, a model received as a parameter whose own `forward` is decorated) is not seen. A
trainer file is analysed only when it names some AMP vocabulary (`fp16`, `precision`,
`autocast`, ...). Regions under `torch.no_grad()`, `torch.inference_mode()` or
`torch.set_grad_enabled(False)` (a `with` item or a decorator) record no graph and do not
count; a mode chosen at run time (`set_grad_enabled(train)`) counts as recording. Regions
amp-lint only assumes (library mode, `forward`s assumed to run under the file's autocast,
configured autocast functions) do not count: their caller, and whether it scales the loss,
is not in sight.

Only regions known to be float16 count: an explicit `dtype=torch.float16`, or CUDA's
default (a device spelled as a literal, or the deprecated `torch.cuda.amp.autocast`). A
dtype or device held in a variable is not followed, and `accelerator.autocast()` is left to
accelerate, whose `accelerator.backward(loss)` scales the loss itself.

A module that creates a GradScaler anywhere is not flagged, and neither is a backward in a
function that mentions a name containing "scaler" (`scaler.scale(loss).backward()`, a
`grad_scaler` parameter, timm's `loss_scaler(loss, optimizer)`). Framework backward calls
that take the loss as an argument (`accelerator.backward(loss)`, DeepSpeed's
`engine.backward(loss)`, Lightning's `self.manual_backward(loss)` and
`fabric.backward(loss)`) are not tensor backward calls and are never flagged; a tensor's
`.backward(gradient)` with a positional argument is flagged only when the tensor's name
contains "loss".

Not reported in test files (under a `tests` or `test` folder, `test_*.py`, `*_test.py`,
`conftest.py`): the hazard needs a long training run to show, and tests use half precision
on purpose for a few steps (a litgpt test fitting two batches with `precision="bf16-true"`).
Training scripts, examples and tutorials are reported."""

    node_types = (cst.Call,)

    def check_node(self, node: cst.CSTNode, ctx: ExecutionContext) -> Iterator[Report]:
        assert isinstance(node, cst.Call)
        facts = ctx.facts
        target = backpropagated_tensor(node, facts.names)
        if target is None:
            return
        graph = fp16_graph(ctx.value(target))
        # An assumed region's caller is not in sight, nor is whether it scales the loss.
        if graph is None or graph.assumed:
            return
        if training_setup(facts.module, facts.names).scalers:
            return
        if _scope(ctx).mentions("scaler"):
            return
        summary = (
            f"`{brief(node, 18)}` without GradScaler: float16 grads < 6e-8 silently become 0; use "
            "one or bfloat16"
        )
        yield Report(node, _message(node, _where(graph, facts)), summary=summary)


def _scope(ctx: ExecutionContext) -> Scope:
    function = ctx.frame.function
    return Scope(function) if function is not None else Scope(ctx.facts.module)


def _where(graph: Fp16Graph, facts: ModuleFacts) -> str:
    """The region as written and its line in this file; its file when in another."""
    if graph.node is not None and graph.path == facts.path:
        return f"`{snippet(graph.node)}` (line {facts.line_of(graph.node)})"
    return f"`{graph.spelling}` in {graph.path}"


def _message(call: cst.Call, where: str) -> str:
    return (
        f"`{snippet(call)}` backpropagates through the float16 autocast region {where} without "
        "a GradScaler: gradients below 6e-8 silently flush to 0 in float16 and those weights "
        "stop updating; scale the loss with `torch.amp.GradScaler` "
        "(`scaler.scale(loss).backward()`, `scaler.step(optimizer)`, `scaler.update()`) "
        "or use `dtype=torch.bfloat16`"
    )
