"""A GradScaler kept after the mixed-precision region was taken out."""

import torch


def train(model, loader, optimizer, loss_fn):
    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
