"""AMP306: a GradScaler kept in a training step whose mixed precision is bfloat16, with the
model's parameters in bfloat16 too.

The code is written for bfloat16 (the region and the parameter cast say
``torch.bfloat16``); the ``dtype`` argument only turns mixed precision on, so the float16 rows
run the same bfloat16 code. Two SGD steps on a linear layer: the gradients are bfloat16, so
``scaler.step`` has to unscale bfloat16 tensors. The CPU kernel accepts them (the step is
merely useless); the CUDA kernel is dispatched for float32, float64 and float16 only and
raises. With the scaler disabled the steps run plain SGD in bfloat16, within bfloat16's
rounding of the float32 reference.
"""

from __future__ import annotations

import torch

RULE = "AMP306"
TITLE = "a GradScaler with bfloat16 autocast and bfloat16 parameters"
_CUDA_ERROR = (
    'raised: NotImplementedError: "_amp_foreach_non_finite_check_and_unscale_cuda" '
    "not implemented for 'BFloat16'"
)
EXPECTED = {
    "cpu/float16": "clean",
    "cpu/bfloat16": "clean",
    "cuda/float16": _CUDA_ERROR,
    "cuda/bfloat16": _CUDA_ERROR,
}


def run(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    mixed = dtype is not None
    model = torch.nn.Linear(8, 4).to(device)
    if mixed:
        model = model.to(torch.bfloat16)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device)
    x = torch.randn(16, 8, device=device)
    y = torch.randn(16, 4, device=device)
    for _ in range(2):
        with torch.autocast(device, dtype=torch.bfloat16, enabled=mixed):
            loss = (model(x) - y).pow(2).mean()
        optimizer.zero_grad()
        scaler.scale(loss.float()).backward()
        scaler.step(optimizer)
        scaler.update()
    return {"weight": model.weight.detach().float(), "bias": model.bias.detach().float()}
