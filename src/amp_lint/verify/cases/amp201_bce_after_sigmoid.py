"""AMP201: ``F.binary_cross_entropy`` of a sigmoid, computed inside the autocast region.

CUDA autocast registers binary_cross_entropy as banned: the call raises "unsafe to autocast"
before computing anything, in float16 and bfloat16 alike, whatever the inputs. CPU autocast
lists it as a float32 op instead and runs it (clean there). The logits come from a linear layer
so that they are half precision under autocast, as in a real discriminator or detection head;
their range (about ±4) keeps the probabilities away from 0 and 1, so the float32 reference and
``binary_cross_entropy_with_logits`` (the fix) agree closely.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

RULE = "AMP201"
TITLE = "binary_cross_entropy, which CUDA autocast refuses to run"
_REFUSED = (
    "raised: torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast"
)
EXPECTED = {
    "cpu/float16": "clean",
    "cpu/bfloat16": "clean",
    "cuda/float16": _REFUSED,
    "cuda/bfloat16": _REFUSED,
}


def discriminator_loss(
    head: torch.nn.Linear, x: torch.Tensor, target: torch.Tensor
) -> torch.Tensor:
    logits = head(x)
    return F.binary_cross_entropy(torch.sigmoid(logits), target)


def run(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    head = torch.nn.Linear(16, 1)
    with torch.no_grad():
        head.weight.copy_(torch.randn(1, 16, generator=generator) / 4)
        head.bias.zero_()
    head = head.to(device)
    x = torch.randn(64, 16, generator=generator).to(device)
    target = (torch.rand(64, 1, generator=generator) > 0.5).float().to(device)
    with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
        loss = discriminator_loss(head, x, target)
    return {"loss": loss}
