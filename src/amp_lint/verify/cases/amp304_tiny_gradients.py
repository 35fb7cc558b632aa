"""AMP304: float16 autocast training without a GradScaler, on a loss with small gradients.

The loss is a sum scaled by 1e-8 (a mean over many elements times a small weight), so the
gradient reaching the matmul is 1e-8 per element. float16's smallest subnormal is 5.96e-8: the
gradient rounds to 0, the weight gradient computed by the float16 matmul backward is exactly 0
and SGD does not move the weights, where float32 moves them by about 2e-7. The float16 rows run
the flagged float16 step; the bfloat16 rows run the same loop with bfloat16 autocast, which
keeps float32's range and needs no scaler (AMP304 does not flag it). The fixed copy is the
documented fix, written by hand: a GradScaler.
"""

from __future__ import annotations

import torch

RULE = "AMP304"
TITLE = "float16 autocast without a GradScaler"
HAND_FIXED = True
# bfloat16's 8-bit gradients of a 64-row matmul are off by about 8%; the hazard loses 100%.
TOLERANCE = 0.2
EXPECTED = {
    "cpu/float16": "wrong",
    "cpu/bfloat16": "clean",
    "cuda/float16": "wrong",
    "cuda/bfloat16": "clean",
}


def train_step_fp16(layer: torch.nn.Linear, opt: torch.optim.Optimizer, x: torch.Tensor) -> None:
    with torch.autocast(x.device.type, dtype=torch.float16):
        out = layer(x)
    loss = out.float().sum() * 1e-8
    loss.backward()
    opt.step()


def train_step(layer: torch.nn.Linear, opt: torch.optim.Optimizer, x: torch.Tensor, dtype) -> None:
    with torch.autocast(x.device.type, dtype=dtype, enabled=dtype is not None):
        out = layer(x)
    loss = out.float().sum() * 1e-8
    loss.backward()
    opt.step()


def run(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    layer = torch.nn.Linear(16, 16).to(device)
    opt = torch.optim.SGD(layer.parameters(), lr=1.0)
    x = torch.randn(64, 16).to(device)
    before = layer.weight.detach().clone()
    if dtype is torch.float16:
        train_step_fp16(layer, opt, x)
    else:
        train_step(layer, opt, x, dtype)
    return {"weight_change": (layer.weight.detach() - before) * 1e6}
