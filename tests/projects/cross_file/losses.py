import torch
from torch import nn


class FocalLoss(nn.Module):
    def forward(self, p, y):
        return -((1 - p) ** 2 * y * torch.log(p + 1e-10)).mean()


def bce(p, y):
    return -(y * torch.log(p + 1e-8) + (1 - y) * torch.log(1 - p)).mean()
