"""AMP311 clip-after-step: gradients clipped after `scaler.step(optimizer)` used them."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from amp_lint.analysis.scaler.flow import scaler_flow
from amp_lint.analysis.scaler.names import SCALER_VOCABULARY
from amp_lint.analysis.syntax.module import ModuleFacts
from amp_lint.analysis.syntax.outline import positional_arguments
from amp_lint.rules.base import Report, Rule
from amp_lint.rules.common import brief, code
from amp_lint.rules.scaler_steps import via, via_steps


class ClipAfterStep(Rule):
    code = "AMP311"
    name = "clip-after-step"
    vocabulary = SCALER_VOCABULARY
    summary = (
        "Checks for gradient clipping (`clip_grad_norm_`, `clip_grad_value_`) after "
        "`scaler.step(optimizer)` in the same iteration, before the gradients are zeroed or "
        "computed again."
    )
    why = """\
`scaler.step(optimizer)` unscales the gradients and runs `optimizer.step()` at once: the
update is made with the gradients as they are at that moment. A clip placed after it (often
moved there while adding AMP, to keep it away from the scaled gradients) changes gradients
that are no longer used: the clip silently has no effect, every update is unclipped, and
the norm it returns (and that gets logged) describes a step already taken. Nothing raises.

Measured on CPU with `torch.amp.GradScaler("cpu")` (torch 2.13, a 4x4 linear layer, SGD
with lr 0.1, `clip_grad_norm_(params, 0.01)`): clipping after `scaler.step` left the
update exactly as without clipping (max |Δw| 0.0408, gradient norm 0.93), while
`scaler.unscale_(optimizer)` and the clip before `scaler.step` gave the clipped update
(max |Δw| 0.00044).

PyTorch's AMP examples ("Gradient clipping") put the clip between
`scaler.unscale_(optimizer)` and `scaler.step(optimizer)`. A clip with `max_norm=inf`
(`float("inf")`, `math.inf`), used only to measure the norm, is not flagged."""
    example = """\
import torch

scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
"""
    fixed_example = """\
import torch

scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
"""
    fix_safety = """\
There is no fix (lint only): moving the clip changes every update, and it must go with a
`scaler.unscale_(optimizer)` for each optimizer the clipped parameters belong to, which
the linter cannot always tell."""
    known_limitations = """\
The walk is the one AMP301 describes (calls into the module's own functions, methods of
`self` and of objects built from the module's classes are followed; the non-AMP branch of
an `if use_amp:` is not checked). "The same iteration" is the loop body from its start:
a clip at the top of the loop, after the previous iteration's step, is not flagged (nor is
anything after `optimizer.zero_grad()` or a new backward). The clip must name gradient
clipping itself (`torch.nn.utils.clip_grad_norm_` and friends, timm's
`dispatch_clip_grad`, a `model.clip_grad_norm_` method); a helper of another file that
clips is not seen."""

    def check_module(self, facts: ModuleFacts) -> Iterator[Report]:
        for hazard in scaler_flow(facts).of_kind("late_clip"):
            step = hazard.step
            assert step is not None and isinstance(step.func, cst.Attribute)
            scaler = code(step.func.value)
            arguments = positional_arguments(step)
            optimizer = code(arguments[0]) if arguments else "optimizer"
            message = (
                f"`{code(hazard.node)}` clips the gradients after `{code(step)}` (line "
                f"{facts.line_of(step)}) has already updated the weights with them: the clip "
                "silently has no effect and every update is unclipped; clip before the step, "
                f"after `{scaler}.unscale_({optimizer})`{via(hazard, facts)}"
            )
            summary = (
                f"clip after `{brief(step, 22)}` has no effect on the update; clip before it, "
                f"after `{brief(scaler, 12)}.unscale_(...)`"
            )
            yield Report(hazard.node, message, via=via_steps(hazard, facts), summary=summary)
