"""AMP311: the clip moved after ``scaler.step`` when AMP is on, away from the scaled gradients.

The trainer clips before the step in float32, and after ``scaler.step`` when the scaler is
enabled (where the update has already used the gradients). A linear layer is fitted for three
SGD steps with ``max_norm=0.05`` against a real gradient norm of about 0.4, so every float32
step is clipped; with the scaler on, no step is, and the weights move several times further.
The scaled gradients stay finite (no step is skipped), so the fixed copy, which unscales and
clips before the step, matches the float32 run. The hazard is the order, not the dtype:
both dtypes show it.
"""

from __future__ import annotations

import torch

RULE = "AMP311"
TITLE = "gradients clipped after the scaler's step used them"
HAND_FIXED = True
EXPECTED = {
    "cpu/float16": "wrong",
    "cpu/bfloat16": "wrong",
    "cuda/float16": "wrong",
    "cuda/bfloat16": "wrong",
}


def train(model, optimizer, scaler, x, y, device, dtype):
    use_amp = dtype is not None
    for _ in range(3):
        optimizer.zero_grad()
        with torch.autocast(device, dtype=dtype, enabled=use_amp):
            loss = torch.nn.functional.mse_loss(model(x).float(), y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.05)
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
