"""What a branch learns from its test, and which branches end their path.

Library code guards its half-precision path by dtype: `if x.dtype in (torch.float16,
torch.bfloat16): x = x.float()` or `if x.dtype == torch.float16: return f(x.float()).half()`.
On the branch where the test fails, `x` is not half, whatever the analysis took it for (an
assumed half in library mode, a half made by autocast from an input of unknown dtype). Without
this, kornia's descriptors were reported in the `else` branch that sees float32 and float64
only, and callers that cast before `Function.apply` under such a guard were reported as if
half reached the kernel.

A branch whose last statement returns, raises, breaks or continues ends its path: the code
after the `if` sees only the other branch's bindings (`if x.dtype == torch.float16: return
...` leaves `x` not half below it).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

import libcst as cst

from amp_lint.analysis.syntax.names import ModuleNames, dotted_name
from amp_lint.analysis.values.dtypes import (
    BFLOAT16,
    FLOAT16,
    NOT_HALF,
    UNKNOWN,
    DType,
    DTypeKind,
    dtype_from_torch_name,
)
from amp_lint.analysis.values.value import Env, Value


@dataclass(frozen=True)
class DTypeTest:
    """`name.dtype` is one of `dtypes` (`negated`: is none of them)."""

    name: str
    dtypes: tuple[DType, ...]
    negated: bool = False

    def flipped(self) -> DTypeTest:
        return replace(self, negated=not self.negated)


# What narrowing changed: each name, with its value before and on the branch.
Narrowed = dict[str, tuple[Value, Value]]


def narrowed(env: Env, test: cst.BaseExpression, names: ModuleNames, holds: bool) -> Narrowed:
    """Narrow the names `test` inspects, on the branch where `test` is `holds`."""
    changed: Narrowed = {}
    for dtype_test in _tests(test, names, holds):
        value = env.get(dtype_test.name)
        if value is None:
            continue
        dtype = _narrowed_dtype(value.dtype, dtype_test)
        if dtype is not value.dtype:
            changed[dtype_test.name] = (value, replace(value, dtype=dtype))
            env.set(dtype_test.name, changed[dtype_test.name][1])
    return changed


def widened(env: Env, changed: Narrowed) -> None:
    """Where the branches meet again, what a test taught holds no more: a name the branch
    did not rebind gets its value from before the test back (`if x.dtype == torch.float16:
    print(...)` leaves `x` as it was, half included)."""
    for name, (before, on_branch) in changed.items():
        if env.get(name) == on_branch:
            env.set(name, before)


def ends_path(suite: cst.BaseSuite | None) -> bool:
    """The block's last statement leaves it for good: return, raise, break, continue, or an
    `if` whose every branch does."""
    if suite is None:
        return False
    body = suite.body
    if not body:
        return False
    last = body[-1]
    if isinstance(last, cst.SimpleStatementLine) or isinstance(suite, cst.SimpleStatementSuite):
        smalls = last.body if isinstance(last, cst.SimpleStatementLine) else body
        return bool(smalls) and isinstance(
            smalls[-1], (cst.Return, cst.Raise, cst.Break, cst.Continue)
        )
    if isinstance(last, cst.If):
        orelse = last.orelse
        if orelse is None:
            return False
        rest = orelse.body if isinstance(orelse, cst.Else) else cst.IndentedBlock([orelse])
        return ends_path(last.body) and ends_path(rest)
    return False


def _tests(test: cst.BaseExpression, names: ModuleNames, holds: bool) -> Iterator[DTypeTest]:
    """The dtype tests that are known to hold when `test` is `holds`: each operand of an
    `and` that holds, of an `or` that fails; `not` flips."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        yield from _tests(test.expression, names, not holds)
        return
    if isinstance(test, cst.BooleanOperation):
        conjunction = isinstance(test.operator, cst.And)
        if conjunction == holds:  # `a and b` true, or `a or b` false: both sides known
            yield from _tests(test.left, names, holds)
            yield from _tests(test.right, names, holds)
        return
    found = _dtype_test(test, names)
    if found is not None:
        yield found if holds else found.flipped()


def _dtype_test(test: cst.BaseExpression, names: ModuleNames) -> DTypeTest | None:
    """`x.dtype == torch.float16`, `!=`, `is`, `is not`, `in (...)`, `not in [...]`."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    target = test.comparisons[0]
    subject = _dtype_of(test.left)
    if subject is None:
        return None
    operator = target.operator
    if isinstance(operator, (cst.Equal, cst.Is, cst.NotEqual, cst.IsNot)):
        dtype = dtype_from_torch_name(names.qualified_name(target.comparator))
        if dtype is None:
            return None
        return DTypeTest(subject, (dtype,), isinstance(operator, (cst.NotEqual, cst.IsNot)))
    if isinstance(operator, (cst.In, cst.NotIn)):
        container = target.comparator
        if not isinstance(container, (cst.Tuple, cst.List, cst.Set)):
            return None
        dtypes = [dtype_from_torch_name(names.qualified_name(e.value)) for e in container.elements]
        if not dtypes or any(d is None for d in dtypes):
            return None
        return DTypeTest(
            subject, tuple(d for d in dtypes if d is not None), isinstance(operator, cst.NotIn)
        )
    return None


def _dtype_of(node: cst.BaseExpression) -> str | None:
    """`x` of `x.dtype` (or `self.x` of `self.x.dtype`)."""
    if isinstance(node, cst.Attribute) and node.attr.value == "dtype":
        return dotted_name(node.value)
    return None


def _narrowed_dtype(dtype: DType, test: DTypeTest) -> DType:
    """What a value of `dtype` is on a branch where `test` holds. Only what takes a half
    dtype away is learnt: a test never makes a value half that the analysis did not know as
    one (an unknown tensor under `if x.dtype == torch.float16:` stays unknown)."""
    halves = {d.precision for d in test.dtypes if d.kind is DTypeKind.HALF}
    if test.negated:
        if not dtype.is_half:
            return dtype
        if dtype.precision in halves or {FLOAT16, BFLOAT16} <= halves:
            return NOT_HALF  # not this half: float32 or float64, or another dtype
        if dtype.precision is None and halves:  # half of unknown precision, not this one
            (other,) = {FLOAT16, BFLOAT16} - halves
            return replace(dtype, precision=other)
        return dtype
    if dtype.is_half and (
        not halves or (dtype.precision is not None and dtype.precision not in halves)
    ):
        return NOT_HALF if not halves else UNKNOWN  # a non-half dtype tested, or the other half
    if dtype.is_half and dtype.precision is None and len(halves) == 1:
        return replace(dtype, precision=next(iter(halves)))
    return dtype
