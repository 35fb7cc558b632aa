"""Claims about float32 casts under autocast and contractions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from amp_lint.verify.claim_types import Claim, Experiment

if TYPE_CHECKING:
    import torch

# 4096 samples of 8 features around 30 with unit spread: E[xxᵀ] sums to about 3.7 million,
# past float16's 65504, and its bfloat16 steps (4 near 900) exceed the covariance (about 1).
_SAMPLES = 4096
_OFFSET = 30.0


def _features(device: str) -> torch.Tensor:
    import torch

    return (_OFFSET + torch.randn(_SAMPLES, 8)).to(device)


def _one_pass_covariance(x: torch.Tensor) -> torch.Tensor:
    mean = x.float().mean(dim=0, keepdim=True)
    return x.float().T @ x.float() / x.shape[0] - mean.T * mean


def float_operands_matmul(device: str, dtype: Any) -> dict[str, torch.Tensor]:
    import torch

    x = _features(device)
    with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
        covariance = _one_pass_covariance(x)
    return {"covariance": covariance}


def float_operands_elementwise(device: str, dtype: Any) -> dict[str, torch.Tensor]:
    import torch

    layer = torch.nn.Linear(16, 16).to(device)
    with torch.no_grad():
        layer.bias.fill_(300.0)  # outputs of about 300: squares of 90,000 overflow float16
    x = torch.randn(256, 16).to(device)
    with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
        h = layer(x)
        energy = (h.float() * h.float()).sum(dim=0)
    return {"energy": energy}


def float_operands_autocast_disabled(device: str, dtype: Any) -> dict[str, torch.Tensor]:
    import torch

    x = _features(device)
    outer = torch.autocast(device, dtype=dtype, enabled=dtype is not None)
    with outer, torch.autocast(device, enabled=False):
        covariance = _one_pass_covariance(x)
    return {"covariance": covariance}


CLAIMS: tuple[Claim, ...] = (
    Claim(
        "float-inside-autocast",
        "Inside autocast, call `.float()` on the inputs to compute in float32",
        "https://github.com/huggingface/diffusers/pull/495",
        (
            Experiment(
                "float-operands-matmul",
                "a one-pass covariance x.float().T @ x.float() / n - mean.T * mean under "
                "autocast, x 4096 samples of 8 features around 30",
                float_operands_matmul,
            ),
            Experiment(
                "float-operands-elementwise",
                "(h.float() * h.float()).sum(0) under autocast, h a linear layer's output of "
                "about 300",
                float_operands_elementwise,
            ),
            Experiment(
                "float-operands-autocast-disabled",
                "the same covariance inside torch.autocast(device, enabled=False) nested in "
                "the autocast region",
                float_operands_autocast_disabled,
            ),
        ),
        verdict=(
            "Half right. For elementwise ops and reductions `.float()` works: the squares of "
            "values around 300 ran clean in float16 and bfloat16. For ops on autocast's "
            "lower-precision list (matmul, linear, conv, einsum) autocast casts the float32 "
            "operands straight back: the covariance was inf in float16 and 164% off in "
            "bfloat16 on CPU (torch 2.13). With autocast disabled around it the same code ran "
            "clean (AMP105)."
        ),
    ),
)
