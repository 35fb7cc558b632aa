import torch
import torch.nn.functional as F
from accelerate import Accelerator

from net import Net


def main(loader, epochs=1):
    accelerator = Accelerator(mixed_precision="fp16")
    model = Net(256, 10)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for _ in range(epochs):
        for x, valid, y in loader:
            loss = F.nll_loss(model(x, valid), y)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
