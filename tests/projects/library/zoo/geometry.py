import torch
from torch import nn


class PoseRefiner(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.encoder = nn.Linear(dim, 9)

    def forward(self, x):
        rot = self.encoder(x).view(-1, 3, 3)
        return torch.linalg.inv(rot @ rot.transpose(-2, -1))
