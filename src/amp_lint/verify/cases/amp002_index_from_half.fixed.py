"""AMP002: a flat table index computed from coordinates held in half precision.

The coordinates (rows 0-63, columns 0-255) come out of a linear layer under autocast as exact
small integers, in float16 and in bfloat16 (which holds integers exactly only up to 256).
``row * 1000 + col`` reaches 63 255, where float16 keeps only multiples of 32 and bfloat16
multiples of 256, so ``.long()`` picks the wrong entry of a random table and the gathered values
are unrelated to the float32 ones. With columns up to 999 the bfloat16 coordinates themselves
are already rounded, and no fix after the layer can recover them (see the rule's limitations).
"""

from __future__ import annotations

import torch

RULE = "AMP002"
TITLE = "an index computed in half precision"
EXPECTED = {
    "cpu/float16": "wrong",
    "cpu/bfloat16": "wrong",
    "cuda/float16": "wrong",
    "cuda/bfloat16": "wrong",
}


def gather(head: torch.nn.Linear, coords: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    rows_cols = head(coords)
    flat = (rows_cols.to(torch.promote_types(rows_cols.dtype, torch.float32))[:, 0] * 1000 + rows_cols.to(torch.promote_types(rows_cols.dtype, torch.float32))[:, 1]).long()
    return table[flat]


def run(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    head = torch.nn.Linear(2, 2).to(device)
    with torch.no_grad():  # an identity head: its outputs are exact small integers
        head.weight.copy_(torch.eye(2))
        head.bias.zero_()
    rows = torch.randint(0, 64, (256,), device=device)
    cols = torch.randint(0, 256, (256,), device=device)
    coords = torch.stack([rows, cols], dim=1).float()
    table = torch.randn(64 * 1000, device=device)
    with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
        picked = gather(head, coords, table)
    return {"picked": picked}
