"""AMP401: the deprecated ``torch.cuda.amp`` / ``torch.cpu.amp`` spellings of autocast and
GradScaler.

They still work, but every call emits a FutureWarning (PyTorch 2.4 and later) and they are due
for removal. The numerics are the same as the ``torch.amp`` spelling.
"""

from __future__ import annotations

import torch

RULE = "AMP401"
TITLE = "deprecated torch.cuda.amp / torch.cpu.amp spellings"
EXPECTED = {
    "cpu/float16": "warned: FutureWarning: `torch.cpu.amp.autocast(args...)` is deprecated",
    "cpu/bfloat16": "warned: FutureWarning: `torch.cpu.amp.autocast(args...)` is deprecated",
    "cuda/float16": "warned: FutureWarning: `torch.cuda.amp.GradScaler(args...)` is deprecated",
    "cuda/bfloat16": "warned: FutureWarning: `torch.cuda.amp.GradScaler(args...)` is deprecated",
}


def run(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    layer = torch.nn.Linear(8, 8).to(device)
    x = torch.randn(4, 8, device=device)
    enabled = dtype is not None
    if device == "cuda":
        scaler = torch.cuda.amp.GradScaler(enabled=enabled)
        autocast = torch.cuda.amp.autocast(enabled=enabled, dtype=dtype or torch.float16)
    else:
        scaler = None
        autocast = torch.cpu.amp.autocast(enabled=enabled, dtype=dtype or torch.bfloat16)
    with autocast:
        y = layer(x)
    if scaler is not None:
        scaler.scale(y.float().sum()).backward()
    return {"y": y.float()}
