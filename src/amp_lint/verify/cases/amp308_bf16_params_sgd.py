"""AMP308: a model converted to bfloat16 (or float16) and trained by a plain `torch.optim`
optimizer, with no float32 copy of its weights.

The weights start near 1.0, where bfloat16's spacing is 2**-7 (float16's 2**-10), and every
SGD update is lr * grad = 1e-4 * (about 1): below half the spacing, so rounding the updated
weight back to the parameter's dtype gives the old weight, step after step. The float32 run
moves the weights by up to 0.15 over the 1000 steps; the converted ones do not move at all,
silently (no error, no NaN: the loss just stops improving). The fixed copy keeps the weights
float32 and runs the forward pass under autocast, the documented fix, written by hand. On CUDA
the same rounding happens when the optimizer writes the bfloat16 parameter (round to nearest
even, as on CPU), so the CUDA rows are predictions from that until a GPU run.
"""

from __future__ import annotations

import torch

RULE = "AMP308"
TITLE = "SGD updates lost on a model converted to bfloat16"
HAND_FIXED = True
EXPECTED = {
    "cpu/float16": "wrong",
    "cpu/bfloat16": "wrong",
    "cuda/float16": "wrong",
    "cuda/bfloat16": "wrong",
}
STEPS = 1000
LR = 1e-4


def pretrained(device: str) -> torch.nn.Linear:
    """A small layer whose weights are about 1.0, as a trained model's often are."""
    layer = torch.nn.Linear(16, 4)
    with torch.no_grad():
        layer.weight.copy_(1.0 + 0.01 * torch.randn(4, 16))
        layer.bias.zero_()
    return layer.to(device)


def fit(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    dtype = next(model.parameters()).dtype
    for _ in range(STEPS):
        loss = (model(x.to(dtype)).float() - y).pow(2).sum(1).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return next(model.parameters()).detach().float()


def train_bfloat16(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    model = pretrained(x.device.type).to(torch.bfloat16)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    for _ in range(STEPS):
        loss = (model(x.bfloat16()).float() - y).pow(2).sum(1).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.weight.detach().float()


def train_float16(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    model = pretrained(x.device.type).half()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    for _ in range(STEPS):
        loss = (model(x.half()).float() - y).pow(2).sum(1).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.weight.detach().float()


def run(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    x = torch.randn(64, 16).to(device)
    y = x @ torch.full((16, 4), 0.5, device=device)
    if dtype is torch.bfloat16:
        return {"weight": train_bfloat16(x, y)}
    if dtype is torch.float16:
        return {"weight": train_float16(x, y)}
    return {"weight": fit(pretrained(device), x, y)}
