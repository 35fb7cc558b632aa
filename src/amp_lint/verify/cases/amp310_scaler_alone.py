"""AMP310: a GradScaler enabled for mixed precision, with the forward left outside any region.

An MLP is trained for five SGD steps with the scaler enabled whenever a low-precision dtype
is asked for, but the forward and the loss never enter a region. The outcome is "clean" on
every row, and that is the finding: the weights are bit-identical to the float32 run (an
error of exactly 0), so mixed precision never happened; the scaler only multiplied the loss
and divided the gradients by a power of two. The fixed copy wraps the forward and the loss
and differs from float32 by the low dtype's rounding, within the tolerance.
"""

from __future__ import annotations

import torch

RULE = "AMP310"
TITLE = "GradScaler enabled with the forward outside every region: float32 training"
HAND_FIXED = True
EXPECTED = {
    "cpu/float16": "clean",
    "cpu/bfloat16": "clean",
    "cuda/float16": "clean",
    "cuda/bfloat16": "clean",
}


def train(model, optimizer, x, y, device, dtype):
    scaler = torch.amp.GradScaler(device, enabled=dtype is not None)
    for _ in range(5):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x).float(), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()


def run(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    model = model.to(device)
    x = torch.randn(64, 16, generator=generator).to(device)
    y = torch.randn(64, 4, generator=generator).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    train(model, optimizer, x, y, device, dtype)
    return {"weight": model[0].weight.detach()}
