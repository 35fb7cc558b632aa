"""AutocastRegion: where code runs under autocast. Kept apart from regions.py (which finds
regions in syntax) so that the project-level code can carry regions between files and runs
without loading libcst."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from amp_lint.analysis.values.dtypes import FLOAT16, DType, half

if TYPE_CHECKING:
    import libcst as cst


@dataclass(frozen=True)
class AutocastRegion:
    device: str | None  # "cuda", "cpu", ...; None when it comes from a variable
    dtype: str | None  # FLOAT16, BFLOAT16, "float32"; None when not known (maybe float16)
    enabled: bool | None  # None when decided at run time
    spelling: str  # how the code entered it, for messages
    node: cst.CSTNode | None = None
    # The device argument as written, reused by fixes that open an fp32 island.
    device_expr: cst.BaseExpression | None = None
    # Made by `@custom_fwd(cast_inputs=...)`: the function's floating inputs arrive cast.
    casts_inputs: bool = False

    @property
    def is_active(self) -> bool:
        return self.enabled is not False

    @property
    def may_be_float16(self) -> bool:
        return self.is_active and self.dtype in (FLOAT16, None)

    @property
    def lower_precision(self) -> DType:
        return half(self.dtype)

    @property
    def key(self) -> tuple[str | None, str | None, bool | None]:
        return (self.device, self.dtype, self.enabled)

    def portable(self) -> AutocastRegion:
        """The region without syntax nodes, to travel to another file's analysis."""
        if self.node is None and self.device_expr is None:
            return self
        return replace(self, node=None, device_expr=None)

    def describe(self) -> str:
        device = self.device or "unknown-device"
        dtype = self.dtype or "float16/bfloat16"
        return f"{device} {dtype} autocast"
