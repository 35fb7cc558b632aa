"""A float16 training loop with the GradScaler, dtype and op bugs amp-lint finds.

Run `amp-lint check examples/` to see them, `amp-lint check --diff --unsafe-fixes examples/`
to see the fixes.
"""

import torch
import torch.nn.functional as F
from torch import nn


class ScaleGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight):
        ctx.save_for_backward(weight)
        return x @ weight

    @staticmethod
    def backward(ctx, grad):
        (weight,) = ctx.saved_tensors
        return grad @ weight.t(), None


class Detector(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.weight = nn.Parameter(torch.randn(dim, dim))

    def forward(self, x, pad_mask):
        h = self.proj(x)
        h = h.masked_fill(pad_mask, -1e9)  # raises in float16
        p = torch.sigmoid(h)
        entropy = -(p * torch.log(p + 1e-10)).sum(-1)  # 1e-10 is 0 in float16
        return ScaleGrad.apply(h, self.weight), entropy


def train(loader, dim=64):
    model = Detector(dim).cuda()
    embed = nn.Linear(dim, dim).cuda()
    optimizer = torch.optim.SGD([*model.parameters(), *embed.parameters()], lr=0.1)
    scaler = torch.amp.GradScaler("cuda")
    histogram = torch.zeros(dim, device="cuda")
    for x, target, pad_mask, index in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            out, entropy = model(x, pad_mask)
            loss = F.binary_cross_entropy(torch.sigmoid(out), target)  # refused on CUDA
            feats = embed(x)
            inverse = torch.linalg.inv(feats.mT @ feats)  # no float16 kernel
            with torch.autocast("cuda", enabled=False):
                whitened = torch.mm(feats, inverse.float())  # float16 meets float32
        histogram.index_add_(0, index, feats.detach()[:, 0])  # float32 buffer, half source
        scaler.scale(loss + entropy.mean() + whitened.mean()).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # clips the scaled gradients
        optimizer.step()  # bypasses the scaler


def fine_tune(model, loader):
    model = model.cuda().half()
    optimizer = torch.optim.Adam(model.parameters())
    scaler = torch.amp.GradScaler("cuda")
    with torch.autocast("cuda"):
        for x, y in loader:
            loss = F.mse_loss(model(x.half()), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)  # no scaler.update() in the loop
