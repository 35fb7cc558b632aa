"""Claims about statistics computed in half precision (variance, SSIM), with their programs.

The images are smooth and bright, as photos with sky or walls are: values of 0.8 ± 0.01 in
[0, 1], where SSIM's local variances (about 1e-4) are tiny next to ``E[x²]`` and ``E[x]²``
(about 0.64). The layer outputs are 4 ± 0.2, where a variance is small next to the mean's
square in the same way.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

from amp_lint.verify.claim_types import Claim, Experiment

if TYPE_CHECKING:
    import torch


def _autocast(device: str, dtype: torch.dtype | None) -> Any:
    import torch

    return torch.autocast(device, dtype=dtype, enabled=dtype is not None)


def _smooth_images(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """A target of 0.8 ± 0.01 and a reconstruction 0.005 off, in [0, 1]."""
    import torch

    target = (0.8 + 0.01 * torch.randn(2, 3, 64, 64)).clamp(0, 1)
    reconstruction = (target + 0.005 * torch.randn(target.shape)).clamp(0, 1)
    return reconstruction.to(device), target.to(device)


def _gaussian_window(device: str, channels: int = 3, size: int = 11) -> torch.Tensor:
    import torch

    coords = torch.arange(size, dtype=torch.float32) - size // 2
    g = torch.exp(-(coords**2) / (2 * 1.5**2))
    g = (g / g.sum()).unsqueeze(1)
    return (g @ g.t()).expand(channels, 1, size, size).contiguous().to(device)


def _local_moments(
    x: torch.Tensor, y: torch.Tensor, window: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """mu_x, mu_y, var_x, var_y, cov_xy as the widely copied pytorch-ssim writes them."""
    import torch.nn.functional as F

    def local_mean(t: torch.Tensor) -> torch.Tensor:
        return F.conv2d(t, window, padding=window.shape[-1] // 2, groups=t.shape[1])

    mu_x, mu_y = local_mean(x), local_mean(y)
    var_x = local_mean(x * x) - mu_x.pow(2)
    var_y = local_mean(y * y) - mu_y.pow(2)
    cov_xy = local_mean(x * y) - mu_x * mu_y
    return mu_x, mu_y, var_x, var_y, cov_xy


def _ssim(x: torch.Tensor, y: torch.Tensor, window: torch.Tensor) -> torch.Tensor:
    mu_x, mu_y, var_x, var_y, cov_xy = _local_moments(x, y, window)
    c1, c2 = 0.01**2, 0.03**2
    luminance = (2 * mu_x * mu_y + c1) / (mu_x.pow(2) + mu_y.pow(2) + c1)
    return (luminance * (2 * cov_xy + c2) / (var_x + var_y + c2)).mean()


def ssim_float_inputs(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    """1 - SSIM under autocast, its inputs cast with `.float()` (they already are float32)."""
    fake, target = _smooth_images(device)
    window = _gaussian_window(device)
    with _autocast(device, dtype):
        loss = 1 - _ssim(fake.float(), target.float(), window.float())
    return {"loss": loss}


def ssim_autocast_off(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    """The same inside `torch.autocast(device, enabled=False)`."""
    import torch

    fake, target = _smooth_images(device)
    window = _gaussian_window(device)
    with _autocast(device, dtype):
        island = torch.autocast(device, enabled=False) if dtype is not None else nullcontext()
        with island:
            loss = 1 - _ssim(fake.float(), target.float(), window.float())
    return {"loss": loss}


def local_std(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    """The local standard deviation map sqrt(E[x²] - E[x]²) under autocast."""
    fake, target = _smooth_images(device)
    window = _gaussian_window(device)
    with _autocast(device, dtype):
        _, _, var_x, _, _ = _local_moments(fake, target, window)
        std = var_x.sqrt()
    return {"std": std}


def _offset_layer_output(device: str) -> tuple[torch.nn.Linear, torch.Tensor]:
    """A linear layer whose outputs are 4 ± 0.2."""
    import torch

    layer = torch.nn.Linear(64, 64)
    with torch.no_grad():
        layer.weight.mul_(0.35)
        layer.bias.fill_(4.0)
    return layer.to(device), torch.randn(256, 64).to(device)


def torch_var_half(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    """torch.var and torch.var_mean over a half layer output, under autocast."""
    import torch

    layer, x = _offset_layer_output(device)
    with _autocast(device, dtype):
        h = layer(x)
        var = torch.var(h, dim=1)
        var_of_pair, _ = torch.var_mean(h, dim=1)
    return {"var": var, "var_mean": var_of_pair}


def hand_var_half(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    """(h * h).mean(1) - h.mean(1) ** 2 over the same layer output, under autocast."""
    layer, x = _offset_layer_output(device)
    with _autocast(device, dtype):
        h = layer(x)
        var = (h * h).mean(1) - h.mean(1) ** 2
    return {"var": var}


CLAIMS: tuple[Claim, ...] = (
    Claim(
        "ssim-matching-dtypes",
        "Giving SSIM inputs of one dtype (`.float()` both, or the target cast to the "
        "prediction's dtype) makes it work under mixed precision",
        "https://github.com/Lightning-AI/torchmetrics/issues/1453",
        (
            Experiment(
                "ssim-hand-float-inputs",
                "1 - SSIM written as E[x²] - E[x]² with conv2d (pytorch-ssim's formula), its "
                "inputs cast with .float(), under autocast on smooth images of 0.8 ± 0.01",
                ssim_float_inputs,
            ),
            Experiment(
                "ssim-hand-autocast-off",
                "the same SSIM inside torch.autocast(device, enabled=False) with .float() "
                "inputs, within the autocast region",
                ssim_autocast_off,
            ),
            Experiment(
                "local-std-hand",
                "the local standard deviation sqrt(E[x²] - E[x]²) with conv2d under autocast "
                "on the same images",
                local_std,
            ),
        ),
        verdict=(
            "False for SSIM written with convolutions: autocast runs `conv2d` in the "
            "autocast dtype whatever its inputs are, so `.float()` inputs change nothing. On "
            "smooth bright images 1 - SSIM was off by 138% in float16 and 686% in bfloat16 "
            "(SSIM 1.09, above its maximum) on the CPU, and the local standard deviation was "
            "NaN where E[x²] - E[x]² came out negative. With autocast off around the "
            "statistics and float32 inputs SSIM matched float32 (AMP006). The CUDA rows "
            "are predicted from CUDA's autocast list, which lowers conv2d too."
        ),
    ),
    Claim(
        "half-variance",
        "A variance computed in half precision is wrong: compute every variance in float32",
        "",
        (
            Experiment(
                "torch-var-half-output",
                "torch.var and torch.var_mean over dim 1 of a linear layer's output (4 ± 0.2) "
                "under autocast",
                torch_var_half,
            ),
            Experiment(
                "hand-var-half-output",
                "(h * h).mean(1) - h.mean(1) ** 2 over the same output under autocast",
                hand_var_half,
            ),
        ),
        verdict=(
            "It depends on how the variance is written. `torch.var` and `torch.var_mean` are "
            "on no autocast list, so a half input gives a half result, but they accumulate "
            "in float32 and matched float32 on the CPU (within 0.2% in float16, 1.4% in "
            "bfloat16). The same variance written as E[h²] - E[h]² subtracts two rounded "
            "numbers near 16 and was off by 26% in float16 and 217% in bfloat16 (AMP006 "
            "reports this shape over convolutions and pools). The CUDA rows are predicted, "
            "not run: CUDA's reductions accumulate in float32 as well."
        ),
    ),
)
