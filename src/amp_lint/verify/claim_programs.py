"""The programs behind docs/claims.md: small deterministic runs of what each claim warns about.

A program is ``(device, dtype) -> {name: tensor}``; ``dtype`` None is the float32 reference.
The harness seeds torch before each run. Programs draw weights and inputs on the CPU and move
them to the device, so that every device sees the same numbers. claims.py says which program
tests which claim.
"""

from __future__ import annotations

import importlib.util
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from amp_lint.verify.cases import stand_ins_importable
from amp_lint.verify.claim_extension import square_op

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    import torch

Program = Callable[[str, Any], Mapping[str, Any]]


def _autocast(device: str, dtype: torch.dtype | None) -> AbstractContextManager[Any]:
    import torch

    return torch.autocast(device, dtype=dtype, enabled=dtype is not None)


def _layer(device: str, features: int = 16) -> torch.nn.Linear:
    import torch

    return torch.nn.Linear(features, features).to(device)


# 1. Boolean-mask writes


def mask_write_zero(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    import torch

    layer = _layer(device)
    x = torch.randn(64, 16).to(device)
    mask = torch.rand(64, 16).to(device) > 0.5
    with _autocast(device, dtype):
        out = layer(x)
        out[mask] = 0
    return {"out": out}


def mask_write_float32(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    import torch

    layer = _layer(device)
    x = torch.randn(64, 16).to(device)
    mask = torch.rand(64, 16).to(device) > 0.5
    with _autocast(device, dtype):
        out = layer(x)
        out[mask] = x[mask]  # x is float32: index_put_ is in place, autocast leaves it alone
    return {"out": out}


# 2. Boolean and integer indexing


def boolean_and_integer_indexing(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    import torch

    layer = _layer(device, 256)
    x = torch.randn(4096, 256).to(device)
    mask = torch.rand(4096, 256).to(device) > 0.5  # drawn, not computed from the output
    index = torch.randint(0, 4096, (8192,)).to(device)
    with _autocast(device, dtype):
        out = layer(x)
        picked = out[mask]
        gathered = out[index]
        taken = out.index_select(0, index)
    return {"picked": picked, "gathered": gathered, "taken": taken}


# 3. Squares and sums


def _activations(device: str) -> tuple[torch.nn.Linear, torch.Tensor]:
    """A linear layer and an input that give outputs of about ±300 (a few above 256)."""
    import torch

    return _layer(device), torch.randn(64, 16).to(device) * 200


def pow_sum(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    layer, x = _activations(device)
    with _autocast(device, dtype):
        out = layer(x)
        energy = (out**2).sum()
    return {"energy": energy}


def mul_sum(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    layer, x = _activations(device)
    with _autocast(device, dtype):
        out = layer(x)
        energy = (out * out).sum()
    return {"energy": energy}


def pow_sum_half_model(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    import torch

    layer, x = _activations(device)
    dtype = dtype or torch.float32  # the model itself is converted; no autocast at all
    out = layer.to(dtype)(x.to(dtype))
    energy = (out**2).sum()
    return {"energy": energy}


# 4. Division by small values


def std_normalise_dead_unit(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    import torch

    layer = _layer(device)
    with torch.no_grad():
        layer.bias[0] = -1e4  # a dead ReLU unit: feature 0 is 0 for every sample
    x = torch.randn(64, 16).to(device)
    with _autocast(device, dtype):
        features = torch.relu(layer(x))
        normalised = features / (features.std(0) + 1e-8)
    return {"normalised": normalised}


def divide_by_1e_3(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    import torch

    layer = _layer(device)
    x = torch.randn(64, 16).to(device) * 170  # outputs of about ±100
    with _autocast(device, dtype):
        out = layer(x)
        scaled = out / 1e-3
    return {"scaled": scaled}


# 5. Perceptual and structural metrics


def _images(device: str, kind: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Two related images: 8-bit integers (0..255), bright and smooth 8-bit integers (about 200,
    as photos with flat regions are) or values in [0, 1]."""
    import torch

    if kind == "8bit-bright":
        target = torch.randint(198, 203, (2, 3, 32, 32)).to(device).float()
        return target + torch.randint(-1, 2, target.shape).to(device).float(), target
    if kind == "8bit":
        target = torch.randint(0, 256, (2, 3, 32, 32)).to(device).float()
        noise = torch.randint(-8, 9, target.shape).to(device).float()
        return (target + noise).clamp(0, 255), target
    target = torch.rand(2, 3, 32, 32).to(device)
    fake = (target + 0.05 * torch.randn(target.shape).to(device)).clamp(0, 1)
    if kind == "unit-black":  # the top half black in both: zero feature vectors there
        target[:, :, :16] = 0
        fake[:, :, :16] = 0
    return fake, target


def lpips_program(kind: str) -> Program:
    def lpips_distance(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
        with stand_ins_importable():
            lpips = importlib.import_module("lpips")
        loss_fn = lpips.LPIPS(net="alex").to(device)
        fake, target = _images(device, kind)
        with _autocast(device, dtype):
            distance = loss_fn(fake, target)
        return {"distance": distance}

    return lpips_distance


def ssim_program(kind: str) -> Program:
    def ssim_value(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
        with stand_ins_importable():
            pytorch_msssim = importlib.import_module("pytorch_msssim")
        fake, target = _images(device, kind)
        data_range = 255.0 if kind.startswith("8bit") else 1.0
        with _autocast(device, dtype):
            value = pytorch_msssim.ssim(fake, target, data_range=data_range)
        return {"ssim": value}

    return ssim_value


def torchmetrics_ssim_program(kind: str) -> Program:
    def ssim_value(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
        image = importlib.import_module("torchmetrics.functional.image")
        fake, target = _images(device, kind)
        with warnings.catch_warnings(), _autocast(device, dtype):
            # torchmetrics warns about its own import paths (FutureWarning "Importing `...`"),
            # which says nothing about mixed precision
            warnings.filterwarnings("ignore", "Importing `", FutureWarning)
            value = image.structural_similarity_index_measure(fake, target, data_range=255.0)
        return {"ssim": value}

    return ssim_value


def torchmetrics_missing(device: str) -> str:
    return "" if importlib.util.find_spec("torchmetrics") else "torchmetrics is not installed"


# 6. A compiled extension without a Half kernel (built by claim_extension.py)


def extension_under_autocast(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    import torch

    square = square_op(device)
    layer = _layer(device)
    x = torch.randn(64, 16).to(device)
    with _autocast(device, dtype):
        out = square(layer(x))
    return {"out": out}


def extension_custom_fwd(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    import torch

    square = square_op(device)
    # torch.amp.custom_fwd/custom_bwd and Function.apply are untyped
    custom_fwd: Callable[..., Callable[[Any], Any]] = torch.amp.custom_fwd
    custom_bwd: Callable[..., Callable[[Any], Any]] = torch.amp.custom_bwd

    class Square(torch.autograd.Function):
        @staticmethod
        @custom_fwd(device_type=device, cast_inputs=torch.float32)
        def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
            ctx.save_for_backward(x)
            return square(x)

        @staticmethod
        @custom_bwd(device_type=device)
        def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
            (x,) = ctx.saved_tensors
            result: torch.Tensor = 2 * x * grad
            return result

    apply: Callable[[torch.Tensor], torch.Tensor] = Square.apply
    layer = _layer(device)
    x = torch.randn(64, 16).to(device)
    with _autocast(device, dtype):
        out = apply(layer(x))
    return {"out": out}


# 7. An autocast-safe loss plus a hand-written one, through GradScaler


def two_losses(second: str) -> Program:
    def scaled_backward(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
        import torch
        import torch.nn.functional as F

        layer = _layer(device)
        optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler(device, enabled=dtype is not None)
        x = torch.randn(64, 16).to(device)
        labels = torch.randint(0, 16, (64,)).to(device)
        target = torch.randn(64, 16).to(device)
        flags = (torch.rand(64, 16) > 0.5).float().to(device)
        with _autocast(device, dtype):
            logits = layer(x)
            classification = F.cross_entropy(logits, labels)  # float32 under autocast
            if second == "bce":  # refused by CUDA autocast, float32 under CPU autocast
                other = F.binary_cross_entropy(torch.sigmoid(logits), flags)
            elif second == "bce-with-logits":
                other = F.binary_cross_entropy_with_logits(logits, flags)
            elif second == "mse":
                other = F.mse_loss(logits, target)  # autocast runs it in float32
            elif second == "hand-written":
                error = logits - target  # float32: type promotion with the float32 target
                other = (error * error).mean()
            else:
                other = (logits * logits).mean()  # an activation penalty: the autocast dtype
            total = classification + other
        scaled: Any = scaler.scale(total)  # Tensor.backward is untyped
        scaled.backward()
        scaler.unscale_(optimizer)
        assert layer.weight.grad is not None and layer.bias.grad is not None
        grads = {"weight_grad": layer.weight.grad.clone(), "bias_grad": layer.bias.grad.clone()}
        scaler.step(optimizer)
        scaler.update()
        return {"loss": total.detach(), **grads}

    return scaled_backward


# The claims
