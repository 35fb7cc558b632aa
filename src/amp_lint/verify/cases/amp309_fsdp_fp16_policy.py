"""AMP309: FSDP with a float16 MixedPrecision policy, trained without a loss scaler.

FSDP keeps float32 parameter shards and casts them to `param_dtype` for forward and backward,
so under a float16 policy the backward runs in float16: a gradient below 5.96e-8 (float16's
smallest subnormal) rounds to 0 before FSDP casts it back to the float32 shard for the
optimizer. The loss is a sum scaled by 1e-8 (a mean over many elements times a small weight),
so every weight gradient is about 1e-8: float16 flushes all of them and SGD does not move the
weights, where float32 moves them by about 1e-6 (the rows compare the change of the flat
parameter). The bfloat16 rows run the same step under a bfloat16 policy, which keeps float32's
range and needs no scaler (AMP309 does not flag it).

FSDP runs on CPU (torch 2.13) in one process: a gloo process group of world size 1 through a
file store in a temporary directory, destroyed after each run, and FSDP1, which switches to
NO_SHARD at world size 1 (there is nothing to reduce, so only the float16 backward matters).
The CUDA rows are predictions until a GPU run: the same step with an NCCL group, whose float16
backward rounds the same way. The fixed copy is the documented fix, written by hand: a
ShardedGradScaler.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import MixedPrecision

RULE = "AMP309"
TITLE = "FSDP float16 mixed precision without a ShardedGradScaler"
HAND_FIXED = True
# bfloat16's 8-bit gradients of a 64-row matmul are off by several percent; the hazard loses 100%.
TOLERANCE = 0.2
EXPECTED = {
    "cpu/float16": "wrong",
    "cpu/bfloat16": "clean",
    "cuda/float16": "wrong",
    "cuda/bfloat16": "clean",
}


@contextmanager
def one_rank(device: str) -> Iterator[None]:
    """A process group of world size 1 for this run only (no port: a file store)."""
    backend = "nccl" if device == "cuda" else "gloo"
    with tempfile.TemporaryDirectory() as directory:
        store = os.path.join(directory, "store")
        dist.init_process_group(backend, init_method=f"file://{store}", rank=0, world_size=1)
        try:
            yield
        finally:
            dist.destroy_process_group()


def flat_parameters(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def train_step_fp16(layer: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    model = FSDP(
        layer,
        mixed_precision=MixedPrecision(param_dtype=torch.float16),
        device_id=x.device,
    )
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    before = flat_parameters(model)
    loss = model(x).float().sum() * 1e-8
    loss.backward()
    opt.step()
    return flat_parameters(model) - before


def train_step(layer: torch.nn.Linear, x: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    policy = None if dtype is None else MixedPrecision(param_dtype=dtype)
    model = FSDP(layer, mixed_precision=policy, device_id=x.device)
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    before = flat_parameters(model)
    loss = model(x).float().sum() * 1e-8
    loss.backward()
    opt.step()
    return flat_parameters(model) - before


def run(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    layer = torch.nn.Linear(16, 16)
    x = torch.randn(64, 16).to(device)
    with one_rank(device):
        if dtype is torch.float16:
            change = train_step_fp16(layer, x)
        else:
            change = train_step(layer, x, dtype)
    return {"parameter_change": change * 1e6}
