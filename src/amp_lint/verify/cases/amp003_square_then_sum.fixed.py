"""AMP003: an energy term ``(h * h).sum()`` on a half activation.

The activations are about ±300 (a linear layer over inputs of that size), so ``h * h``
exceeds float16's 65504 before any reduction sees it: even CUDA autocast, which runs ``sum``
in float32, sums infs. bfloat16 has float32's range.
"""

from __future__ import annotations

import torch

RULE = "AMP003"
TITLE = "a square taken in float16 before a reduction"
EXPECTED = {
    "cpu/float16": "nonfinite",
    "cpu/bfloat16": "clean",
    "cuda/float16": "nonfinite",
    "cuda/bfloat16": "clean",
}


def energy(layer: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    h = layer(x)
    return (h.to(torch.promote_types(h.dtype, torch.float32)) * h.to(torch.promote_types(h.dtype, torch.float32))).sum()


def run(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    layer = torch.nn.Linear(16, 16).to(device)
    with torch.no_grad():
        layer.weight.copy_(torch.eye(16))
        layer.bias.zero_()
    x = torch.randn(64, 16, device=device) * 300
    with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
        e = energy(layer, x)
    return {"energy": e}
