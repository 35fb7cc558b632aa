"""AMP202: ``torch.linalg.slogdet`` of a covariance built with a matmul under autocast.

``centered.mT @ centered`` is a matmul, so autocast computes the covariance in float16/bfloat16.
``linalg_slogdet`` is on neither device's autocast list: it receives the half-precision matrix
and refuses it ("linalg.slogdet: Low precision dtypes not supported", a check shared by CPU and
CUDA), so, unlike ``linalg.inv``, this fails under CPU autocast too. The samples are 64 random
rows of width 8, so the covariance is well conditioned and its rounding to half precision moves
the log-determinant by far less than the 5% tolerance.
"""

from __future__ import annotations

import torch

RULE = "AMP202"
TITLE = "a log-determinant of a half-precision matmul output"
EXPECTED = {
    "cpu/float16": "raised: linalg.slogdet: Low precision dtypes not supported. Got Half",
    "cpu/bfloat16": "raised: linalg.slogdet: Low precision dtypes not supported. Got BFloat16",
    "cuda/float16": "raised: linalg.slogdet: Low precision dtypes not supported. Got Half",
    "cuda/bfloat16": "raised: linalg.slogdet: Low precision dtypes not supported. Got BFloat16",
}


def gaussian_log_likelihood_term(samples: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    centered = (samples - samples.mean(0)) @ w
    covariance = centered.mT @ centered / samples.shape[0]
    sign, logabsdet = torch.linalg.slogdet(covariance.to(torch.promote_types(covariance.dtype, torch.float32)))
    return sign * logabsdet


def run(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    samples = (torch.randn(64, 8, generator=generator) * 2 + 1).to(device)
    w = torch.eye(8).to(device)
    with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
        term = gaussian_log_likelihood_term(samples, w)
    return {"term": term}
