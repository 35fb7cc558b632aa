"""AMP301 clip-before-unscale: gradients clipped while GradScaler still scales them."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from amp_lint.analysis.scaler.flow import scaler_flow
from amp_lint.analysis.scaler.hazards import ScalerFlow, ScalerHazard, function_key
from amp_lint.analysis.scaler.names import SCALER_VOCABULARY
from amp_lint.analysis.syntax.module import ModuleFacts
from amp_lint.analysis.syntax.outline import positional_arguments
from amp_lint.findings import Fix, FixSafety
from amp_lint.rules.base import Report, Rule
from amp_lint.rules.common import brief, code
from amp_lint.rules.scaler_steps import insert_before, source, via, via_steps


class ClipBeforeUnscale(Rule):
    code = "AMP301"
    name = "clip-before-unscale"
    vocabulary = SCALER_VOCABULARY
    summary = (
        "Checks for gradient clipping (`torch.nn.utils.clip_grad_norm_`, `clip_grad_value_`, "
        "FSDP's `model.clip_grad_norm_`) after `scaler.scale(loss).backward()` without "
        "`scaler.unscale_(optimizer)` in between."
    )
    why = """\
`scaler.scale(loss).backward()` leaves every gradient multiplied by the loss scale (65536
when training starts, then whatever the scaler settles on). `scaler.step(optimizer)`
divides it out again just before the update, so code between the two sees *scaled*
gradients. Clipping them compares `scale * ‖g‖` with `max_norm`: the threshold is in effect
`max_norm / scale`, nearly every step is clipped, and once `scaler.step` unscales, the
update is up to 65536 times smaller than intended. Nothing raises and nothing is NaN;
training just stalls, and the norm that `clip_grad_norm_` returns (and that people log)
is 65536 times too large.

PyTorch's AMP examples ("Gradient clipping") call `scaler.unscale_(optimizer)` first, which
unscales in place and lets `scaler.step` know not to do it again. Hugging Face accelerate's
`accelerator.clip_grad_norm_` does this itself and is not flagged."""
    example = """\
import torch

scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
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
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
"""
    fix_safety = """\
The fix inserts `scaler.unscale_(optimizer)` on its own line before the clip, with the
scaler and optimizer of the function's `scaler.step(optimizer)` call. It is **unsafe**: it
changes the update (which is the point: the clip now acts on the real gradients), the
value the clip returns, and it raises `RuntimeError: unscale_() has already been called on
this optimizer since the last update().` if something the linter cannot see (a helper in
another module) unscales the same optimizer before the next `update()`.

There is no fix when the function has no `scaler.step(...)`, more than one, or already
calls `scaler.unscale_` (after the clip: move it up by hand); when the clip runs more often
than the step (inside a loop over parameter groups, or on every micro-batch while the step
waits for the accumulation boundary: unscaling there would raise on the second
micro-batch); or when the clip is reached through a call into a helper."""
    known_limitations = """\
The order is followed within one function and into the module's own functions, `self.`
methods (inherited from the module's classes too) and methods of objects built from the
module's classes (`self.engine = AmpEngine()` in `__init__`, or `engine = AmpEngine()` in
the function) that it calls; a backward and a clip in different methods that a caller
runs in turn (`self.engine.backward_loss(loss); self._clip()`) are seen only from that
caller. An object received as a parameter (`runner.engine`, a framework's precision
plugin) may be of any class and is not followed, nor are calls into other files: the
catalyst (`OptimizerCallback`) and Lightning (`OptimizerLoop`) bugs of this kind are
out of reach. Branches
are merged optimistically: an `unscale_` on any path counts, so
`if use_amp: scaler.unscale_(opt)` before an unconditional clip passes, and branches that
are the non-AMP alternative (`else:` of a branch that calls `scaler.step`, `if not
use_amp:`) are not checked. Any `scaler.unscale_` counts, whichever optimizer it names. A
scaler is recognised by its constructor (`torch.amp.GradScaler`, `torch.cuda.amp.GradScaler`,
`torch.GradScaler`, FSDP's `ShardedGradScaler`), by `x.scale(loss).backward()`, or, for a
scaler the caller hands in, by `grad_scaler.step(optimizer)` on a name containing "scaler"
(the scaled backward then happened in the caller); one created with `enabled=False` is
ignored."""

    def check_module(self, facts: ModuleFacts) -> Iterator[Report]:
        flow = scaler_flow(facts)
        fixed: set[int] = set()
        for hazard in flow.of_kind("clip"):
            step = _step_call(hazard, flow)
            if not hazard.backwards and step is None:
                continue
            fix = _fix(hazard, flow, fixed)
            scaler, optimizer = "scaler", "optimizer"
            if hazard.backwards:
                scaler = code(hazard.backwards[0].scaler)
            if step is not None:
                assert isinstance(step.func, cst.Attribute)
                scaler = code(step.func.value)
                optimizer = code(positional_arguments(step)[0])
            if hazard.backwards:
                backward = hazard.backwards[0]
                whose = f"of `{code(backward.call)}` (line {facts.line_of(backward.call)})"
            else:
                assert step is not None
                whose = (
                    f"that `{code(step)}` (line {facts.line_of(step)}) unscales only later (the "
                    "backward, made by the caller, was scaled)"
                )
            message = (
                f"`{code(hazard.node)}` clips the gradients {whose} while they are still "
                "multiplied by the loss scale (65536 at first): the clip threshold is in effect "
                "divided by the scale and the update silently shrinks; call "
                f"`{scaler}.unscale_({optimizer})` before clipping{via(hazard, facts)}"
            )
            summary = (
                "clipping loss-scaled gradients silently shrinks the update; call "
                f"`{brief(scaler, 12)}.unscale_({brief(optimizer, 10)})` first"
            )
            yield Report(hazard.node, message, fix, via=via_steps(hazard, facts), summary=summary)


def _step_call(hazard: ScalerHazard, flow: ScalerFlow) -> cst.Call | None:
    """The function's only `scaler.step(optimizer)` call (one spelling), if it has one."""
    steps = flow.steps.get(function_key(hazard.function), [])
    spellings = {source(call) for call, _ in steps if positional_arguments(call)}
    if len(spellings) != 1:
        return None
    return steps[0][0]


def _fix(hazard: ScalerHazard, flow: ScalerFlow, fixed: set[int]) -> Fix | None:
    key = function_key(hazard.function)
    if hazard.line is None or hazard.via or key in fixed or flow.unscales.get(key):
        return None
    step = _step_call(hazard, flow)
    if step is None:
        return None
    step_path = next(path for call, path in flow.steps[key] if call is step)
    clip_path = hazard.path
    if clip_path[: len(step_path)] != step_path:
        return None  # the step is nested deeper (an accumulation boundary): clip runs more
    if any(isinstance(node, (cst.For, cst.While)) for node in clip_path[len(step_path) :]):
        return None  # the clip runs several times per step
    assert isinstance(step.func, cst.Attribute)
    scaler = source(step.func.value)
    optimizer = source(positional_arguments(step)[0])
    fixed.add(key)
    edit = insert_before(hazard.line, f"{scaler}.unscale_({optimizer})")
    return Fix(FixSafety.UNSAFE, f"Call `{scaler}.unscale_({optimizer})` first", edits=(edit,))
