"""AMP305: a model converted to float16 with `.half()` and trained with a GradScaler.

GradScaler unscales gradients into float32 arithmetic and refuses float16 gradients outright:
the first `scaler.step` raises. The float16 rows run that code; the bfloat16 rows convert the
model to bfloat16 instead, which GradScaler's CPU kernel accepts (its CUDA kernel does not:
that case is AMP306's). The fixed copy is the documented fix, written by hand: keep the
parameters in float32 and let autocast produce float16 activations.
"""

from __future__ import annotations

import torch

RULE = "AMP305"
TITLE = "GradScaler on a model converted to float16"
HAND_FIXED = True
TOLERANCE = 0.2  # one SGD step on bfloat16 parameters rounds the weights to 8 bits
EXPECTED = {
    "cpu/float16": "raised: ValueError: Attempting to unscale FP16 gradients.",
    "cpu/bfloat16": "clean",
    "cuda/float16": "raised: ValueError: Attempting to unscale FP16 gradients.",
    "cuda/bfloat16": "raised: NotImplementedError",
}


def train_half(x: torch.Tensor) -> torch.Tensor:
    model = torch.nn.Linear(8, 8).to(x.device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(x.device.type)
    with torch.autocast(x.device.type, dtype=torch.float16):
        loss = model(x).float().pow(2).mean()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    return model.weight.detach().float()


def train(x: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    model = torch.nn.Linear(8, 8).to(x.device)
    if dtype is not None:
        model = model.to(dtype)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(x.device.type, enabled=dtype is not None)
    loss = model(x.to(dtype or torch.float32)).float().pow(2).mean()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    return model.weight.detach().float()


def run(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    x = torch.randn(16, 8).to(device)
    if dtype is torch.float16:
        return {"weight": train_half(x)}
    return {"weight": train(x, dtype)}
