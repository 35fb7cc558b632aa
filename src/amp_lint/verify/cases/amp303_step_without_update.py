"""AMP303: ``scaler.step(optimizer)`` in a training loop with no ``scaler.update()``.

Three SGD steps of a linear layer. The first ``scaler.step`` records that the optimizer has
stepped; only ``update()`` clears that record, so the second raises. The float32 reference
runs with the scaler disabled, where ``step`` just calls ``optimizer.step()``. The hazard is
the scaler's, not the autocast dtype's: bfloat16 shows it too.
"""

from __future__ import annotations

import torch

RULE = "AMP303"
TITLE = "scaler.step without scaler.update"
RAISED = "raised: RuntimeError: step() has already been called since the last update()."
EXPECTED = {
    "cpu/float16": RAISED,
    "cpu/bfloat16": RAISED,
    "cuda/float16": RAISED,
    "cuda/bfloat16": RAISED,
}


def train(model, optimizer, scaler, x, y, device, dtype):
    for _ in range(3):
        optimizer.zero_grad()
        with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
            loss = torch.nn.functional.mse_loss(model(x).float(), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)


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
