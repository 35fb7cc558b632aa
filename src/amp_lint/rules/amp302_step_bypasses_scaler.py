"""AMP302 step-bypasses-scaler: `optimizer.step()` after a scaled backward."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from amp_lint.analysis.scaler.flow import scaler_flow
from amp_lint.analysis.scaler.hazards import ScalerHazard, function_key
from amp_lint.analysis.scaler.names import SCALER_VOCABULARY
from amp_lint.analysis.scaler.updates import module_updates
from amp_lint.analysis.syntax.module import ModuleFacts
from amp_lint.analysis.syntax.names import dotted_name
from amp_lint.findings import Edit, Fix, FixSafety
from amp_lint.rules.base import Report, Rule
from amp_lint.rules.common import brief, code
from amp_lint.rules.scaler_steps import (
    insert_after,
    source,
    standalone_call,
    via,
    via_steps,
)


class StepBypassesScaler(Rule):
    code = "AMP302"
    name = "step-bypasses-scaler"
    vocabulary = SCALER_VOCABULARY
    summary = (
        "Checks for `optimizer.step()` called directly after `scaler.scale(loss).backward()` "
        "instead of `scaler.step(optimizer)`, or again after `scaler.step(optimizer)` on the "
        "same gradients."
    )
    why = """\
`scaler.scale(loss).backward()` produces gradients multiplied by the loss scale (65536
when training starts). Only `scaler.step(optimizer)` divides them out, checks them for
inf/NaN and skips the update when the float16 backward overflowed. `optimizer.step()`
does neither:

* the update uses the scaled gradients: SGD moves the weights 65536 times too far, and
  Adam, which divides by the gradient's own magnitude, loses its `eps` and weight-decay
  balance;
* a step whose gradients overflowed writes inf/NaN into the weights. With float16, the first
  steps at scale 65536 overflow routinely; GradScaler is built to skip them and lower the
  scale, and bypassing it turns that into NaN weights.

Nothing raises, unless `scaler.update()` follows: with no `scaler.step` or `unscale_` before
it, it fails with `AssertionError: No inf checks were recorded prior to update.`

The same `optimizer.step()` left in *after* `scaler.step(optimizer)` (a leftover of adding
AMP to a float32 loop) bypasses the scaler too: `scaler.step` has unscaled the gradients
in place and stepped, and the plain step updates the weights a second time with the same
gradients. Worse, when the scaler skipped its step because a gradient was inf/NaN, the
plain step applies that gradient. Measured on CPU with `torch.amp.GradScaler("cpu")`
(torch 2.13, a 4x4 linear layer and SGD, lr 0.1): with finite gradients the weights moved
exactly twice as far as with `scaler.step` alone (max |Δw| 0.0816 against 0.0408); with one
gradient entry set to inf, `scaler.step` skipped the update (weights unchanged, scale
halved to 32768) and the extra `optimizer.step()` wrote -inf into that weight."""
    example = """\
import torch

scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    optimizer.step()
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
The fix replaces `optimizer.step()` with `scaler.step(optimizer)` and, when nothing in the
module calls `scaler.update()`, adds it on the line after the function's last such step
(without it the second `scaler.step` raises). It is **unsafe**: it changes the update
(that is the point: the gradients are unscaled and overflowing steps are skipped), and an
`update()` the linter cannot see, in another module, would then run twice per step and raise
`AssertionError: No inf checks were recorded prior to update.`

There is no fix when `step` takes arguments (a closure: GradScaler does not support one),
when the backward was reached through a helper whose scaler is not spelled the same in the
caller, or when `update()` must be added and `optimizer.step()` is not a statement on its
own line."""
    known_limitations = """\
An optimizer is recognised by its constructor (`torch.optim.*`), by being passed to
`scaler.step`/`scaler.unscale_` elsewhere in the module, or by its name (containing "optim",
or "opt" as a word: `opt`, `opt_g`, `d_opt`); `lr_scheduler.step()` and other receivers are
ignored. The walk is the one AMP301 describes: branches that are the non-AMP alternative
(`if scaler is not None: scaler.step(opt) else: opt.step()`, `if not use_amp:`) are not
checked, and conditions that are correlated in other ways may still be reported."""

    def check_module(self, facts: ModuleFacts) -> Iterator[Report]:
        yield from _double_steps(facts)
        hazards = list(scaler_flow(facts).of_kind("bypass"))
        # One `update()` per iteration: added after the function's last bypassing step.
        last: dict[tuple[int, str], ScalerHazard] = {}
        for hazard in sorted(hazards, key=lambda h: facts.line_of(h.node)):
            last[(function_key(hazard.function), source(hazard.backwards[0].scaler))] = hazard
        for hazard in hazards:
            backward = hazard.backwards[0]
            assert isinstance(hazard.node.func, cst.Attribute)
            optimizer = code(hazard.node.func.value)
            scaler = code(backward.scaler)
            consequence = (
                "steps whose gradients overflowed to inf/NaN are applied instead of skipped"
                if hazard.unscaled
                else "the update uses gradients still multiplied by the loss scale (65536 "
                "at first) and steps whose gradients overflowed to inf/NaN are not skipped"
            )
            message = (
                f"`{code(hazard.node)}` after `{code(backward.call)}` "
                f"(line {facts.line_of(backward.call)}) bypasses the GradScaler: {consequence}; "
                f"call `{scaler}.step({optimizer})` and then `{scaler}.update()`"
                f"{via(hazard, facts)}"
            )
            key = (function_key(hazard.function), source(backward.scaler))
            fix = _fix(hazard, facts, last[key] is hazard)
            consequence_briefly = (
                "inf/NaN steps are applied"
                if hazard.unscaled
                else "scaled grads, inf/NaN steps applied"
            )
            scaler, optimizer = brief(scaler, 12), brief(optimizer, 10)
            summary = (
                f"`{brief(hazard.node, 16)}` skips the GradScaler: {consequence_briefly}; use "
                f"`{scaler}.step({optimizer})`"
            )
            yield Report(hazard.node, message, fix, via=via_steps(hazard, facts), summary=summary)


def _fix(hazard: ScalerHazard, facts: ModuleFacts, last: bool) -> Fix | None:
    if hazard.line is None or hazard.via or hazard.node.args:
        return None
    spellings = {source(b.scaler) for b in hazard.backwards}
    if len(spellings) != 1:
        return None
    backward = hazard.backwards[0]
    name = dotted_name(backward.scaler)
    if name is None or (backward.in_callee and not name.startswith("self.")):
        return None
    assert isinstance(hazard.node.func, cst.Attribute)
    scaler = source(backward.scaler)
    optimizer = source(hazard.node.func.value)
    step = cst.parse_expression(f"{scaler}.step({optimizer})")
    title = f"Call `{scaler}.step({optimizer})`"
    if not last or module_updates(facts.module, backward.scaler):
        return Fix(FixSafety.UNSAFE, title, edits=(Edit(hazard.node, step),))
    line = standalone_call(hazard)
    if line is None:
        return None
    stepped = line.with_changes(body=[cst.Expr(step)])
    edit = insert_after(line, f"{scaler}.update()", replaced=stepped)
    return Fix(FixSafety.UNSAFE, title + f" and `{scaler}.update()`", edits=(edit,))


def _double_steps(facts: ModuleFacts) -> Iterator[Report]:
    """`optimizer.step()` after `scaler.step(optimizer)` on the same gradients."""
    for hazard in scaler_flow(facts).of_kind("double_step"):
        assert hazard.step is not None
        step = hazard.step
        message = (
            f"`{code(hazard.node)}` after `{code(step)}` (line {facts.line_of(step)}) updates "
            "the weights a second time with the same (unscaled) gradients, and when the "
            "scaler skipped its step because they hold inf/NaN, this step applies them and "
            f"the weights silently become inf/NaN; remove `{code(hazard.node)}`"
            f"{via(hazard, facts)}"
        )
        summary = (
            f"`{brief(hazard.node, 16)}` after `{brief(step, 24)}` steps twice and applies "
            "inf/NaN grads; remove it"
        )
        yield Report(hazard.node, message, via=via_steps(hazard, facts), summary=summary)
