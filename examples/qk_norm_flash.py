"""Attention with QK-norm (nn.RMSNorm) feeding flash-attn inside bfloat16 autocast.

From torch 2.12, CUDA autocast runs rms_norm in float32 (pytorch/pytorch#174824), so q and k
reach flash-attn in float32 while v is bfloat16, and flash-attn raises. With
`--torch-version 2.11` amp-lint says nothing here: before 2.12 rms_norm kept its input dtype.
"""

import torch
import torch.nn as nn
from flash_attn import flash_attn_func


class SelfAttention(nn.Module):
    def __init__(self, dim: int = 64, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.q_norm = nn.RMSNorm(dim)
        self.k_norm = nn.RMSNorm(dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k = self.q_norm(q), self.k_norm(k)
        shape = (*x.shape[:2], self.heads, -1)
        attended = flash_attn_func(q.view(shape), k.view(shape), v.view(shape), causal=True)
        return self.out(attended.flatten(2))


model = SelfAttention().cuda()
with torch.autocast("cuda", dtype=torch.bfloat16):
    y = model(torch.randn(2, 128, 64, device="cuda"))
