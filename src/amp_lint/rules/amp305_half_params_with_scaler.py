"""AMP305 half-params-with-scaler: float16 parameters under a GradScaler or an Adam optimizer."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from amp_lint.analysis.dtypes import FLOAT16
from amp_lint.analysis.literals import number_literal
from amp_lint.analysis.module import ModuleFacts
from amp_lint.analysis.scaler_names import SCALER_VOCABULARY
from amp_lint.analysis.training_setup import (
    ADAM_DEFAULT_EPS,
    HalfCast,
    OptimizerCall,
    Scope,
    half_casts,
    optimizer_calls,
    snippet,
    training_setup,
)
from amp_lint.rules.base import Report, Rule
from amp_lint.rules.common import FLOAT16_ROUNDS_TO_ZERO_BELOW, brief

UNSCALE_ERROR = "ValueError: Attempting to unscale FP16 gradients."


class HalfParamsWithScaler(Rule):
    code = "AMP305"
    name = "half-params-with-scaler"
    vocabulary = (*SCALER_VOCABULARY, b"half", b"float16")
    summary = (
        "Checks for models cast to float16 (`model.half()`, `model.to(torch.float16)`) whose "
        "parameters go to an optimizer stepped through a GradScaler, or to an Adam-family "
        "optimizer with an eps that float16 rounds to 0 (the default 1e-8)."
    )
    why = f"""\
Mixed precision keeps the **parameters in float32** and lets autocast run each op in float16.
Casting the model itself to float16 gives float16 parameters, float16 gradients and float16
optimizer state, and two things break:

* **GradScaler refuses float16 gradients.** `scaler.step(optimizer)` (or
  `scaler.unscale_(optimizer)`) raises

  ```
  {UNSCALE_ERROR}
  ```

  (measured with `torch.amp.GradScaler("cpu")` on torch 2.13; the check is in
  `GradScaler._unscale_grads_` and is the same on CUDA). Unscaling in float16 would lose the
  very gradients the scaler exists to protect.
* **Adam's eps rounds to 0.** Adam, AdamW, Adamax, NAdam and RAdam keep their moment
  estimates in the parameters' dtype and divide by `sqrt(v) + eps`. The default eps, 1e-8,
  is 0 in float16, and after the first step `v = 0.001 * grad**2` underflows to 0 for any
  gradient below about 5e-3: the division gives 0/0 = NaN for a zero gradient and ±inf for
  a small one, and the parameter is destroyed at the first step. Measured on CPU (torch
  2.13, both the for-loop and the foreach implementation): gradients [0, 1e-4, 0.1] on
  float16 parameters of 1.0 give parameters [nan, -inf, 0.999] after one Adam step (and
  gradients 1e-3, 3e-3 and 5e-3 all give -inf); eps=1e-4 gives [1.0, 0.999, 0.999]."""
    example = """\
import torch

model = Net().cuda().half()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
scaler = torch.amp.GradScaler("cuda")

for x, y in loader:
    loss = loss_fn(model(x.half()), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)  # ValueError: Attempting to unscale FP16 gradients.
    scaler.update()
"""
    fixed_example = """\
import torch

model = Net().cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
scaler = torch.amp.GradScaler("cuda")

for x, y in loader:
    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
"""
    fix_safety = """\
There is no fix (lint only): the cure is to keep the parameters in float32 and run the
forward pass under `torch.autocast(..., dtype=torch.float16)`, which changes memory use,
speed and numerics, and usually the input casts around the model too. For deliberately
pure-float16 training without a GradScaler, an Adam eps that float16 can represent
(1e-4 is common) avoids the NaN, but small gradients still vanish."""
    known_limitations = """\
The cast and the optimizer are matched by name: the optimizer must receive
`model.parameters()` (or `named_parameters()`, in any expression, such as parameter groups)
of the name the cast was written on or assigned to, in the same function, or in the same
class for `self.` attributes. A cast written after every `backward()`/`step()` of its
function (half precision for export or inference after training) is not flagged. A model
that loads float16 weights (`from_pretrained(..., torch_dtype=torch.float16)`) is not seen.
The GradScaler must be created in the same module (enabled, or enabled by a run-time
condition); Adam-family optimizers are `torch.optim`'s, and an eps held in a variable is
assumed to be fine."""

    def check_module(self, facts: ModuleFacts) -> Iterator[Report]:
        if facts.source is not None and b"optim" not in facts.source:
            # Every report names a `torch.optim.` optimizer, whose name resolves only through
            # code that spells `optim`; the vocabulary alone admits every file saying `half`.
            return
        setup = training_setup(facts.module, facts.names)
        scalers = {id(s.call) for s in setup.enabled_scalers}
        classes: dict[int, list[Scope]] = {}
        for scope in setup.scopes:
            if scope.owner is not None:
                classes.setdefault(id(scope.owner), []).append(scope)
        with_scaler = {
            id(scope) for scope in setup.scopes if any(id(c) in scalers for c in scope.calls())
        }
        optimizers_of: dict[int, list[OptimizerCall]] = {}

        def optimizers_in(scope: Scope) -> list[OptimizerCall]:
            if id(scope) not in optimizers_of:
                optimizers_of[id(scope)] = optimizer_calls(scope, facts.names)
            return optimizers_of[id(scope)]

        for scope in setup.scopes:
            casts = [c for c in half_casts(scope, facts.names) if c.precision == FLOAT16]
            if not casts:
                continue
            local = optimizers_in(scope)
            siblings = classes.get(id(scope.owner), []) if scope.owner is not None else []
            shared = [o for other in siblings for o in optimizers_in(other)]
            # A GradScaler created at module level, in this function or class, or passed in.
            has_scaler = scope.mentions("scaler") or any(
                id(other) in with_scaler for other in (setup.scopes[0], scope, *siblings)
            )
            for cast in casts:
                optimizers = [o for o in local if o.parameter_owners & cast.holders]
                optimizers += [
                    o
                    for o in shared
                    if o not in optimizers
                    and any(h.startswith("self.") for h in o.parameter_owners & cast.holders)
                ]
                if not optimizers or _after_training(cast, scope, facts):
                    continue
                texts = _message(cast, optimizers, has_scaler, facts)
                if texts is not None:
                    message, summary = texts
                    yield Report(cast.call, message, summary=summary)


def _after_training(cast: HalfCast, scope: Scope, facts: ModuleFacts) -> bool:
    """A cast after every backward/step call of its function: half precision for export."""
    steps = [
        call
        for call in scope.calls()
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in ("backward", "step")
    ]
    if not steps:
        return False
    line = facts.line_of(cast.call)
    return all(facts.line_of(call) < line for call in steps)


def _message(
    cast: HalfCast, optimizers: list[OptimizerCall], has_scaler: bool, facts: ModuleFacts
) -> tuple[str, str] | None:
    """The message and its summary, or None when the cast does no harm."""
    cast_code = f"`{snippet(cast.call)}`"
    cast_brief = f"`{brief(cast.call, 18)}`"
    optimizer = optimizers[0]
    optimizer_code = f"`{optimizer.class_name}` (line {facts.line_of(optimizer.call)})"
    keep = (
        "keep the parameters float32 and run the forward pass under "
        "`torch.autocast(..., dtype=torch.float16)` instead"
    )
    if has_scaler:
        message = (
            f"{cast_code} makes the parameters optimised by {optimizer_code} float16, and the "
            f'module\'s GradScaler raises "{UNSCALE_ERROR}" at `scaler.step`/`scaler.unscale_`; '
            f"{keep}"
        )
        summary = (
            f"{cast_brief}: float16 params: `step` raises "
            f'"{UNSCALE_ERROR.split(": ", 1)[-1]}"; use autocast'
        )
        return message, summary
    for adam in optimizers:
        if not adam.is_adam:
            continue
        eps_node = adam.eps()
        if eps_node is None:
            eps: float | None = ADAM_DEFAULT_EPS
            eps_text = "the default eps=1e-8"
        else:
            eps = _literal(eps_node)
            eps_text = f"eps={snippet(eps_node)}"
        if eps is None or eps >= FLOAT16_ROUNDS_TO_ZERO_BELOW:
            continue
        summary = (
            f"{cast_brief}: eps={eps:g} is 0 in `{adam.class_name}`'s float16 state: steps divide "
            "by 0 (NaN/inf); use autocast"
        )
        message = (
            f"{cast_code} makes the parameters and the state of `{adam.class_name}` (line "
            f"{facts.line_of(adam.call)}) float16, where {eps_text} rounds to 0: a gradient "
            "below about 5e-3 underflows the second moment to 0 and the step divides by zero, "
            f"turning parameters into NaN or inf; {keep}, or pass an eps float16 can hold "
            "(1e-4)"
        )
        return message, summary
    return None


def _literal(node: cst.BaseExpression) -> float | None:
    value = number_literal(node)
    return None if value is None else float(value)
