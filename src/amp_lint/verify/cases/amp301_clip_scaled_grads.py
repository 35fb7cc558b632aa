"""AMP301: ``clip_grad_norm_`` between ``scaler.scale(loss).backward()`` and ``scaler.step``.

A linear layer is fitted for three SGD steps with ``max_norm=1.0``. The real gradient norm is
about 0.43, so the float32 reference (scaler disabled) never clips. With the scaler enabled the
clip sees the gradients multiplied by 65536, a norm of about 28000, and scales them down to
norm 1; ``scaler.step`` then divides by 65536, so each update is about 28000 times too small
and the weights barely move. The inputs are small enough that the scaled float16 gradients
stay finite (at most 9104: no step is skipped), so the fixed copy, which unscales first,
matches the reference. The case returns how far the weights moved. The hazard is the
scaler's, not the autocast dtype's: bfloat16 shows it too.
"""

from __future__ import annotations

import torch

RULE = "AMP301"
TITLE = "gradients clipped while still multiplied by the loss scale"
EXPECTED = {
    "cpu/float16": "wrong",
    "cpu/bfloat16": "wrong",
    "cuda/float16": "wrong",
    "cuda/bfloat16": "wrong",
}


def train(model, optimizer, scaler, x, y, device, dtype):
    for _ in range(3):
        optimizer.zero_grad()
        with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
            loss = torch.nn.functional.mse_loss(model(x).float(), y)
        scaler.scale(loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        scaler.step(optimizer)
        scaler.update()


def run(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    model = torch.nn.Linear(8, 4)
    with torch.no_grad():
        model.weight.copy_(torch.randn(4, 8, generator=generator) * 0.1)
        model.bias.zero_()
    model = model.to(device)
    start = model.weight.detach().clone()
    x = torch.randn(32, 8, generator=generator).to(device)
    y = torch.randn(32, 4, generator=generator).to(device) * 0.5
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device, enabled=dtype is not None)
    train(model, optimizer, scaler, x, y, device, dtype)
    return {"weight_update": model.weight.detach() - start}
