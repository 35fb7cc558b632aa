import torch
from torch import nn


class ScaleNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.gain = nn.Parameter(torch.ones(1))

    def forward(self, x):
        h = self.proj(x)
        return h / (h.abs().amax(-1, keepdim=True) + 1e-10) * self.gain


class TokenClassifier(nn.Module):
    def __init__(self, dim, classes):
        super().__init__()
        self.norm = ScaleNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x, allowed):
        logits = self.head(self.norm(x))
        return logits.masked_fill(~allowed, -1e9)
