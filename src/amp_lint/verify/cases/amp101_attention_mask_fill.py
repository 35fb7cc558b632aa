"""AMP101: an attention mask filled with ``-1e9`` into float16 scores.

``q @ k.transpose(-2, -1)`` is float16 under float16 autocast (a matmul, on both devices'
lists), and ``masked_fill`` converts its value with an overflow check: -1e9 is outside
float16's range (±65504), so it raises instead of masking. The last two keys are padding,
so the mask is not empty and the fill really happens. bfloat16 holds -1e9 (rounded to
-998244352) and the masked keys get probability 0, as in float32.
"""

from __future__ import annotations

import torch

RULE = "AMP101"
TITLE = "an attention mask filled with -1e9 in float16"
EXPECTED = {
    "cpu/float16": "raised: value cannot be converted to type c10::Half without overflow",
    "cpu/bfloat16": "clean",
    "cuda/float16": "raised: value cannot be converted to type c10::Half without overflow",
    "cuda/bfloat16": "clean",
}


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
    scores = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5
    scores = scores.masked_fill(pad, -1e9)
    return scores.softmax(-1) @ v


def run(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 8, 16, generator=generator).to(device) for _ in range(3))
    pad = torch.zeros(2, 1, 8, dtype=torch.bool, device=device)
    pad[..., 6:] = True  # the last two keys are padding
    with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
        out = attention(q, k, v, pad)
    return {"out": out}
