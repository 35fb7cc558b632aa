"""Facts shared by the rules about ops that refuse operands of different floating dtypes
(AMP103 in-place writes, AMP104 matmuls outside autocast)."""

from __future__ import annotations

import libcst as cst

from amp_lint.analysis.values.dtypes import DType, DTypeKind


def mismatched(a: DType, b: DType) -> bool:
    """Two known floating dtypes that differ, at least one of them half precision."""
    if not (a.is_floating_tensor and b.is_floating_tensor):
        return False
    if not (a.is_half or b.is_half):
        return False
    if a.is_half and b.is_half:
        return bool(a.precision and b.precision) and a.precision != b.precision
    return a.kind != b.kind


def half_against_float32(a: DType, b: DType) -> bool:
    """One operand half precision, the other float32 (the pair `.float()` reconciles)."""
    return (a.is_half and b.kind is DTypeKind.FLOAT32) or (
        b.is_half and a.kind is DTypeKind.FLOAT32
    )


def c10_name(dtype: DType) -> str:
    """The spelling of a dtype in messages built from `c10::ScalarType` ("c10::Half", "float")."""
    if dtype.kind is DTypeKind.FLOAT32:
        return "float"
    if dtype.kind is DTypeKind.FLOAT64:
        return "double"
    return f"c10::{dtype.torch_name()}"


def argument(call: cst.Call, position: int, keyword: str) -> cst.BaseExpression | None:
    """The argument passed by `keyword`, else the `position`-th plain positional one."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    if any(arg.star for arg in call.args):
        return None
    positional = [arg.value for arg in call.args if arg.keyword is None]
    return positional[position] if position < len(positional) else None
