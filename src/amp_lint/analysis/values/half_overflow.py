"""Constants outside the range of a half dtype, and the tensor ops that convert such a
constant with an overflow check (AMP101).

float16 holds up to ±65504; bfloat16 has float32's exponent range but tops out just below
float32's largest value, so only `torch.finfo(torch.float32).min`-like constants overflow it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import libcst as cst

from amp_lint.analysis.interpreter.frames import ExecutionContext
from amp_lint.analysis.values.dtypes import DType, dtype_from_torch_name

# The largest finite float16.
FLOAT16_MAX = 65504.0
# The largest finite bfloat16. torch.finfo(torch.float32).max (3.4028e38) is above it.
BFLOAT16_MAX = 3.3895313892515355e38

# Ops whose fill value PyTorch converts with an overflow check, on CPU and CUDA alike:
# op -> (position of the value after the tensor, keyword).
CHECKED_FILLS: dict[str, tuple[int, str]] = {
    "masked_fill": (1, "value"),
    "masked_fill_": (1, "value"),
    "fill_": (0, "value"),
    "index_fill": (2, "value"),
    "index_fill_": (2, "value"),
    "threshold": (1, "value"),
    "threshold_": (1, "value"),
    "full_like": (0, "fill_value"),
    "new_full": (1, "fill_value"),
}
# Clamps: op -> the bounds it takes, (position, keyword) each.
CLAMPS: dict[str, tuple[tuple[int, str], ...]] = {
    "clamp": ((0, "min"), (1, "max")),
    "clamp_": ((0, "min"), (1, "max")),
    "clip": ((0, "min"), (1, "max")),
    "clip_": ((0, "min"), (1, "max")),
    "clamp_min": ((0, "min"),),
    "clamp_min_": ((0, "min"),),
    "clamp_max": ((0, "max"),),
    "clamp_max_": ((0, "max"),),
}

# Words in the name of a helper amp-lint cannot see into that say it fills a tensor with one
# of its arguments (allennlp's `replace_masked_values(x, mask, -1e7)`, `mask_logits`).
FILL_WORDS = frozenset(["mask", "masked", "fill", "replace"])


@dataclass(frozen=True)
class Overflow:
    constant: float
    dtype: DType
    is_float16: bool  # the limit broken is float16's (else bfloat16's)

    @property
    def type_name(self) -> str:
        return "c10::Half" if self.is_float16 else "c10::BFloat16"

    @property
    def range_text(self) -> str:
        if self.is_float16:
            return "outside the float16 range (±65504)"
        return "outside the bfloat16 range (±3.39e38)"

    @property
    def error(self) -> str:
        return f'"value cannot be converted to type {self.type_name} without overflow"'

    @property
    def brief_error(self) -> str:
        """`error` shortened for summaries, keeping the part that names the dtype."""
        return f'"...{self.type_name} without overflow"'

    @property
    def precision(self) -> str:
        return "float16" if self.is_float16 else "bfloat16"

    @property
    def limit(self) -> str:
        return "min" if self.constant < 0 else "max"


def constant_overflow(
    node: cst.BaseExpression | None, dtype: DType, ctx: ExecutionContext
) -> Overflow | None:
    if node is None or not dtype.is_half:
        return None
    constant = ctx.constant(node)
    if constant is None or not math.isfinite(constant):
        return None
    if dtype.may_be_float16 and abs(constant) > FLOAT16_MAX:
        return Overflow(float(constant), dtype, True)
    if abs(constant) > BFLOAT16_MAX:
        return Overflow(float(constant), dtype, False)
    return None


def dtype_argument(node: cst.BaseExpression, ctx: ExecutionContext) -> DType:
    """The dtype a `dtype=` argument names: `torch.float16`, or `x.dtype`."""
    explicit = dtype_from_torch_name(ctx.qualified_name(node))
    if explicit is not None:
        return explicit
    if isinstance(node, cst.Attribute) and node.attr.value == "dtype":
        return ctx.dtype(node.value)
    return ctx.dtype(node)  # unknown
