"""AMP302: ``optimizer.step()`` after ``scaler.scale(loss).backward()``.

A linear layer is fitted for three SGD steps. With the scaler enabled, ``optimizer.step()``
applies gradients still multiplied by 65536, so the first step moves the weights 65536 times
too far (to about 900). In float16 the second backward then overflows (NaN gradients), and
``optimizer.step()`` writes them into the weights where ``scaler.step`` would have skipped the
step; bfloat16 has the range to stay finite and ends about 1e11 times off. The inputs are
small enough that the first step's scaled float16 gradients stay finite (at most 9104), so the
fixed copy (``scaler.step`` + ``scaler.update``) skips no step and matches the float32
reference, whose scaler is disabled.
"""

from __future__ import annotations

import torch

RULE = "AMP302"
TITLE = "optimizer.step() applies gradients multiplied by the loss scale"
EXPECTED = {
    "cpu/float16": "nonfinite",
    "cpu/bfloat16": "wrong",
    "cuda/float16": "nonfinite",
    "cuda/bfloat16": "wrong",
}


def train(model, optimizer, scaler, x, y, device, dtype):
    for _ in range(3):
        optimizer.zero_grad()
        with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
            loss = torch.nn.functional.mse_loss(model(x).float(), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()


def run(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    model = torch.nn.Linear(8, 4)
    with torch.no_grad():
        model.weight.copy_(torch.randn(4, 8, generator=generator) * 0.1)
        model.bias.zero_()
    model = model.to(device)
    x = torch.randn(32, 8, generator=generator).to(device)
    y = torch.randn(32, 4, generator=generator).to(device) * 0.5
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device, enabled=dtype is not None)
    train(model, optimizer, scaler, x, y, device, dtype)
    return {"weight": model.weight.detach(), "bias": model.bias.detach()}
