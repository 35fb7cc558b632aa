"""AMP001: a float32 bias written through a boolean mask into attention scores made by autocast.

The scores come from a matmul, which autocast runs in half precision; the bias is a float32
tensor. A boolean-mask write is ``index_put_``, which autocast never casts, so the dtypes
meet as they are. Any mask with at least one True entry shows it.
"""

from __future__ import annotations

import torch

RULE = "AMP001"
TITLE = "float32 values written through a boolean mask into a half tensor"
EXPECTED = {
    "cpu/float16": "raised: Index put requires the source and destination dtypes match",
    "cpu/bfloat16": "raised: Index put requires the source and destination dtypes match",
    "cuda/float16": "raised: Index put requires the source and destination dtypes match",
    "cuda/bfloat16": "raised: Index put requires the source and destination dtypes match",
}


def attention(q: torch.Tensor, k: torch.Tensor, bias: torch.Tensor, mask: torch.Tensor):
    scores = q @ k.transpose(-2, -1)
    scores[mask] = bias[mask]
    return scores.softmax(-1)


def run(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    q = torch.randn(2, 8, 16, device=device)
    k = torch.randn(2, 8, 16, device=device)
    bias = torch.randn(2, 8, 8, device=device)
    mask = torch.rand(2, 8, 8, device=device) < 0.3
    with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
        probs = attention(q, k, bias, mask)
    return {"probs": probs}
