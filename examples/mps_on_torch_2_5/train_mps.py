"""Mixed precision on an Apple GPU, in a project that supports torch 2.5.

On torch 2.5 MPS autocast takes float16 only: the bfloat16 region below warns and runs in
float32. GradScaler has MPS kernels from torch 2.8 only: `scaler.step` raises before that.
"""

import torch

model = torch.nn.Linear(16, 4).to("mps")
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
scaler = torch.amp.GradScaler("mps")

for _ in range(10):
    x = torch.randn(8, 16, device="mps")
    with torch.autocast("mps", dtype=torch.bfloat16):
        loss = model(x).square().mean()
    optimizer.zero_grad()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
