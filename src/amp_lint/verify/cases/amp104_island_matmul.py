"""AMP104: a float32 island (``autocast(enabled=False)``) that multiplies an autocast output by
float32 weights without casting it first.

``h`` is made by a matmul under autocast, so it is half precision, and it stays half inside the
nested disabled region, where nothing casts operands any more. ``w`` is float32 (``torch.randn``
without ``dtype=``). ``torch.mm`` refuses operands of different dtypes whatever their values. In
the float32 reference autocast is off, ``h`` is float32 and the product is defined.
"""

from __future__ import annotations

import torch

RULE = "AMP104"
TITLE = "an autocast output multiplied by float32 weights inside an enabled=False island"
EXPECTED = {
    "cpu/float16": "raised: expected m1 and m2 to have the same dtype, but got: c10::Half != float",
    "cpu/bfloat16": (
        "raised: expected m1 and m2 to have the same dtype, but got: c10::BFloat16 != float"
    ),
    "cuda/float16": "raised: expected mat1 and mat2 to have the same dtype",
    "cuda/bfloat16": "raised: expected mat1 and mat2 to have the same dtype",
}


def run(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(4, 16, generator=generator).to(device)
    encoder = torch.randn(16, 16, generator=generator).to(device) / 4
    w = torch.randn(16, 8, generator=generator).to(device) / 4
    with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
        h = x @ encoder
        with torch.autocast(device, enabled=False):
            y = torch.mm(h, w)
    return {"y": y}
