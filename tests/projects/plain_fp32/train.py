"""A float32 training loop: GradScaler-free, autocast-free, no .half()."""

import torch
import torch.nn.functional as F
from models.attention import Attention, Square, geometry, normalise
from torch import nn


def train(loader, epochs=1, device="cuda"):
    model = Attention(64).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.BCELoss()
    buffer = torch.zeros(1024)
    for _ in range(epochs):
        for x, mask, y in loader:
            out = model(x, mask)
            probs = torch.sigmoid(out.mean(-1))
            loss = F.binary_cross_entropy(probs, y) + criterion(probs, y)
            loss = loss + (out * out).sum() * 1e-6 + normalise(out).mean()
            loss = loss + Square.apply(out).mean()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()
            buffer.index_add_(0, torch.arange(4), out.detach().flatten()[:4])
            inv, _, spectrum, det = geometry(out.detach()[0], out.detach()[0])
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(-1e-3 * p)
    return model
