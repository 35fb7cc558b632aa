"""What the interpreter knows about a value: its dtype and a few facts rules ask about."""

from __future__ import annotations

from dataclasses import dataclass, replace

import libcst as cst

from amp_lint.analysis.dtypes import UNKNOWN, DType, join
from amp_lint.analysis.regions import AutocastRegion


@dataclass(frozen=True)
class Value:
    dtype: DType = UNKNOWN
    # A Python number known statically (literals, `float(2**30)`, `torch.finfo(...).min`).
    constant: float | None = None
    # Qualified class of an object, e.g. "torch.nn.Linear", "lpips.LPIPS", "<module>.Net".
    instance_of: str | None = None
    # A context manager object stored in a variable (`ctx = torch.autocast(...)`).
    region: AutocastRegion | None = None
    # A function defined in the module (`def f` binds f).
    function: cst.FunctionDef | None = None
    # `y = x.float()` / `x.to(...)`: the conversion call. `.float()` returns x itself when x
    # is already float32, so in-place writes into y may write into x.
    conversion: cst.Call | None = None
    # An integer tensor made from a half-precision float (`(coords * w).long()`): the dtype
    # its values were computed in, and the conversion call.
    integer_from: DType | None = None


UNKNOWN_VALUE = Value()


def join_values(a: Value, b: Value) -> Value:
    if a == b:
        return a
    return Value(
        dtype=join(a.dtype, b.dtype),
        constant=a.constant if a.constant == b.constant else None,
        instance_of=a.instance_of if a.instance_of == b.instance_of else None,
        region=_join_regions(a.region, b.region),
        function=a.function if a.function is b.function else None,
        conversion=a.conversion if a.conversion is b.conversion else None,
        integer_from=a.integer_from if a.integer_from == b.integer_from else None,
    )


def _join_regions(a: AutocastRegion | None, b: AutocastRegion | None) -> AutocastRegion | None:
    """`ctx = autocast(...) if amp else nullcontext()`: a region that may or may not be on."""
    if a == b:
        return a
    region = a or b
    if region is None:
        return None
    if a is not None and b is not None and a.key != b.key:
        return replace(region, dtype=None if a.dtype != b.dtype else a.dtype, enabled=None)
    return replace(region, enabled=None if region.enabled is not False else False)


class Env:
    """Variables of one frame, keyed by dotted name ("x", "self.fc")."""

    def __init__(self, values: dict[str, Value] | None = None) -> None:
        self.values: dict[str, Value] = dict(values or {})

    def get(self, name: str) -> Value | None:
        return self.values.get(name)

    def set(self, name: str, value: Value) -> None:
        self.values[name] = value
        # Rebinding `x` invalidates what we knew about `x.attr`.
        prefix = name + "."
        for key in [k for k in self.values if k.startswith(prefix)]:
            del self.values[key]

    def copy(self) -> Env:
        return Env(self.values)

    def merge(self, other: Env) -> Env:
        """Join two control-flow paths: names bound on one path only become unknown-ish."""
        merged = Env()
        for name in self.values.keys() | other.values.keys():
            mine, theirs = self.values.get(name), other.values.get(name)
            if mine is None or theirs is None:
                present = mine or theirs
                assert present is not None
                # Bound on one path only: keep what is not dtype-specific.
                merged.values[name] = join_values(present, UNKNOWN_VALUE)
            else:
                merged.values[name] = join_values(mine, theirs)
        return merged
