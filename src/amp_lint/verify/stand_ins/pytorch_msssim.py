"""Stand-in for ``pytorch_msssim.ssim``: SSIM with an 11x11 Gaussian window (sigma 1.5),
K1 = 0.01, K2 = 0.03, computed as ``E[xy] - E[x]E[y]`` with depthwise convolutions, the way
pytorch_msssim, torchmetrics and kornia compute it."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _gaussian_window(size: int, sigma: float, channels: int, like: torch.Tensor) -> torch.Tensor:
    coords = torch.arange(size, dtype=torch.float32, device=like.device) - size // 2
    g = torch.exp(-(coords**2) / (2 * sigma**2))
    g = g / g.sum()
    return g.to(like.dtype).reshape(1, 1, 1, size).repeat(channels, 1, 1, 1)


def _blur(x: torch.Tensor, window: torch.Tensor) -> torch.Tensor:
    channels = x.shape[1]
    x = F.conv2d(x, window, groups=channels)
    return F.conv2d(x, window.transpose(2, 3), groups=channels)


def ssim(
    x: torch.Tensor, y: torch.Tensor, data_range: float = 255.0, size_average: bool = True
) -> torch.Tensor:
    window = _gaussian_window(11, 1.5, x.shape[1], x)
    c1 = (0.01 * data_range) ** 2
    c2 = (0.03 * data_range) ** 2
    mu_x, mu_y = _blur(x, window), _blur(y, window)
    sigma_x = _blur(x * x, window) - mu_x * mu_x
    sigma_y = _blur(y * y, window) - mu_y * mu_y
    sigma_xy = _blur(x * y, window) - mu_x * mu_y
    luminance = (2 * mu_x * mu_y + c1) / (mu_x * mu_x + mu_y * mu_y + c1)
    structure = (2 * sigma_xy + c2) / (sigma_x + sigma_y + c2)
    ssim_map = luminance * structure
    return ssim_map.mean() if size_average else ssim_map.flatten(2).mean(-1)


class SSIM(torch.nn.Module):
    def __init__(self, data_range: float = 255.0) -> None:
        super().__init__()
        self.data_range = data_range

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return ssim(x, y, data_range=self.data_range)
