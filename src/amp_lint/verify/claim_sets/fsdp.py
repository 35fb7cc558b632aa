"""Claims about FSDP mixed precision and gradient scaling, with their programs.

In these programs ``dtype`` is FSDP's policy dtype (``param_dtype``, or the reduction dtype),
not an autocast dtype: FSDP's mixed precision casts parameters itself. ``None`` is the float32
reference (no policy).

FSDP runs on CPU: each program that wraps a model makes a process group of world size 1 (gloo
on CPU, NCCL on CUDA) through a file store in a temporary directory, and destroys it before
returning, so parallel test workers share no port and leak no group. A world of one rank has
nothing to reduce; the reduction itself is measured by ``reduce_like_fsdp``, which does FSDP's
arithmetic for a low-precision ``reduce_dtype`` on 64 simulated ranks.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from amp_lint.verify.claim_programs import Program
from amp_lint.verify.claim_types import Claim, Experiment

if TYPE_CHECKING:
    import torch


@contextmanager
def _one_rank(device: str) -> Iterator[None]:
    import torch.distributed as dist

    backend = "nccl" if device == "cuda" else "gloo"
    with tempfile.TemporaryDirectory() as directory:
        store = os.path.join(directory, "store")
        dist.init_process_group(backend, init_method=f"file://{store}", rank=0, world_size=1)
        try:
            yield
        finally:
            dist.destroy_process_group()


def _fully_shard_step(device: str, dtype: torch.dtype | None, scaled: bool) -> torch.Tensor:
    """One SGD step of a linear layer under ``fully_shard`` with ``MixedPrecisionPolicy(
    param_dtype=dtype)``, on a loss whose gradient is 1e-8 per output; the weight change x1e6."""
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    layer = torch.nn.Sequential(torch.nn.Linear(16, 16))
    x = torch.randn(64, 16).to(device)
    with _one_rank(device):
        layer.to(device)
        mesh = init_device_mesh(device, (1,))
        # param_dtype None casts nothing: the float32 reference.
        fully_shard(layer, mesh=mesh, mp_policy=MixedPrecisionPolicy(param_dtype=dtype))
        optimizer = torch.optim.SGD(layer.parameters(), lr=1.0)
        before = [_whole(p).clone() for p in layer.parameters()]
        loss = layer(x).float().sum() * 1e-8
        if scaled:
            scaler = torch.amp.GradScaler(device)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        after = [_whole(p) for p in layer.parameters()]
    change = torch.cat([(a - b).reshape(-1) for a, b in zip(after, before)])
    return change * 1e6


def _whole(parameter: torch.Tensor) -> torch.Tensor:
    """A parameter's values on this rank, gathered from its shards (a DTensor under FSDP2)."""
    from torch.distributed.tensor import DTensor

    value = parameter.detach()
    return value.full_tensor() if isinstance(value, DTensor) else value


def fully_shard_small_gradients(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    return {"weight_change": _fully_shard_step(device, dtype, scaled=False)}


def fully_shard_grad_scaler(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    return {"weight_change": _fully_shard_step(device, dtype, scaled=dtype is not None)}


def _predivide_factor(world_size: int) -> int:
    """FSDP's pre-divide factor for a float16 reduction: the power of two that FSDP1's
    ``DefaultState._get_gradient_predivide_factor`` and FSDP2's ``_get_gradient_divide_factors``
    compute (torch 2.13), about sqrt(world_size)."""
    factor = 1
    while world_size % factor == 0 and world_size / factor > factor:
        factor *= 2
    return factor


def reduce_like_fsdp(low: float) -> Program:
    """64 ranks' gradients, each uniform in [low, 2 * low), averaged as FSDP does for a
    ``reduce_dtype`` other than float32 and bfloat16: cast, divided by the pre-divide factor
    (8), summed rank after rank in that dtype (each hop of a ring reduction rounds), divided
    by the rest (8). bfloat16 is run the same way for comparison (FSDP divides it by the
    world size in one step, as NCCL's average). ``None``: the float32 mean."""

    def program(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
        import torch

        ranks = 64
        grads = [(low * (1 + torch.rand(256))).to(device) for _ in range(ranks)]
        if dtype is None:
            return {"mean_gradient": torch.stack(grads).mean(0) / low}
        pre = _predivide_factor(ranks)
        total = grads[0].to(dtype) / pre
        for grad in grads[1:]:
            total = total + grad.to(dtype) / pre
        return {"mean_gradient": (total / (ranks / pre)).float() / low}

    return program


CLAIMS: tuple[Claim, ...] = (
    Claim(
        "fsdp2-float32-step-needs-no-scaler",
        "FSDP2 mixed precision needs no GradScaler: the optimizer steps the float32 "
        "parameter shards",
        "https://github.com/pytorch/torchtitan/issues/1735",
        (
            Experiment(
                "fully-shard-small-gradients",
                "fully_shard(layer, mp_policy=MixedPrecisionPolicy(param_dtype=dtype)) on one "
                "rank, loss = 1e-8 * the sum of the outputs, backward and one SGD step; the "
                "change of the float32 weights",
                fully_shard_small_gradients,
            ),
            Experiment(
                "fully-shard-grad-scaler",
                "the same step through torch.amp.GradScaler: scale(loss).backward(), step, update",
                fully_shard_grad_scaler,
            ),
        ),
        verdict=(
            "False for float16. The step does run on float32 shards, but the gradients reach "
            "them from a float16 backward: with `param_dtype=torch.float16` a loss gradient of "
            "1e-8 per output gave all-zero weight gradients and no update on CPU, where "
            "float32 moved the weights. With `torch.amp.GradScaler` the same float16 step "
            "was clean, and bfloat16 was clean without one (AMP309). The CUDA rows are "
            "predictions until a GPU run."
        ),
    ),
    Claim(
        "fsdp-float16-reduce-predivide",
        "FSDP divides the gradients by about sqrt(world size) before and after a float16 "
        "reduction, so `reduce_dtype=torch.float16` neither overflows nor underflows",
        "",
        (
            Experiment(
                "fsdp-reduce-small-gradients",
                "64 ranks' gradients of 1e-7 to 2e-7 averaged as FSDP reduces in reduce_dtype: "
                "divided by 8, summed rank by rank in that dtype, divided by 8",
                reduce_like_fsdp(1e-7),
            ),
            Experiment(
                "fsdp-reduce-typical-gradients",
                "the same reduction of gradients of 1e-3 to 2e-3",
                reduce_like_fsdp(1e-3),
            ),
        ),
        verdict=(
            "Half true. For gradients of ordinary size the float16 reduction was accurate "
            "(0.3% off on 64 ranks, closer than bfloat16's 2%), but the pre-divide moves "
            "float16's underflow up: gradients of 1e-7 to 2e-7, which float16 can hold, "
            "averaged to exactly 0 on 64 ranks (divided by 8 first). Measured with FSDP1 on "
            "2 CPU ranks too: gradients of 8e-8 and 4e-8 reduced in float16 gave 0 where "
            "float32 gave 6e-8. A loss scaler protects the reduction (AMP309). The CUDA "
            "rows are predictions: the arithmetic is the same."
        ),
    ),
)
