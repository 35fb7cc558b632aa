"""AMP103: per-class feature sums accumulated with ``index_add_`` into a float32 buffer.

The features come from a matmul, which autocast runs in half precision; the buffer is made by
``torch.zeros`` without ``dtype=``, so it is float32. ``index_add_`` is in-place, which autocast
never casts, and it refuses a source of another dtype instead of promoting it, so any labels
show it. In the float32 reference both are float32 and the sums are exact.
"""

from __future__ import annotations

import torch

RULE = "AMP103"
TITLE = "an autocast output accumulated into a float32 buffer with index_add_"
EXPECTED = {
    "cpu/float16": "raised: index_add_(): self (Float) and source (Half) must have the same",
    "cpu/bfloat16": "raised: index_add_(): self (Float) and source (BFloat16) must have the same",
    "cuda/float16": "raised: index_add_(): self (Float) and source (Half) must have the same",
    "cuda/bfloat16": "raised: index_add_(): self (Float) and source (BFloat16) must have the same",
}


def run(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(12, 8, generator=generator).to(device)
    w = torch.randn(8, 8, generator=generator).to(device)
    labels = torch.arange(12, device=device) % 3
    sums = torch.zeros(3, 8, device=device)
    with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
        features = x @ w
        sums.index_add_(0, labels, features)
    return {"sums": sums}
