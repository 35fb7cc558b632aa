"""AMP309 fsdp-fp16-without-sharded-scaler: FSDP's float16 mixed precision trained without the
loss scaler it needs (none at all, or a plain GradScaler with FSDP1)."""

from __future__ import annotations

from collections.abc import Iterator

from amp_lint.analysis.syntax.module import ModuleFacts
from amp_lint.analysis.training.fsdp_imported_policy import imported_policies
from amp_lint.analysis.training.fsdp_precision import (
    FSDP1,
    FsdpPrecision,
    Policy,
    ScalerMade,
    Wrap,
    fsdp_precision,
)
from amp_lint.analysis.training.fsdp_training import trained_wraps
from amp_lint.analysis.training.training_setup import snippet
from amp_lint.rules.base import Report, Rule

UNSCALE_ERROR = "ValueError: Attempting to unscale FP16 gradients."


class FsdpFp16WithoutShardedScaler(Rule):
    code = "AMP309"
    name = "fsdp-fp16-without-sharded-scaler"
    vocabulary = (b"FullyShardedDataParallel", b"fully_shard")
    summary = (
        "Checks for FSDP (`FullyShardedDataParallel`, `fully_shard`) given a float16 mixed "
        "precision policy (`param_dtype` or `reduce_dtype=torch.float16`) in a module that "
        "trains without a loss scaler, and for a plain GradScaler beside a sharded FSDP1 model."
    )
    why = f"""\
FSDP's own mixed precision (`MixedPrecision` for FSDP1, `MixedPrecisionPolicy` for FSDP2's
`fully_shard`) keeps float32 parameter shards for the optimizer and casts them to
`param_dtype` for forward and backward. With float16 the **backward runs in float16**: a
gradient below 6e-8 rounds to 0 before FSDP casts it back to the float32 shard, so the float32
optimizer step cannot save it. Measured on CPU with torch 2.13 (a gloo process group of world
size 1; FSDP1 and FSDP2 both run there): a linear layer whose loss gradient is 1e-8 per output
gets an all-zero gradient under a float16 policy and does not move; float32 moves it, bfloat16
is within 3% and float16 with a `ShardedGradScaler` within 0.04%.

**FSDP1 needs `ShardedGradScaler`**, not a plain `torch.amp.GradScaler`: with the gradients
sharded, each rank's plain scaler checks only its own shard for inf/NaN, while
`ShardedGradScaler.unscale_` all-reduces that check across the process group
(`torch/distributed/fsdp/sharded_grad_scaler.py`). Measured with FSDP1 `FULL_SHARD` on 2 CPU
ranks (gloo, torch 2.13), an inf in rank 1's shard only: with a plain GradScaler rank 1 skipped
the step and halved its scale to 512 while rank 0 stepped and kept 1024, and on the next step
the unscaled gradients were 0.2998 on rank 0 and 0.5996 on rank 1 against 0.3999 with a
`ShardedGradScaler` (both ranks skipped, both at 512): the two ranks' scales stay apart and
their gradients are **silently mis-scaled** (x0.75 and x1.5) from then on. With
`keep_low_precision_grads=True` the gradients stay float16 and a plain GradScaler's
`step` raises

```
{UNSCALE_ERROR}
```

(measured; `ShardedGradScaler` accepts float16 gradients). **FSDP2** needs a scaler too, but
a plain `torch.amp.GradScaler` works there: its gradients are DTensors, whose dispatch of
`_amp_foreach_non_finite_check_and_unscale_` reduces the inf flag across the mesh
(`torch/distributed/tensor/_dispatch.py`), and PyTorch's FSDP2 scaler test
(`test/distributed/_composable/fsdp/test_fully_shard_grad_scaler.py`) uses
`torch.amp.GradScaler`.

**`reduce_dtype=torch.float16`** (the default when `param_dtype` is float16) reduces the
gradients across ranks in float16. To keep the sum in range FSDP divides each rank's gradient
by a power of two near sqrt(world size) before the reduction (2 on 2 ranks, 8 on 64) and by the
rest after (`_get_gradient_predivide_factor`, `_get_gradient_divide_factors`), which moves
the underflow up by that factor. Measured with FSDP1 on 2 CPU ranks, `param_dtype=float32`
and gradients of 8e-8 and 4e-8: every element of the reduced gradient was exactly 0 with
`reduce_dtype=torch.float16` and 6e-8 with float32. A scaler (which scales the loss before
backward) protects the reduction as well; bfloat16 needs none."""
    example = """\
import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import MixedPrecision

model = FSDP(model, mixed_precision=MixedPrecision(param_dtype=torch.float16))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
for x, y in loader:
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
"""
    fixed_example = """\
import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import MixedPrecision
from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

model = FSDP(model, mixed_precision=MixedPrecision(param_dtype=torch.float16))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
scaler = ShardedGradScaler("cuda")
for x, y in loader:
    loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
"""
    fix_safety = """\
There is no fix (lint only): adding a scaler means rewriting the backward call, every
`optimizer.step()` and gradient clipping (`scaler.unscale_(optimizer)` first, then FSDP's
`model.clip_grad_norm_`), and saving the scaler's state with checkpoints; the other way out
is `param_dtype=torch.bfloat16` where the hardware has it. Replacing a plain GradScaler by
`ShardedGradScaler` by hand has a trap: their positional parameters differ after
`init_scale` (`GradScaler(device, init_scale, growth_factor, backoff_factor, ...)` but
`ShardedGradScaler(device, init_scale, backoff_factor, growth_factor, ...)`), so pass them by
keyword."""
    known_limitations = """\
The FSDP call and the training must be in one module. A policy counts when an FSDP call
there receives it directly, through a name assigned in the module (in any function, either
branch of a conditional), through `**kwargs` built there (`kwargs["mp_policy"] = ...`, a
dict literal, `dict(...)`), or, when the whole project is linted, through a name imported
from another linted file that assigns it at top level (`from policies import fpSixteen`,
also re-exported by a package's `from .mixed_precision import *`); `param_dtype` and
`reduce_dtype` must be torch dtypes written there (`torch.float16`, or a name assigned one
once). Policies a function builds (`get_policies(cfg)`), receives as a parameter, or reads
from configuration (`param_dtype=cfg.dtype`) are not followed, and framework wrappers
(Lightning's `FSDPStrategy`, accelerate's `FullyShardedDataParallelPlugin`) are left to the
framework, which makes the scaler itself for fp16.

A policy is reported only for a wrapped model the module trains: "trains" means a tensor's
`backward()` (or `torch.autograd.backward`/`grad`), and the wrapped model (the name or
attribute the FSDP call is assigned to, or what `fully_shard` shards in place) is called in
a function that calls backward (for a module-level name or `self.model`, in any function of
the module that does), or passed to a function or class of the module that calls backward,
or returned and bound by a caller in the module that trains it. A model wrapped only to load
a checkpoint or to evaluate stays clean; a builder function the module never calls counts as
trained whenever the module calls backward anywhere (its caller is elsewhere).

"Without a loss scaler" means the module constructs no GradScaler or ShardedGradScaler and
names nothing containing "scaler" (a scaler made elsewhere and passed in counts as one). The
plain-GradScaler finding needs an FSDP1 call in the module whose `sharding_strategy` is not a
literal `NO_SHARD` and no `ShardedGradScaler` named there; it does not look at the dtypes
(a GradScaler means float16 training; AMP306 reports one used for bfloat16 only)."""

    def check_module(self, facts: ModuleFacts) -> Iterator[Report]:
        precision = fsdp_precision(facts.module, facts.names, imported_policies(facts))
        if not precision.wraps:
            return
        yield from _without_scaler(precision, facts)
        yield from _plain_scalers(precision, facts)


def _without_scaler(precision: FsdpPrecision, facts: ModuleFacts) -> Iterator[Report]:
    if not precision.trains or precision.mentions_scaler:
        return
    if any(scaler.enabled for scaler in precision.scalers):
        return
    reported: set[int] = set()
    float16_wraps = [w for w in precision.wraps if any(_is_float16(p) for p in w.policies)]
    trained = trained_wraps(facts.module, facts.names, float16_wraps)
    for wrap in float16_wraps:
        if id(wrap.call) not in trained:
            continue  # wrapped to load a checkpoint or to evaluate, not trained here
        for policy in wrap.policies:
            if id(policy.call) in reported:
                continue
            if policy.float16_params:
                reported.add(id(policy.call))
                yield _float16_params(policy, wrap, facts)
            elif policy.float16_reduce:
                reported.add(id(policy.call))
                yield _float16_reduce(policy, wrap, facts)


def _is_float16(policy: Policy) -> bool:
    return policy.float16_params or policy.float16_reduce


def _scaler_advice(policy: Policy) -> tuple[str, str]:
    """How to scale the loss for the policy's FSDP, in a message and in a summary."""
    if policy.api == FSDP1:
        return (
            "`ShardedGradScaler` (torch.distributed.fsdp.sharded_grad_scaler: "
            "`scaler.scale(loss).backward()`, `scaler.step(optimizer)`, `scaler.update()`)",
            "ShardedGradScaler",
        )
    return (
        "`torch.amp.GradScaler` (FSDP2's DTensor gradients share its inf check across ranks; "
        "`scaler.scale(loss).backward()`, `scaler.step(optimizer)`, `scaler.update()`)",
        "a GradScaler",
    )


def _for_wrap(policy: Policy, wrap: Wrap, facts: ModuleFacts) -> str:
    if policy.reference is not None:  # imported from another linted file
        where = f"`{snippet(policy.reference)}` (`{snippet(policy.call)}`, {policy.origin})"
        return f"{where} (given to `{snippet(wrap.call)}`, line {facts.line_of(wrap.call)})"
    where = f"`{snippet(policy.call)}`"
    if any(arg.value is policy.call for arg in wrap.call.args):
        return where  # written in the FSDP call itself
    return f"{where} (given to `{snippet(wrap.call)}`, line {facts.line_of(wrap.call)})"


def _float16_params(policy: Policy, wrap: Wrap, facts: ModuleFacts) -> Report:
    advice, brief_advice = _scaler_advice(policy)
    message = (
        f"{_for_wrap(policy, wrap, facts)} runs FSDP's forward and backward in float16 and this "
        "module trains without a loss scaler: gradients below 6e-8 silently become 0 before "
        "FSDP casts them to the float32 shards, and those weights stop updating; scale the "
        f"loss with {advice} or use `param_dtype=torch.bfloat16`"
    )
    summary = (
        f"float16 FSDP policy, no scaler: grads < 6e-8 silently become 0; add {brief_advice} "
        "or use bf16"
    )
    return Report(policy.reference or policy.call, message, summary=summary)


def _float16_reduce(policy: Policy, wrap: Wrap, facts: ModuleFacts) -> Report:
    advice, _ = _scaler_advice(policy)
    message = (
        f"{_for_wrap(policy, wrap, facts)} has FSDP reduce the gradients across ranks in "
        "float16, after dividing them by about sqrt(world size), and this module trains "
        "without a loss scaler: gradients below about 6e-8 times that factor silently become "
        "0 in the reduction (and sums past 65504 inf); use `reduce_dtype=torch.float32`, or "
        f"scale the loss with {advice}"
    )
    summary = (
        "float16 FSDP gradient reduction, no scaler: small grads silently become 0; use "
        "reduce_dtype=float32"
    )
    return Report(policy.reference or policy.call, message, summary=summary)


def _plain_scalers(precision: FsdpPrecision, facts: ModuleFacts) -> Iterator[Report]:
    if any(scaler.sharded for scaler in precision.scalers) or _names_sharded_scaler(facts):
        return
    sharded = [w for w in precision.wraps if w.api == FSDP1 and not w.no_shard]
    if not sharded:
        return
    wrap = sharded[0]
    keeps_float16 = any(
        p.keep_low_precision_grads and p.float16_reduce for w in sharded for p in w.policies
    )
    for scaler in precision.scalers:
        if scaler.enabled:
            yield _plain_scaler(scaler, wrap, keeps_float16, facts)


def _names_sharded_scaler(facts: ModuleFacts) -> bool:
    """`ShardedGradScaler` named anywhere (a class picked at run time, `scaler_cls()`)."""
    return facts.source is not None and b"ShardedGradScaler" in facts.source


def _plain_scaler(
    scaler: ScalerMade, wrap: Wrap, keeps_float16: bool, facts: ModuleFacts
) -> Report:
    message = (
        f"`{snippet(scaler.call)}` with a model sharded by FSDP1 (`{snippet(wrap.call)}`, line "
        f"{facts.line_of(wrap.call)}): a plain GradScaler checks only this rank's gradient "
        "shard for inf/NaN, so when one rank overflows it alone skips the step and halves its "
        "scale while the others step: the shards get different updates and, with the ranks' "
        "scales apart, later gradients are silently mis-scaled (x0.75 and x1.5 measured on 2 "
        "ranks)"
    )
    if keeps_float16:
        message += (
            f', and with `keep_low_precision_grads=True` `scaler.step` raises "{UNSCALE_ERROR}"'
        )
    message += (
        "; use `ShardedGradScaler` (torch.distributed.fsdp.sharded_grad_scaler), which "
        "all-reduces the check across ranks"
    )
    summary = (
        "plain GradScaler with FSDP1: ranks skip steps apart, grads silently mis-scaled; use "
        "ShardedGradScaler"
    )
    return Report(scaler.call, message, summary=summary)
