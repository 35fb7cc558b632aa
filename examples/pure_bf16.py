"""Pure bfloat16 fine-tuning: the weights themselves are bfloat16."""

import torch


def train(net, loader, loss_fn):
    model = net.cuda().to(torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    for x, y in loader:
        loss = loss_fn(model(x.cuda().bfloat16()), y.cuda())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
