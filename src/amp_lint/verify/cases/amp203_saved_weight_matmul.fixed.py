"""AMP203: a custom autograd Function whose backward multiplies the gradient by a saved weight.

``forward`` receives the encoder's half-precision output and a float32 weight and runs with
autocast still on, so ``x @ w`` is a half matmul and the output, hence the incoming gradient,
is half. ``backward`` runs when ``.backward()`` is called after the autocast block, with
autocast off: ``grad @ w.t()`` multiplies a half gradient by the float32 weight it saved and
raises "expected m1 and m2 to have the same dtype" (CUDA: "mat1 and mat2"). bfloat16 fails
the same way: the hazard is the dtype mismatch, not the range.
"""

from __future__ import annotations

import torch

RULE = "AMP203"
TITLE = "a custom Function whose backward mixes a half gradient with a float32 weight"
EXPECTED = {
    "cpu/float16": "raised: to have the same dtype",
    "cpu/bfloat16": "raised: to have the same dtype",
    "cuda/float16": "raised: to have the same dtype",
    "cuda/bfloat16": "raised: to have the same dtype",
}


class ScaledMatmul(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
    @torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32)
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad @ w.t(), x.t() @ grad


def run(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    encoder = torch.nn.Linear(8, 8).to(device)
    w = torch.randn(8, 4, device=device, requires_grad=True)
    x = torch.randn(16, 8, device=device)
    with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
        h = encoder(x)
        y = ScaledMatmul.apply(h, w)
    y.float().square().sum().backward()
    assert w.grad is not None and encoder.weight.grad is not None
    return {"y": y.float(), "grad_w": w.grad, "grad_encoder": encoder.weight.grad}
