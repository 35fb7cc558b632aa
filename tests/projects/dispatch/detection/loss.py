import torch
from torch import nn

from registry import register


@register
class SetLoss(nn.Module):
    def __init__(self, eps=1e-10):
        super().__init__()
        self.eps = eps

    def loss(self, outputs, targets):
        p = outputs["logits"].sigmoid()
        return -(targets * torch.log(p + self.eps)).mean()
