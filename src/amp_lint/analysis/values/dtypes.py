"""The dtype lattice amp-lint reasons with, and PyTorch's type promotion over it.

Honest by construction: anything not known is UNKNOWN, and UNKNOWN poisons promotion, so
rules never claim a value is half unless every step that produced it says so. Between known
and unknown sits *assumed*: a half dtype that rests on an assumption the analysis states
(what an opaque model returns under autocast). It flows through promotion like a known
dtype and stays marked, so each rule can decide whether an assumption is evidence enough
and say so when it reports.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace


class DTypeKind(enum.Enum):
    HALF = "half"  # float16 or bfloat16, see DType.precision
    FLOAT32 = "float32"
    FLOAT64 = "float64"
    # complex64/complex128: autocast never casts them, and they win promotion with half.
    COMPLEX = "complex"
    INTEGER = "integer"
    BOOL = "bool"
    SCALAR = "scalar"  # a Python number or size: never promotes a tensor
    OTHER = "other"  # not a tensor and not a number (dtype objects, devices, strings)
    NONE = "none"  # None: an optional tensor that is absent on this path
    UNKNOWN = "unknown"


FLOAT16 = "float16"
BFLOAT16 = "bfloat16"


@dataclass(frozen=True)
class DType:
    kind: DTypeKind
    # For HALF: FLOAT16, BFLOAT16, or None when the autocast dtype is not known (maybe float16).
    precision: str | None = None
    # The assumption a half dtype rests on, as a phrase for messages ("`model(x)` returns
    # float16 ..."); None when PyTorch's own rules decide it. Only whether there is one takes
    # part in equality, so memoisation does not multiply with the wording.
    assumption: str | None = field(default=None, compare=False)
    assumed: bool = False
    # Set when the op that made this dtype changed autocast policy between torch releases: a
    # phrase naming the releases, said in messages so a finding shows the release it holds on.
    release_note: str | None = field(default=None, compare=False)
    # For HALF: made by autocast from a tensor of unknown dtype, which is half only if that
    # tensor was not float64 (autocast leaves float64 alone). A fix then upcasts with
    # `promote_types`, not `.float()`, which would cast float64 down.
    unless_float64: bool = field(default=False, compare=False)
    # For UNKNOWN: a dtype test ruled half out on this path (`if x.dtype == torch.float16:
    # return ...` above), so it is float32, float64 or another dtype, but not half.
    not_half: bool = False

    def assuming(self, why: str) -> DType:
        """This dtype, resting on `why` (only half dtypes carry assumptions)."""
        if self.kind is not DTypeKind.HALF:
            return self
        return replace(self, assumption=why, assumed=True)

    def known(self) -> DType:
        """The dtype as far as it is known without assumptions."""
        return UNKNOWN if self.assumed else self

    @property
    def is_half(self) -> bool:
        return self.kind is DTypeKind.HALF

    @property
    def may_be_float16(self) -> bool:
        return self.kind is DTypeKind.HALF and self.precision != BFLOAT16

    @property
    def is_float16(self) -> bool:
        return self.kind is DTypeKind.HALF and self.precision == FLOAT16

    @property
    def is_known_tensor(self) -> bool:
        return self.kind in _TENSOR_KINDS

    @property
    def is_floating_tensor(self) -> bool:
        return self.kind in (DTypeKind.HALF, DTypeKind.FLOAT32, DTypeKind.FLOAT64)

    def describe(self) -> str:
        if self.kind is DTypeKind.HALF:
            return self.precision or "float16 or bfloat16"
        return str(self.kind.value)

    def torch_name(self) -> str:
        """The spelling PyTorch uses in error messages ("Half", "Float", ...)."""
        if self.kind is DTypeKind.HALF:
            return {FLOAT16: "Half", BFLOAT16: "BFloat16"}.get(self.precision or "", "Half")
        names: dict[DTypeKind, str] = {
            DTypeKind.FLOAT32: "Float",
            DTypeKind.FLOAT64: "Double",
            DTypeKind.COMPLEX: "ComplexFloat",
            DTypeKind.INTEGER: "Long",
            DTypeKind.BOOL: "Bool",
        }
        return names.get(self.kind, str(self.kind.value))


_TENSOR_KINDS = (
    DTypeKind.HALF,
    DTypeKind.FLOAT32,
    DTypeKind.FLOAT64,
    DTypeKind.COMPLEX,
    DTypeKind.INTEGER,
    DTypeKind.BOOL,
)

UNKNOWN = DType(DTypeKind.UNKNOWN)
NOT_HALF = DType(DTypeKind.UNKNOWN, not_half=True)
FLOAT32 = DType(DTypeKind.FLOAT32)
FLOAT64 = DType(DTypeKind.FLOAT64)
COMPLEX = DType(DTypeKind.COMPLEX)
INTEGER = DType(DTypeKind.INTEGER)
BOOL = DType(DTypeKind.BOOL)
SCALAR = DType(DTypeKind.SCALAR)
OTHER = DType(DTypeKind.OTHER)
NONE = DType(DTypeKind.NONE)
# Kinds that take no part in type promotion: numbers are weak, the rest are not tensors.
NON_TENSOR_KINDS = (DTypeKind.SCALAR, DTypeKind.OTHER, DTypeKind.NONE)


def half(precision: str | None) -> DType:
    """The autocast lower-precision dtype; "float32" (autocast asked for fp32) is not half."""
    if precision not in (FLOAT16, BFLOAT16, None):
        return FLOAT32
    return DType(DTypeKind.HALF, precision)


def dtype_from_torch_name(qualified: str | None) -> DType | None:
    """`torch.float16` -> HALF(float16); None for names that are not torch dtypes."""
    return _TORCH_DTYPES.get(qualified or "")


_TORCH_DTYPES: dict[str, DType] = {
    "torch.float16": half(FLOAT16),
    "torch.half": half(FLOAT16),
    "torch.bfloat16": half(BFLOAT16),
    "torch.float32": FLOAT32,
    "torch.float": FLOAT32,
    "torch.float64": FLOAT64,
    "torch.double": FLOAT64,
    "torch.complex64": COMPLEX,
    "torch.cfloat": COMPLEX,
    "torch.complex128": COMPLEX,
    "torch.cdouble": COMPLEX,
    "torch.int64": INTEGER,
    "torch.long": INTEGER,
    "torch.int32": INTEGER,
    "torch.int": INTEGER,
    "torch.int16": INTEGER,
    "torch.int8": INTEGER,
    "torch.uint8": INTEGER,
    "torch.bool": BOOL,
}

_FLOAT_RANK = {DTypeKind.HALF: 1, DTypeKind.FLOAT32: 2, DTypeKind.FLOAT64: 3}


def promote(dtypes: list[DType]) -> DType:
    """Result dtype of an elementwise op over these operands (torch.result_type rules).

    Python scalars and non-tensors do not take part, as in PyTorch ("weak" scalars). A half
    result rests on the assumptions of its operands.
    """
    return carry_assumption(_promote(dtypes), dtypes)


def carry_assumption(result: DType, inputs: list[DType]) -> DType:
    """`result`, marked with the first assumption among `inputs` when it is half: a result
    computed from an assumed operand is only as certain as that operand. So is one computed
    from an operand that is half only unless it was float64."""
    if not result.is_half:
        return result
    if not result.unless_float64 and any(d.is_half and d.unless_float64 for d in inputs):
        result = replace(result, unless_float64=True)
    if result.assumed:
        return result
    for dtype in inputs:
        if dtype.assumed:
            return result.assuming(dtype.assumption or "")
    return result


def _promote(dtypes: list[DType]) -> DType:
    tensors = [d for d in dtypes if d.kind not in NON_TENSOR_KINDS]
    if not tensors:
        return SCALAR if dtypes else UNKNOWN
    if any(d.kind is DTypeKind.UNKNOWN for d in tensors):
        return UNKNOWN
    if any(d.kind is DTypeKind.COMPLEX for d in tensors):
        return COMPLEX
    floats = [d for d in tensors if d.kind in _FLOAT_RANK]
    if floats:
        return _widest_float(floats)
    if any(d.kind is DTypeKind.INTEGER for d in tensors):
        return INTEGER
    return BOOL


def _widest_float(floats: list[DType]) -> DType:
    top = max(_FLOAT_RANK[d.kind] for d in floats)
    if top > _FLOAT_RANK[DTypeKind.HALF]:
        return FLOAT64 if top == _FLOAT_RANK[DTypeKind.FLOAT64] else FLOAT32
    precisions = {d.precision for d in floats}
    if precisions == {FLOAT16, BFLOAT16}:
        return FLOAT32  # float16 op bfloat16 promotes to float32
    if len(precisions) == 1:
        return floats[0]
    return half(None)


def join(a: DType, b: DType) -> DType:
    """The dtype a variable has after two control-flow paths meet. None on one path (an
    optional tensor) leaves the other path's dtype: where it is used as a tensor, it is
    that one."""
    if a == b:
        return carry_assumption(a, [b])
    if a.kind is DTypeKind.NONE:
        return b
    if b.kind is DTypeKind.NONE:
        return a
    if a.is_half and b.is_half:
        precision = a.precision if a.precision == b.precision else None
        return carry_assumption(half(precision), [a, b])
    if _excludes_half(a) and _excludes_half(b):
        return NOT_HALF
    return UNKNOWN


def _excludes_half(dtype: DType) -> bool:
    return dtype.not_half or dtype.kind in (DTypeKind.FLOAT32, DTypeKind.FLOAT64)
