"""AMP001: padding masked with ``-1e9`` written into float16 attention scores.

-1e9 is outside float16's range (±65504), so the write stores -inf. The last query row is
entirely padding: its softmax is then over a row of -inf, which is NaN, where float32 gives a
uniform row. bfloat16 has float32's exponent range and stores -1e9 as a finite number.
"""

from __future__ import annotations

import torch

RULE = "AMP001"
TITLE = "a constant outside the float16 range written through a mask"
EXPECTED = {
    "cpu/float16": "nonfinite",
    "cpu/bfloat16": "clean",
    "cuda/float16": "nonfinite",
    "cuda/bfloat16": "clean",
}


def attention(q: torch.Tensor, k: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
    scores = q @ k.transpose(-2, -1)
    scores[pad] = torch.finfo(scores.dtype).min
    return scores.softmax(-1)


def run(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    q = torch.randn(2, 8, 16, device=device)
    k = torch.randn(2, 8, 16, device=device)
    pad = torch.zeros(2, 8, 8, dtype=torch.bool, device=device)
    pad[:, :, 6:] = True  # the last two keys are padding
    pad[:, 7, :] = True  # and the last query row is padding entirely
    with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
        probs = attention(q, k, pad)
    return {"probs": probs}
