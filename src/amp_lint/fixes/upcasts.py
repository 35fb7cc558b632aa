"""Upcasts that keep float64: the fix shape of rules that compute a half value in float32.

Library code may receive float64, which autocast leaves alone, and `.float()` casts it down (a
colour conversion then fails gradcheck; a solver raises on float64 points). So `.float()` is
written only on a value known to be half or float32. A value autocast made half from an input
of unknown dtype is half only unless that input was float64: it gets
`x.to(torch.promote_types(x.dtype, torch.float32))`, float32 for half and float64 kept. That
form repeats `x`, so a compound expression (`(1 - p)`, `h.abs().amax(-1)`) gets it on each of
its half leaves instead, which computes the whole expression in float32; that is the same
thing only for elementwise ops and reductions, so an expression holding a matmul (which
autocast would cast back to half) gets no upcast at all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import libcst as cst

from amp_lint.analysis.syntax.names import ModuleNames, dotted_name
from amp_lint.analysis.values.dtypes import DType, DTypeKind
from amp_lint.findings import Edit, Fix, FixSafety
from amp_lint.fixes.amp_api import torch_spelling

DTypeOf = Callable[[cst.BaseExpression], DType]

# Expressions that can take a method call without parentheses around them.
_ATOMIC = (cst.Name, cst.Attribute, cst.Call, cst.Subscript)
# Methods autocast runs in half whatever their inputs: an upcast below them is undone.
_LOWER_PRECISION_METHODS = frozenset(
    {
        "matmul", "mm", "bmm", "mv", "dot", "addmm", "addbmm", "baddbmm", "addmv", "addr",
        "outer", "ger", "inner", "tensordot", "einsum", "linear", "prelu", "chain_matmul",
    }
)  # fmt: skip


def method_call(expr: cst.BaseExpression, method: str, args: str = "") -> cst.BaseExpression:
    """`expr.method(args)`, parenthesising `expr` when needed, keeping its own parentheses."""
    receiver = expr
    if not isinstance(expr, _ATOMIC) and not getattr(expr, "lpar", ()):
        receiver = expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    if not args:
        # Built, not parsed: a parse costs a millisecond, and large files have thousands.
        return cst.Call(func=cst.Attribute(value=receiver, attr=cst.Name(method)))
    call = cst.parse_expression(f"_.{method}({args})")
    assert isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
    return call.with_changes(func=call.func.with_changes(value=receiver))


def is_certain(dtype: DType) -> bool:
    """Half for certain, or float32: `.float()` is right. Not a half that holds only unless an
    input was float64, nor one resting on an assumption (library mode's "this runs under
    autocast": kornia's `else` branch of `x.dtype in (float16, bfloat16)` sees float64)."""
    if dtype.kind is DTypeKind.FLOAT32:
        return True
    return dtype.is_half and not dtype.unless_float64 and not dtype.assumed


def upcast(
    expr: cst.BaseExpression,
    dtype: DType,
    names: ModuleNames,
    dtype_of: DTypeOf,
    *,
    tensor: bool = False,
    shared: bool = False,
) -> cst.BaseExpression | None:
    """`expr` computed in float32 at least, float64 kept (the module's docstring); `expr`
    itself when it is float64 already; None when no upcast is right for every dtype it may
    have. `tensor`: `expr` is a tensor whatever its dtype (the op it goes to takes nothing
    else), so a plain name of unknown dtype gets the promote_types form too. `shared`: the
    dtypes are one caller's (the analysis reached this code through a call), and the fixed
    code serves every caller: no half or float32 is certain, another caller may pass float64
    (kornia's `_rgb_to_luv`, called with `image.float()` and with `image`)."""
    if dtype.kind is DTypeKind.FLOAT64:
        return expr
    if is_certain(dtype) and not shared:
        return method_call(expr, "float")
    torch = torch_spelling(names)
    if torch is None:
        return None
    name = dotted_name(expr)
    known_float = dtype.is_half or dtype.kind is DTypeKind.FLOAT32
    if name is not None and (known_float or (tensor and dtype.kind is DTypeKind.UNKNOWN)):
        return _promoted(expr, name, torch)
    return _LeafUpcast(torch, dtype_of, shared).rewrite(expr)


def _promoted(expr: cst.BaseExpression, name: str, torch: str) -> cst.BaseExpression:
    promoted = f"{name}.to({torch}.promote_types({name}.dtype, {torch}.float32))"
    return cst.parse_expression(promoted).with_changes(
        lpar=getattr(expr, "lpar", ()), rpar=getattr(expr, "rpar", ())
    )


class _LeafUpcast:
    def __init__(self, torch: str, dtype_of: DTypeOf, shared: bool) -> None:
        self.torch = torch
        self.dtype_of = dtype_of
        self.shared = shared
        self.changed = False
        self.refused = False

    def rewrite(self, expr: cst.BaseExpression) -> cst.BaseExpression | None:
        result = self._leaves(expr)
        return result if self.changed and not self.refused else None

    def _leaves(self, expr: cst.BaseExpression) -> cst.BaseExpression:
        name = dotted_name(expr)
        if name is not None:
            return self._leaf(expr, name)
        if isinstance(expr, cst.BinaryOperation):
            if isinstance(expr.operator, cst.MatrixMultiply):
                self.refused = True
                return expr
            return expr.with_changes(left=self._leaves(expr.left), right=self._leaves(expr.right))
        if isinstance(expr, cst.UnaryOperation):
            return expr.with_changes(expression=self._leaves(expr.expression))
        if isinstance(expr, cst.Subscript):
            return expr.with_changes(value=self._leaves(expr.value))
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            if expr.func.attr.value in _LOWER_PRECISION_METHODS:
                self.refused = True
                return expr
            receiver = self._leaves(expr.func.value)
            return expr.with_changes(func=expr.func.with_changes(value=receiver))
        return expr  # a literal, a function call: left as it is

    def _leaf(self, expr: cst.BaseExpression, name: str) -> cst.BaseExpression:
        dtype = self.dtype_of(expr)
        if not dtype.is_half:
            return expr  # float32, float64, not a tensor, or unknown (maybe a Python number)
        self.changed = True
        if is_certain(dtype) and not self.shared:
            return method_call(expr, "float")
        return _promoted(expr, name, self.torch)


def upcast_fix(
    title: str,
    operands: Iterable[tuple[cst.BaseExpression, DType]],
    names: ModuleNames,
    dtype_of: DTypeOf,
    safety: FixSafety = FixSafety.UNSAFE,
    *,
    shared: bool = False,
) -> Fix | None:
    """A fix upcasting each operand (`upcast`); None when one has no right upcast (a fix that
    upcasts only some would be another bug) or none needs one."""
    edits = []
    for expr, dtype in operands:
        upcasted = upcast(expr, dtype, names, dtype_of, shared=shared)
        if upcasted is None:
            return None
        if upcasted is not expr:
            edits.append(Edit(expr, upcasted))
    if not edits:
        return None
    # `torch.promote_types` in a module that has not imported torch.
    imports = ("torch",) if not names.local_names_for("torch") and _promotes(edits) else ()
    return Fix(safety, title, edits=tuple(edits), imports=imports)


def _promotes(edits: list[Edit]) -> bool:
    module = cst.Module([])
    return any(
        isinstance(edit.replacement, cst.CSTNode)
        and ".promote_types(" in module.code_for_node(edit.replacement)
        for edit in edits
    )
