"""AMP004: standardising features with ``(h - mean) / (std + 1e-8)`` in float16.

Feature 0 is constant (an identity layer over an input column of 3.0), so its std is exactly 0.
In float16 ``1e-8`` rounds to 0, the guard is gone and ``0 / 0`` is NaN; float32 gives 0.
bfloat16 represents 1e-8, so the guard holds.
"""

from __future__ import annotations

import torch

RULE = "AMP004"
TITLE = "an epsilon guard that float16 rounds to 0"
EXPECTED = {
    "cpu/float16": "nonfinite",
    "cpu/bfloat16": "clean",
    "cuda/float16": "nonfinite",
    "cuda/bfloat16": "clean",
}


def standardise(encoder: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    h = encoder(x)
    return (h.to(torch.promote_types(h.dtype, torch.float32)) - h.to(torch.promote_types(h.dtype, torch.float32)).mean(0)) / (h.to(torch.promote_types(h.dtype, torch.float32)).std(0) + 1e-8)


def run(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    encoder = torch.nn.Linear(8, 8).to(device)
    with torch.no_grad():
        encoder.weight.copy_(torch.eye(8))
        encoder.bias.zero_()
    x = torch.randn(32, 8, device=device)
    x[:, 0] = 3.0
    with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
        z = standardise(encoder, x)
    return {"z": z}
