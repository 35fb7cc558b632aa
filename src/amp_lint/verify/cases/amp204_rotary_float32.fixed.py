"""AMP204: rotary embeddings with float32 ``cos``/``sin`` promote q and k to float32 before
flash-attn, while v stays in the autocast dtype.

The projection runs under autocast (half output); the rotation multiplies by float32 tables
built outside the region, so type promotion makes q and k float32. flash-attn (its stand-in
keeps the kernel's dtype checks) refuses float32 whatever the device or half format. The
float32 reference takes the same attention through ``F.scaled_dot_product_attention``, since
flash-attn has no float32 kernel at all; the hand-fixed copy casts q and k to v's dtype.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from flash_attn import flash_attn_func

RULE = "AMP204"
TITLE = "rotary float32 tables make q and k float32 before flash-attn"
HAND_FIXED = True
EXPECTED = {
    "cpu/float16": "raised: FlashAttention only support fp16 and bf16 data type",
    "cpu/bfloat16": "raised: FlashAttention only support fp16 and bf16 data type",
    "cuda/float16": "raised: FlashAttention only support fp16 and bf16 data type",
    "cuda/bfloat16": "raised: FlashAttention only support fp16 and bf16 data type",
}
HEADS, DIM, SEQ = 2, 8, 5


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


def attend(
    proj: torch.nn.Linear, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, reference: bool
) -> torch.Tensor:
    q, k, v = proj(x).chunk(3, dim=-1)
    q, k, v = (t.unflatten(-1, (HEADS, DIM)) for t in (q, k, v))
    q, k = rotate(q, cos, sin).to(v.dtype), rotate(k, cos, sin).to(v.dtype)
    if reference:
        heads_first = (q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        return F.scaled_dot_product_attention(*heads_first).transpose(1, 2)
    return flash_attn_func(q, k, v)


def run(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    proj = torch.nn.Linear(16, 3 * HEADS * DIM).to(device)
    x = torch.randn(2, SEQ, 16, generator=generator).to(device)
    positions = torch.arange(SEQ, device=device).float()
    inv_freq = 1.0 / 10000 ** (torch.arange(0, DIM, 2, device=device).float() / DIM)
    angles = torch.outer(positions, inv_freq)
    angles = torch.cat((angles, angles), dim=-1)[:, None, :]
    cos, sin = angles.cos(), angles.sin()
    with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
        out = attend(proj, x, cos, sin, reference=dtype is None)
    return {"attention": out.float()}
