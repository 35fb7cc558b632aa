"""AMP102: a binary cross-entropy written by hand as ``log(p + 1e-10)`` in float16.

The logits come from a linear layer (float16 under float16 autocast) and go through
``sigmoid``, which no autocast list touches, so ``p`` is float16. The first logit is -20:
its probability 2e-9 rounds to 0 in float16, and ``p + 1e-10`` stays 0 because 1e-10 rounds
to 0 too. ``log`` of it is -inf (CUDA runs ``log`` in float32, but its input is already 0),
and with the target 0 there, ``0 * -inf`` is NaN. float32 and bfloat16 keep both 2e-9 and
1e-10, so the loss is finite; the other logits (-1.5 .. 3) keep bfloat16 within tolerance.
"""

from __future__ import annotations

import torch

RULE = "AMP102"
TITLE = "log(p + 1e-10) where p underflowed to 0 in float16"
EXPECTED = {
    "cpu/float16": "nonfinite",
    "cpu/bfloat16": "clean",
    "cuda/float16": "nonfinite",
    "cuda/bfloat16": "clean",
}


def bce(head: torch.nn.Linear, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    p = torch.sigmoid(head(x))
    return -(y * torch.log(p.to(torch.promote_types(p.dtype, torch.float32)) + 1e-10) + (1 - y) * torch.log(1 - p.to(torch.promote_types(p.dtype, torch.float32)) + 1e-10))


def run(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    head = torch.nn.Linear(4, 4).to(device)
    with torch.no_grad():
        head.weight.copy_(torch.eye(4))
        head.bias.zero_()
    x = torch.tensor([[-20.0, -1.5, 0.5, 3.0]], device=device)
    y = torch.tensor([[0.0, 0.0, 1.0, 1.0]], device=device)
    with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
        loss = bce(head, x, y)
    return {"loss": loss}
