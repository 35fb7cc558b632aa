"""AMP307: a whole SGD training loop inside one autocast region.

Autocast casts the float32 weights to half precision once and caches the casts until the
outermost region exits. ``optimizer.step()`` updates the float32 weights in place, but the
next iteration's forward, still in the same region, reuses the cached casts of the first
iteration's weights. The learning rate is large (0.5) so that each step moves the weights a
lot: the outputs of the later iterations then differ from float32 by far more than half
precision's rounding. The hand-fixed copy opens one region per forward, as PyTorch's AMP
examples do. bfloat16 caches the same way as float16.
"""

from __future__ import annotations

import torch

RULE = "AMP307"
TITLE = "optimizer steps inside the autocast region that runs the next forward"
HAND_FIXED = True
EXPECTED = {
    "cpu/float16": "wrong",
    "cpu/bfloat16": "wrong",
    "cuda/float16": "wrong",
    "cuda/bfloat16": "wrong",
}


def run(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    model = torch.nn.Linear(8, 8).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    x = torch.randn(16, 8, device=device)
    outputs = []
    for _ in range(3):
        with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
            out = model(x)
        outputs.append(out.detach().float())
        optimizer.zero_grad()
        out.float().square().mean().backward()
        optimizer.step()
    return {"outputs": torch.stack(outputs)}
