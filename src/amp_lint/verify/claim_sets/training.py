"""Claims about half or bfloat16 parameters, loaders and optimizers.

Programs follow claims.py's contract: ``(device, dtype) -> {name: tensor}``, dtype None for
the float32 reference, weights and inputs drawn on the CPU (the harness seeds torch) and
moved to the device.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from amp_lint.verify.claim_types import Claim, Experiment

if TYPE_CHECKING:
    import torch

_STEPS = 1000
_LR = 1e-4


def _pretrained_layer(device: str) -> tuple[Any, Any, Any]:
    """A 16x4 linear layer with weights about 1.0 (as trained weights often are), inputs, and
    targets whose best weights are 0.5: every gradient is about 1, every AdamW update 1e-4."""
    import torch

    layer = torch.nn.Linear(16, 4)
    with torch.no_grad():
        layer.weight.copy_(1.0 + 0.01 * torch.randn(4, 16))
        layer.bias.zero_()
    x = torch.randn(64, 16)
    y = x @ torch.full((16, 4), 0.5)
    return layer.to(device), x.to(device), y.to(device)


def _loss(out: torch.Tensor, y: torch.Tensor) -> Any:
    return (out.float() - y).pow(2).sum(1).mean()


def half_params_adamw(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    """The layer converted to `dtype`, then 1000 AdamW steps of lr 1e-4 (no autocast)."""
    import torch

    layer, x, y = _pretrained_layer(device)
    if dtype is not None:
        layer = layer.to(dtype)
    optimizer = torch.optim.AdamW(layer.parameters(), lr=_LR)
    for _ in range(_STEPS):
        loss = _loss(layer(x.to(layer.weight.dtype)), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return {"weight": layer.weight.detach().float()}


def float32_params_autocast(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    """The layer kept float32, forward under autocast(dtype), 1000 AdamW steps of lr 1e-4."""
    import torch

    layer, x, y = _pretrained_layer(device)
    optimizer = torch.optim.AdamW(layer.parameters(), lr=_LR)
    for _ in range(_STEPS):
        with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
            out = layer(x)
        loss = _loss(out, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return {"weight": layer.weight.detach().float()}


def half_params_master_copy(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    """The layer converted to `dtype` for forward and backward; AdamW updates float32 master
    copies of its weights, copied back into the layer after each step (what DeepSpeed,
    Megatron and Transformer Engine's `FusedAdam(master_weights=True)` do)."""
    import torch

    layer, x, y = _pretrained_layer(device)
    if dtype is not None:
        layer = layer.to(dtype)
    params = list(layer.parameters())
    masters = [p.detach().float().clone().requires_grad_() for p in params]
    optimizer = torch.optim.AdamW(masters, lr=_LR)
    for _ in range(_STEPS):
        loss = _loss(layer(x.to(layer.weight.dtype)), y)
        layer.zero_grad()
        loss.backward()
        for master, param in zip(masters, params):
            master.grad = param.grad.float()
        optimizer.step()
        with torch.no_grad():
            for master, param in zip(masters, params):
                param.copy_(master)
    return {"weight": masters[0].detach()}


def tiny_gradients(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    """The weight gradient of a loss of about 1e-8 (a layer's output times 1e-9), the layer
    run under autocast(dtype): what loss scaling protects."""
    import torch

    layer, x, _ = _pretrained_layer(device)
    with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
        out = layer(x) * 1e-9
    out.float().mean().backward()
    assert layer.weight.grad is not None
    return {"grad": layer.weight.grad.detach()}


CLAIMS: tuple[Claim, ...] = (
    Claim(
        "bf16-needs-no-care",
        "bfloat16 needs no special care: its dynamic range equals float32's",
        "https://pytorch.org/blog/what-every-user-should-know-about-mixed-precision-training-in-pytorch/",
        (
            Experiment(
                "tiny-gradients-under-autocast",
                "the weight gradient of a loss of about 1e-8 (a linear layer's output times "
                "1e-9) under autocast, without loss scaling",
                tiny_gradients,
            ),
            Experiment(
                "half-params-adamw-small-updates",
                "a linear layer with weights about 1.0 converted with .to(dtype), then 1000 "
                "torch.optim.AdamW steps of lr 1e-4 (gradients about 1)",
                half_params_adamw,
            ),
            Experiment(
                "float32-params-under-autocast",
                "the same layer kept float32, its forward pass under autocast, 1000 AdamW "
                "steps of lr 1e-4",
                float32_params_autocast,
            ),
            Experiment(
                "half-params-float32-master-copy",
                "the same layer converted with .to(dtype), AdamW updating float32 master copies "
                "of its weights that are copied back after each of 1000 steps",
                half_params_master_copy,
            ),
        ),
        verdict=(
            "True of the range, false of the care. A loss of about 1e-8 kept its weight "
            "gradients under bfloat16 autocast and lost them under float16 autocast, so "
            "bfloat16 needs no loss scaling. But parameters stored in bfloat16 lost every "
            "AdamW update of lr 1e-4: after 1000 steps the weights were where the cast put "
            "them, about 0.1 away from the float32 run's, in bfloat16 as in float16 "
            "(AMP308). Keeping the weights float32 under autocast, or letting the optimizer "
            "update float32 master copies, matched the float32 run."
        ),
    ),
)
