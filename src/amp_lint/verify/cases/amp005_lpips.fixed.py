"""AMP005: an LPIPS distance (lpips's arithmetic) under autocast, on images with a flat region.

The top half of both images is black, so every feature vector there is 0 after the ReLUs.
LPIPS normalises features with ``x / (sqrt(sum(x ** 2)) + 1e-10)``: in float16 the eps is 0
and the flat region gives 0 / 0 = NaN. CUDA autocast runs ``pow`` and ``sum`` in float32, which
keeps the eps; bfloat16 represents 1e-10.
"""

from __future__ import annotations

import lpips
import torch

RULE = "AMP005"
TITLE = "LPIPS computed under autocast"
EXPECTED = {
    "cpu/float16": "nonfinite",
    "cpu/bfloat16": "clean",
    "cuda/float16": "clean",
    "cuda/bfloat16": "clean",
}


def perceptual(loss_fn: torch.nn.Module, fake: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    with torch.autocast(fake.device.type, enabled=False):
        return loss_fn(fake.to(torch.promote_types(fake.dtype, torch.float32)), real.to(torch.promote_types(real.dtype, torch.float32)))


def run(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    loss_fn = lpips.LPIPS(net="alex").to(device)
    fake = torch.rand(2, 3, 16, 16, device=device)
    real = torch.rand(2, 3, 16, 16, device=device)
    fake[:, :, :8] = 0
    real[:, :, :8] = 0
    with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
        distance = perceptual(loss_fn, fake, real)
    return {"distance": distance}
