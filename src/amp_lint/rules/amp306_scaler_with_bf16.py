"""AMP306 scaler-with-bf16: a GradScaler in a module whose mixed precision is all bfloat16."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from amp_lint.analysis.regions.precision_branches import bfloat16_only_calls
from amp_lint.analysis.scaler.names import SCALER_VOCABULARY
from amp_lint.analysis.syntax.module import ModuleFacts
from amp_lint.analysis.training.training_setup import (
    ScalerCall,
    TrainingSetup,
    half_casts,
    mentions_float16,
    snippet,
    training_setup,
)
from amp_lint.analysis.values.dtypes import BFLOAT16, FLOAT16
from amp_lint.findings import Edit, Fix, FixSafety
from amp_lint.rules.base import Report, Rule

BF16_UNSCALE_ERROR = (
    'NotImplementedError: "_amp_foreach_non_finite_check_and_unscale_cuda" not implemented '
    "for 'BFloat16'"
)


class ScalerWithBf16(Rule):
    code = "AMP306"
    name = "scaler-with-bf16"
    vocabulary = SCALER_VOCABULARY
    summary = (
        "Checks for an enabled GradScaler in a module whose autocast regions and model casts "
        "are all bfloat16."
    )
    why = f"""\
Loss scaling exists because float16 cannot represent gradients below 6e-8. bfloat16 has
float32's exponent range (down to about 1e-38), so under bfloat16 autocast a GradScaler
protects nothing: it multiplies the loss, divides the gradients back, checks them for
inf/NaN and synchronises with the host on every step, for nothing.

With **bfloat16 parameters** (`model.to(torch.bfloat16)`, or a LoRA adapter created in the
base model's bfloat16) it stops training on CUDA: the first `scaler.step(optimizer)` raises

```
{BF16_UNSCALE_ERROR}
```

because the CUDA unscale kernel is dispatched only for float32, float64 and float16
(`AT_DISPATCH_FLOATING_TYPES_AND_HALF` in `ATen/native/cuda/AmpKernels.cu`). The CPU kernel
accepts bfloat16 (measured on torch 2.13), so the crash shows only on the GPU. It is a common
report with Hugging Face `fp16=True` on bfloat16 checkpoints."""
    example = """\
import torch

model = Net().cuda().to(torch.bfloat16)
scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
"""
    fixed_example = """\
import torch

model = Net().cuda().to(torch.bfloat16)
scaler = torch.amp.GradScaler("cuda", enabled=False)
for x, y in loader:
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
"""
    fix_safety = """\
The fix passes `enabled=False` to the GradScaler (replacing a literal `enabled=True`): a
disabled scaler returns the loss unscaled from `scale()`, calls `optimizer.step()` from
`step()` and does nothing in `unscale_()` and `update()`, so the training loop stays as it
is. It is **unsafe**: steps whose gradients contain inf or NaN are no longer skipped, and a
disabled scaler's `state_dict()` is empty, so checkpoints it saves cannot be loaded into an
enabled scaler ("The source state dict is empty...") and old checkpoints' scaler state is
ignored. Where the same code also runs in float16, write the condition instead:
`enabled=(amp_dtype == torch.float16)`."""
    known_limitations = """\
The module must show its precision: a bfloat16 autocast region (`dtype=torch.bfloat16`,
or CPU autocast without `dtype=`, whose default is bfloat16) or a model cast to bfloat16,
and nothing float16: no float16 or unknown-dtype region, no `.half()`, and no mention of
`torch.float16` anywhere (code that picks the dtype at run time names both). A dtype held
in a variable, or passed from another module, makes the region unknown and the rule silent.
A GradScaler whose `enabled=` is an expression is assumed to be gated already. A GradScaler
made in a branch taken only for bfloat16 (`elif mixed_precision == "bf16":`, `if args.bf16:`,
`if dtype == torch.bfloat16:`) is flagged whatever else the module uses."""

    def check_module(self, facts: ModuleFacts) -> Iterator[Report]:
        setup = training_setup(facts.module, facts.names)
        scalers = [s for s in setup.scalers if s.enabled is True]
        if scalers and _precisions(setup, facts) == {BFLOAT16}:
            for scaler in scalers:
                summary = f"GradScaler with bfloat16 only: {_NEEDLESS}"
                yield Report(scaler.call, _message(scaler), _fix(scaler), summary=summary)
            return
        # A scaler made in a branch taken only for bfloat16 (`elif precision == "bf16":`),
        # also with `**kwargs` (settings that rarely disable it; no fix then: `enabled=False`
        # after them could repeat a keyword).
        branches = bfloat16_only_calls(facts.module, facts.names)
        for scaler in setup.scalers:
            test = branches.get(id(scaler.call))
            starred = scaler.enabled is None and scaler.enabled_arg is None
            if test is not None and (scaler.enabled is True or starred):
                fix = None if starred else _fix(scaler)
                summary = f"GradScaler in a bfloat16-only branch: {_NEEDLESS}"
                yield Report(scaler.call, _branch_message(scaler, test), fix, summary=summary)


def _precisions(setup: TrainingSetup, facts: ModuleFacts) -> set[str | None]:
    """The half dtypes the module's mixed precision uses; None for a region of unknown dtype."""
    found: set[str | None] = set()
    for autocast in setup.autocasts:
        region = autocast.region
        if region.enabled is False or region.dtype == "float32":
            continue
        found.add(region.dtype)
    if setup.accelerate.instance_names and setup.accelerate.enabled is not False:
        found.add(setup.accelerate.dtype)
    for scope in setup.scopes:
        for cast in half_casts(scope, facts.names):
            found.add(cast.precision)
    if mentions_float16(facts.module, facts.names):
        found.add(FLOAT16)
    return found


# What a summary says of a GradScaler for bfloat16.
_NEEDLESS = "needless, `step` can raise \"...for 'BFloat16'\"; pass `enabled=False`"


def _message(scaler: ScalerCall) -> str:
    return (
        f"`{snippet(scaler.call)}` scales the loss but every autocast region and model cast in "
        "this module is bfloat16, which has float32's range and needs no loss scaling: the "
        "scaler only costs time, and with bfloat16 parameters on CUDA `scaler.step` raises "
        f'"{BF16_UNSCALE_ERROR}"; pass `enabled=False` (or remove the scaler)'
    )


def _branch_message(scaler: ScalerCall, test: cst.BaseExpression) -> str:
    return (
        f"`{snippet(scaler.call)}` is made in a branch taken only for bfloat16 "
        f"(`if {snippet(test)}:`), which has float32's range and needs no loss scaling: the "
        "scaler only costs time and skips steps, and with bfloat16 parameters on CUDA "
        f'`scaler.step` raises "{BF16_UNSCALE_ERROR}"; pass `enabled=False` (or remove the '
        "scaler)"
    )


def _fix(scaler: ScalerCall) -> Fix:
    false = cst.Name("False")
    call = scaler.call
    if scaler.enabled_arg is not None:
        new_args = [
            arg.with_changes(value=false) if arg is scaler.enabled_arg else arg for arg in call.args
        ]
    else:
        new_args = list(call.args)
        keyword = cst.Arg(
            value=false,
            keyword=cst.Name("enabled"),
            equal=cst.AssignEqual(
                whitespace_before=cst.SimpleWhitespace(""),
                whitespace_after=cst.SimpleWhitespace(""),
            ),
        )
        if new_args:
            last = new_args[-1]
            separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            if isinstance(last.comma, cst.Comma):
                # A trailing comma (one argument a line): the new argument goes on its own
                # line, indented like the others.
                keyword = keyword.with_changes(comma=last.comma)
                if len(new_args) > 1 and isinstance(new_args[-2].comma, cst.Comma):
                    separator = new_args[-2].comma
                elif isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace):
                    separator = cst.Comma(whitespace_after=call.whitespace_before_args)
            new_args[-1] = last.with_changes(comma=separator)
        new_args.append(keyword)
    replacement = call.with_changes(args=new_args)
    return Fix(
        FixSafety.UNSAFE, "Disable the GradScaler (`enabled=False`)", (Edit(call, replacement),)
    )
