import torch
from torch import nn

from registry import register

from .constants import NEG_INF


@register
class Detector(nn.Module):
    def __init__(self, dim, classes):
        super().__init__()
        self.backbone = nn.Conv2d(3, dim, 3)
        self.cls = nn.Linear(dim, classes)

    def forward(self, images, valid=None):
        features = self.backbone(images).flatten(2).transpose(1, 2)
        logits = self.cls(features)
        if valid is not None:
            logits = logits.masked_fill(~valid, NEG_INF)
        return {"logits": logits, "features": features}
