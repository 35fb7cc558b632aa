"""Float32 model code with every pattern amp-lint looks for, but no mixed precision anywhere."""

import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.register_buffer("bias", torch.zeros(1, 1, 64, 64))

    def forward(self, x, pad_mask):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(-2, -1)
        scores = scores.masked_fill(pad_mask, -1e9)
        scores[pad_mask] = -1e9
        scores = torch.where(pad_mask, torch.full_like(scores, -1e10), scores)
        scores = scores.clamp(min=-1e9)
        bucket = (torch.sigmoid(scores) * 4096).long()
        scores = scores + self.bias.flatten()[bucket.clamp(max=4095)]
        return F.softmax(scores, dim=-1) @ v


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad


def normalise(h):
    h = (h - h.mean(0)) / (h.std(0) + 1e-8)
    return torch.log(h.abs() + 1e-10) + torch.sqrt(h.clamp(min=1e-12))


def geometry(a, b):
    inv = torch.linalg.inv(a @ a.transpose(-2, -1) + torch.eye(a.shape[-1]))
    spectrum = torch.fft.rfft(b, dim=-1)
    return inv, torch.linalg.svd(a), spectrum.abs(), torch.det(a @ a.mT)
