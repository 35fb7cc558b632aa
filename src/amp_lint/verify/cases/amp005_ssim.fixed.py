"""AMP005: SSIM (pytorch_msssim's formula) between a generated image and its target under autocast.

The images are smooth, bright 8-bit images (integers around 200, ±2), as photos with flat
regions are. SSIM's luminance term adds ``mu_x² + mu_y²`` ≈ 80 000, beyond float16's 65504:
inf / inf gives NaN. bfloat16 has the range, but its variance ``E[x²] - E[x]²`` subtracts two
numbers near 40 000 (multiples of 256 in bfloat16) to get about 2, so SSIM comes out wrong.
The images are integers, exact in both half formats, so the generator in front of SSIM loses
nothing and the fixed example can match float32 exactly.
"""

from __future__ import annotations

import torch
from pytorch_msssim import ssim

RULE = "AMP005"
TITLE = "SSIM computed under autocast"
EXPECTED = {
    "cpu/float16": "nonfinite",
    "cpu/bfloat16": "wrong",
    "cuda/float16": "nonfinite",
    "cuda/bfloat16": "wrong",
}


def ssim_loss(generator: torch.nn.Conv2d, z: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    fake = generator(z)
    with torch.autocast(fake.device.type, enabled=False):
        return 1 - ssim(fake.to(torch.promote_types(fake.dtype, torch.float32)), target.to(torch.promote_types(target.dtype, torch.float32)), data_range=255.0)


def run(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    generator = torch.nn.Conv2d(3, 3, 1).to(device)
    with torch.no_grad():  # an identity generator: the output is its input
        generator.weight.copy_(torch.eye(3).reshape(3, 3, 1, 1))
        generator.bias.zero_()
    z = torch.randint(198, 203, (2, 3, 32, 32), device=device).float()
    target = (z + torch.randint(-1, 2, z.shape, device=device)).float()
    with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
        loss = ssim_loss(generator, z, target)
    return {"loss": loss}
