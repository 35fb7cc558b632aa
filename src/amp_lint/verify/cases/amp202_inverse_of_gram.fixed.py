"""AMP202: ``torch.linalg.inv`` of a Gram matrix built with a matmul under autocast.

``features.mT @ features`` is a matmul, so autocast computes it in float16/bfloat16. CUDA
autocast does not list ``linalg_inv`` (it runs in its input's dtype) and ``linalg.inv`` refuses
low-precision input ("linalg.inv: Low precision dtypes not supported. Got Half"). CPU autocast
lists ``linalg_inv`` as a float32 op and runs it (clean there). The features are 64 random rows
of width 8, so the Gram matrix is close to 64·I and well conditioned: the half-precision
rounding of the Gram matrix alone moves the inverse by well under the 5% tolerance.
"""

from __future__ import annotations

import torch

RULE = "AMP202"
TITLE = "a matrix inverse of a half-precision matmul output"
EXPECTED = {
    "cpu/float16": "clean",
    "cpu/bfloat16": "clean",
    "cuda/float16": "raised: linalg.inv: Low precision dtypes not supported. Got Half",
    "cuda/bfloat16": "raised: linalg.inv: Low precision dtypes not supported. Got BFloat16",
}


def whitening_matrix(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    features = x @ w
    gram = features.mT @ features
    return torch.linalg.inv(gram.to(torch.promote_types(gram.dtype, torch.float32)))


def run(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(64, 8, generator=generator).to(device)
    w = torch.eye(8).to(device)
    with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
        inverse = whitening_matrix(x, w)
    return {"inverse": inverse}
