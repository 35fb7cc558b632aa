"""FSDP with a float16 mixed-precision policy."""

import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import MixedPrecision


def train(model, loader, loss_fn):
    model = FSDP(model, mixed_precision=MixedPrecision(param_dtype=torch.float16))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for x, y in loader:
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
