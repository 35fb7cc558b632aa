"""AMP303 missing-scaler-update: `scaler.step` once per iteration without `scaler.update()`."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from amp_lint.analysis.scaler.flow import scaler_flow
from amp_lint.analysis.scaler.hazards import ScalerHazard
from amp_lint.analysis.scaler.names import SCALER_VOCABULARY
from amp_lint.analysis.scaler.updates import module_updates
from amp_lint.analysis.syntax.module import ModuleFacts
from amp_lint.findings import Fix, FixSafety
from amp_lint.rules.base import Report, Rule
from amp_lint.rules.common import brief, code, quoted_error
from amp_lint.rules.scaler_steps import RUNTIME_ERROR, insert_after, source, standalone_call


class MissingScalerUpdate(Rule):
    code = "AMP303"
    name = "missing-scaler-update"
    vocabulary = SCALER_VOCABULARY
    summary = (
        "Checks for `scaler.step(optimizer)` in a training loop (or in a function run once "
        "per step, such as `train_step`) with no `scaler.update()` after it."
    )
    why = f"""\
GradScaler needs `scaler.update()` once per iteration, after the `scaler.step(...)` calls:
it adjusts the scale (halving it after an overflow, growing it after 2000 clean steps) and
clears the per-optimizer record of the step. Without it the second `scaler.step` on the same
optimizer raises

```
{RUNTIME_ERROR}
```

Calling `update()` only once after the loop fails the same way, at the second iteration.
The error shows on the first run with AMP enabled, which with `GradScaler(enabled=use_amp)`
may be long after the code was written."""
    example = """\
import torch

scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
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
The fix adds `scaler.update()` on the line after `scaler.step(...)` (after the loop, for
`for optimizer in optimizers: scaler.step(optimizer)`). It is **unsafe**,
although it is what the API requires: the linter sees one module, and when the `update()`
lives elsewhere (a training loop in another module that calls this `train_step`), the
added call makes two updates per step, and the second raises
`AssertionError: No inf checks were recorded prior to update.` It also starts the scale
adjustments, which decide from then on which steps are skipped.

There is no fix when `update()` is called only after the loop (move it into the loop by
hand), when any other `update()` of that scaler appears in the module, or when the step is
not a statement on its own line."""
    known_limitations = """\
A step outside any loop is reported only when its function looks like it runs once per step:
its name contains "step", "train", "iter", "batch", "epoch", "fit", "optimi" or "backward",
or the module calls it from a loop. Any `update()` of a scaler with the same last name
(`self.scaler`, `trainer.scaler`) anywhere in the function (or in the module's functions
it calls) counts, whatever the path. `for optimizer in optimizers: scaler.step(optimizer)`
followed by one `update()` is correct and not reported."""

    def check_module(self, facts: ModuleFacts) -> Iterator[Report]:
        for hazard in scaler_flow(facts).of_kind("no_update"):
            assert isinstance(hazard.node.func, cst.Attribute)
            scaler = code(hazard.node.func.value)
            if hazard.detail == "after_loop":
                what = f"`{scaler}.update()` is called only after the loop"
                advice = f"call `{scaler}.update()` after each `{scaler}.step(...)`, in the loop"
            else:
                what = f"no `{scaler}.update()` follows it"
                advice = f"call `{scaler}.update()` after `{scaler}.step(...)`"
            message = (
                f"`{code(hazard.node)}` runs once per training step but {what}: the second "
                f"step raises `{RUNTIME_ERROR}`; {advice}"
            )
            scaler = brief(scaler, 10)
            missing = "only after the loop" if hazard.detail == "after_loop" else "missing"
            error = quoted_error(RUNTIME_ERROR.split(": ", 1)[-1], 33)
            summary = (
                f"`{scaler}.update()` {missing}: the next step raises {error}; call it each step"
            )
            yield Report(hazard.node, message, _fix(hazard, facts), summary=summary)


def _fix(hazard: ScalerHazard, facts: ModuleFacts) -> Fix | None:
    assert isinstance(hazard.node.func, cst.Attribute)
    scaler = hazard.node.func.value
    if hazard.detail != "never" or module_updates(facts.module, scaler):
        return None
    call = f"{source(scaler)}.update()"
    if hazard.optimizer_loop is not None:
        # Once per iteration, after stepping every optimizer.
        edit = insert_after(hazard.optimizer_loop, call)
        return Fix(FixSafety.UNSAFE, f"Call `{call}` after the loop over optimizers", edits=(edit,))
    line = standalone_call(hazard)
    if line is None:
        return None
    return Fix(FixSafety.UNSAFE, f"Call `{call}` after the step", edits=(insert_after(line, call),))
