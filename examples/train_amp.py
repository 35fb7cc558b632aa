"""A small mixed-precision training script with the AMP bugs amp-lint finds.

Run `amp-lint check examples/` to see them, `amp-lint check --diff --unsafe-fixes examples/`
to see the fixes.
"""

import lpips
import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.position = nn.Linear(dim, 1)
        self.rel_bias = nn.Parameter(torch.zeros(4096))
        self.scale = dim**-0.5

    def forward(self, x, pad_mask):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = (q @ k.transpose(-2, -1)) * self.scale
        bucket = (torch.sigmoid(self.position(x)) * 4095).long()  # float16 arithmetic
        scores[pad_mask] = -1e9  # float16 here: silently becomes -inf
        return F.softmax(scores, dim=-1) @ v + self.rel_bias[bucket]


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.attn = Attention(dim)
        self.head = nn.Linear(dim, dim)

    def forward(self, x, pad_mask):
        return self.head(self.attn(x, pad_mask))


def standardize(h):
    return (h - h.mean(0)) / (h.std(0) + 1e-8)


def train(loader, dim=64):
    model = Model(dim)
    optimizer = torch.optim.AdamW(model.parameters())
    perceptual = lpips.LPIPS(net="alex")
    scaler = torch.cuda.amp.GradScaler()
    for x, target, pad_mask in loader:
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            out = model(x, pad_mask)
            z = standardize(out)
            energy = (out * out).sum()
            loss = perceptual(out, target).mean() + energy
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        log = torch.zeros(x.shape[0], x.shape[-1])
        log[pad_mask] = out.detach()[pad_mask]
        print(z.sum())
