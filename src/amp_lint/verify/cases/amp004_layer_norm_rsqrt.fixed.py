"""AMP004: a layer norm ``(h - mu) * torch.rsqrt(var + 1e-12)`` computed in float16.

Row 0 of the input is constant (all 0), so its variance is exactly 0. In float16 ``1e-12``
rounds to 0, the guard is gone, ``rsqrt(0)`` is inf and ``0 * inf`` is NaN; float32 gives 0.
On CUDA rsqrt itself runs in float32 under autocast, but it receives the guard already
computed in float16 (``var`` and ``+`` are on no autocast list), so the result is the same.
bfloat16 represents 1e-12, so the guard holds.
"""

from __future__ import annotations

import torch

RULE = "AMP004"
TITLE = "an epsilon under a root that float16 rounds to 0"
EXPECTED = {
    "cpu/float16": "nonfinite",
    "cpu/bfloat16": "clean",
    "cuda/float16": "nonfinite",
    "cuda/bfloat16": "clean",
}


def layer_norm(encoder: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    h = encoder(x)
    mu = h.mean(-1, keepdim=True)
    var = h.to(torch.promote_types(h.dtype, torch.float32)).var(-1, keepdim=True, unbiased=False)
    return (h - mu) * torch.rsqrt(var.to(torch.promote_types(var.dtype, torch.float32)) + 1e-12)


def run(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    encoder = torch.nn.Linear(8, 8).to(device)
    with torch.no_grad():
        encoder.weight.copy_(torch.eye(8))
        encoder.bias.zero_()
    x = torch.randn(32, 8, device=device)
    x[0] = 0.0
    with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
        z = layer_norm(encoder, x)
    return {"z": z}
