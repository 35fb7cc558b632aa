"""A trainer that builds its model and loss through a registry: the calls under autocast
cannot be resolved, so the classes that define the called methods are analysed as if the
registry had returned them."""

import torch

from registry import build


def train(cfg, loader):
    model = build(cfg.model)
    criterion = build(cfg.loss)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    scaler = torch.amp.GradScaler("cuda")
    for images, targets in loader:
        optimizer.zero_grad()
        with torch.autocast("cuda", dtype=torch.float16):
            outputs = model(images)
            loss = criterion.loss(outputs, targets)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
