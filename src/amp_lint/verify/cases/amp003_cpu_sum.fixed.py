"""AMP003: a plain ``sum`` of a half activation under CPU autocast.

4096 values of about 300 add up to about 1.2 million. CPU autocast leaves ``sum`` in float16
(CUDA autocast would run it in float32, so this case is CPU only), and PyTorch stores the
float32 accumulator back into float16: inf. bfloat16 holds 1.2 million (coarsely, well within
tolerance).
"""

from __future__ import annotations

import torch

RULE = "AMP003"
TITLE = "a float16 sum under CPU autocast"
DEVICES = ("cpu",)
EXPECTED = {
    "cpu/float16": "nonfinite",
    "cpu/bfloat16": "clean",
}


def total(layer: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    h = layer(x)
    return h.to(torch.promote_types(h.dtype, torch.float32)).sum()


def run(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    layer = torch.nn.Linear(16, 16).to(device)
    with torch.no_grad():
        layer.weight.zero_()
        layer.bias.fill_(300.0)
    x = torch.randn(256, 16, device=device)
    with torch.autocast("cpu", dtype=dtype, enabled=dtype is not None):
        s = total(layer, x)
    return {"sum": s}
