"""Stand-in for flash-attn 2's ``flash_attn_func`` (flash-attn builds only for CUDA, and not on
the machines that run the evidence): the dtype checks of its csrc/flash_attn/flash_api.cpp,
with the same messages, then the attention itself through ``F.scaled_dot_product_attention``
in the inputs' dtype, with autocast off as in the real kernel, which autocast never reaches.
Layout as flash-attn's: (batch, seqlen, nheads, headdim)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def flash_attn_func(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    dropout_p: float = 0.0,
    softmax_scale: float | None = None,
    causal: bool = False,
) -> torch.Tensor:
    if q.dtype not in (torch.float16, torch.bfloat16):
        raise RuntimeError("FlashAttention only support fp16 and bf16 data type")
    if k.dtype != q.dtype:
        raise RuntimeError("query and key must have the same dtype")
    if v.dtype != q.dtype:
        raise RuntimeError("query and value must have the same dtype")
    with torch.autocast(q.device.type, enabled=False):
        out = F.scaled_dot_product_attention(
            q.transpose(1, 2),
            k.transpose(1, 2),
            v.transpose(1, 2),
            dropout_p=dropout_p,
            is_causal=causal,
            scale=softmax_scale,
        )
    return out.transpose(1, 2)
