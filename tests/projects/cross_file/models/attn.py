import torch
from torch import nn

from .masking import apply_mask


class Attention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x, mask):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q * torch.rsqrt((q * q).mean(-1, keepdim=True) + 1e-6)
        scores = apply_mask(q @ k.transpose(-2, -1), mask)
        return torch.softmax(scores, dim=-1) @ v

    def encode(self, x):
        h = self.qkv(x)
        return h / (h.abs().amax(dim=-1, keepdim=True) + 1e-10)
