"""AMP105: a covariance computed in "float32" with `.float()` operands under autocast.

``covariance`` takes the one-pass formula E[xxᵀ] - μμᵀ over 4096 samples of 8 features around
30 (unit spread), and casts its inputs with ``.float()`` to compute in float32. Under autocast
the matmul is on the lower-precision list of both devices (CPU and CUDA tables), so autocast
casts the ``.float()`` operands straight back: the second moment sums to 4096 · 901 ≈ 3.7
million in the autocast dtype. float16 stores that as inf (past 65504); bfloat16 keeps 8
significant bits of about 900 (steps of 4), and subtracting μμᵀ ≈ 900 cancels them: measured
164% off on torch 2.13 CPU. The fix runs the statement with autocast disabled, where the
``.float()`` operands stay float32. The CUDA rows are predictions from CUDA's table (matmul is
lower precision there too; cuBLAS accumulates in float32 but stores the half result).
"""

from __future__ import annotations

import torch

RULE = "AMP105"
TITLE = "a one-pass covariance with .float() operands under autocast"
EXPECTED = {
    "cpu/float16": "nonfinite",
    "cpu/bfloat16": "wrong",
    "cuda/float16": "nonfinite",
    "cuda/bfloat16": "wrong",
}


def covariance(features: torch.Tensor) -> torch.Tensor:
    n = features.shape[0]
    mean = features.float().mean(dim=0, keepdim=True)
    with torch.autocast(features.device.type, enabled=False):
        second_moment = features.float().T @ features.float() / n
    return second_moment - mean.T * mean


def run(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    features = (30 + torch.randn(4096, 8, generator=generator)).to(device)
    with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
        cov = covariance(features)
    return {"covariance": cov}
