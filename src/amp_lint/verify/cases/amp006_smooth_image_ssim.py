"""AMP006: an SSIM loss written by hand (the widely copied pytorch-ssim formula) under autocast.

The images are in [0, 1] and smooth and bright, as photos with sky or walls are: 0.8 plus
texture of ±0.01, and a reconstruction 0.005 off. The local variances are then about 1e-4
while ``E[x²]`` and ``E[x]²`` are about 0.64, where float16's spacing is 2**-11 ≈ 4.9e-4 and
bfloat16's 2**-8 ≈ 3.9e-3: the subtraction returns rounding noise. ``conv2d`` runs in the
autocast dtype on both devices (its op tables), so the float32 images do not help. The case
returns the loss ``1 - SSIM``, which training minimises: its float32 value is small (about
0.016), so the wrong variances move it by far more than the 5% tolerance. Measured on the
CPU (torch 2.13): SSIM 0.9840 in float32, 0.9619 in float16 and 1.094 in bfloat16 (above its
maximum of 1). The CUDA rows are predicted from the op tables, not run: CUDA autocast also
lowers ``conv2d``, and computing ``mu1.pow(2)`` in float32 there does not restore the
precision ``mu1`` lost when it was rounded.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

RULE = "AMP006"
TITLE = "SSIM written as E[x²] - E[x]² with convolutions under autocast"
HAND_FIXED = True
EXPECTED = {
    "cpu/float16": "wrong",
    "cpu/bfloat16": "wrong",
    "cuda/float16": "wrong",
    "cuda/bfloat16": "wrong",
}


def gaussian_window(size: int, sigma: float, channels: int) -> torch.Tensor:
    coords = torch.arange(size, dtype=torch.float32) - size // 2
    g = torch.exp(-(coords**2) / (2 * sigma**2))
    g = (g / g.sum()).unsqueeze(1)
    return (g @ g.t()).expand(channels, 1, size, size).contiguous()


def ssim(img1: torch.Tensor, img2: torch.Tensor, window: torch.Tensor) -> torch.Tensor:
    channel = img1.shape[1]
    pad = window.shape[-1] // 2
    mu1 = F.conv2d(img1, window, padding=pad, groups=channel)
    mu2 = F.conv2d(img2, window, padding=pad, groups=channel)

    mu1_sq = mu1.pow(2)
    mu2_sq = mu2.pow(2)
    mu1_mu2 = mu1 * mu2

    sigma1_sq = F.conv2d(img1 * img1, window, padding=pad, groups=channel) - mu1_sq
    sigma2_sq = F.conv2d(img2 * img2, window, padding=pad, groups=channel) - mu2_sq
    sigma12 = F.conv2d(img1 * img2, window, padding=pad, groups=channel) - mu1_mu2

    c1 = 0.01**2
    c2 = 0.03**2
    ssim_map = ((2 * mu1_mu2 + c1) * (2 * sigma12 + c2)) / (
        (mu1_sq + mu2_sq + c1) * (sigma1_sq + sigma2_sq + c2)
    )
    return ssim_map.mean()


def run(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    target = (0.8 + 0.01 * torch.randn(2, 3, 64, 64, generator=generator)).clamp(0, 1)
    noise = 0.005 * torch.randn(target.shape, generator=generator)
    reconstruction = (target + noise).clamp(0, 1)
    window = gaussian_window(11, 1.5, 3).to(device)
    with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
        loss = 1 - ssim(reconstruction.to(device), target.to(device), window)
    return {"loss": loss}
