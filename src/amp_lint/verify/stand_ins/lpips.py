"""Stand-in for ``lpips.LPIPS``: the LPIPS distance (Zhang et al. 2018) over a small convolutional
feature network with fixed random weights instead of pretrained AlexNet.

What matters for mixed precision is kept as the library has it: features are unit-normalised
along channels with ``x / (sqrt(sum(x ** 2)) + 1e-10)``, squared differences are weighted by a
1x1 convolution and averaged over space.
"""

from __future__ import annotations

import torch
from torch import nn

EPS = 1e-10


def normalize_tensor(x: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    norm = torch.sqrt(torch.sum(x**2, dim=1, keepdim=True))
    return x / (norm + eps)


class LPIPS(nn.Module):
    def __init__(self, net: str = "alex", channels: int = 16) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(1234)
        self.features = nn.ModuleList(
            [nn.Conv2d(3, channels, 3, padding=1), nn.Conv2d(channels, channels, 3, padding=1)]
        )
        self.lins = nn.ModuleList([nn.Conv2d(channels, 1, 1, bias=False) for _ in self.features])
        with torch.no_grad():
            for layer in [*self.features, *self.lins]:
                weight = torch.randn(tuple(layer.weight.shape), generator=generator) * 0.2
                layer.weight.copy_(weight.abs() if layer in self.lins else weight)
                if layer.bias is not None:
                    layer.bias.zero_()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        total = torch.zeros((), device=x.device)
        for layer, lin in zip(self.features, self.lins):
            x, y = torch.relu(layer(x)), torch.relu(layer(y))
            diff = (normalize_tensor(x) - normalize_tensor(y)) ** 2
            total = total + lin(diff).mean()
        return total
