import torch
from torch import nn

import losses as L
from losses import FocalLoss
from models import Attention


class Trainer:
    def __init__(self, dim, device="cuda"):
        self.model = Attention(dim)
        self.head = nn.Linear(dim, 1)
        self.criterion = FocalLoss()
        self.model.to(device)
        self.head.to(device)
        params = [*self.model.parameters(), *self.head.parameters()]
        self.optimizer = torch.optim.AdamW(params, lr=1e-4)
        self.scaler = torch.amp.GradScaler("cuda")

    def step(self, x, mask, y):
        with torch.autocast("cuda", dtype=torch.float16):
            h = self.model(x, mask)
            p = torch.sigmoid(self.head(h)).squeeze(-1)
            z = self.model.encode(x)
            loss = self.criterion(p, y) + L.bce(p, y) + z.mean()
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad()
        return loss
