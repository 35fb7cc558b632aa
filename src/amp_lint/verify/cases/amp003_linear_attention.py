"""AMP003: linear attention's normaliser and kᵀv computed in float16 under autocast.

Linear attention (Katharopoulos et al. 2020) with ELU+1 features: ``kv = kᵀv`` and the
normaliser ``z = q · Σₙ k`` both sum over the sequence axis, and matmul stores its float32
accumulator in the autocast dtype on both devices. The inputs are realistic: a LayerNorm, then
a default-initialised Linear into two 64-dimensional heads, over 4096 tokens. Each feature is
about 1.06, so z grows by about 88 per token: 4096 tokens give about 360,000, inf in float16
from about 750 tokens. 1/inf is 0, so the attention output is silently all zeros (measured on
torch 2.13 CPU: 100% off, finite). bfloat16 has float32's range and stays within 1% of float32.
The CUDA rows are predictions from CUDA's table: matmul is lower precision, and the float32
``sum`` CUDA autocast gives is cast back to float16 by the matmul that uses it.

Lint only: the hand-fixed copy computes the attention in float32 with autocast disabled.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

RULE = "AMP003"
TITLE = "linear attention's sums over the sequence in float16"
HAND_FIXED = True
EXPECTED = {
    "cpu/float16": "wrong",
    "cpu/bfloat16": "clean",
    "cuda/float16": "wrong",
    "cuda/bfloat16": "clean",
}
TOKENS = 4096
HEADS = 2
HEAD_SIZE = 64


def linear_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    q, k = F.elu(q) + 1, F.elu(k) + 1
    kv = k.transpose(-2, -1) @ v
    z = q @ k.sum(dim=-2).unsqueeze(-1)
    return (q @ kv) / z


def run(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    width = HEADS * HEAD_SIZE
    norm = torch.nn.LayerNorm(width).to(device)
    qkv = torch.nn.Linear(width, 3 * width).to(device)
    x = torch.randn(2, TOKENS, width).to(device)
    with torch.autocast(device, dtype=dtype, enabled=dtype is not None), torch.no_grad():
        q, k, v = qkv(norm(x)).chunk(3, dim=-1)
        q, k, v = (t.reshape(2, TOKENS, HEADS, HEAD_SIZE).transpose(1, 2) for t in (q, k, v))
        out = linear_attention(q, k, v)
    return {"out": out}
