"""AMP104 dtype-leak-across-region: half tensors made under autocast meeting float32 weights
in a matmul, linear or conv where autocast no longer casts (an `enabled=False` island, or
after the region ended)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from amp_lint.analysis.interpreter.frames import ExecutionContext
from amp_lint.analysis.syntax.names import dotted_name
from amp_lint.analysis.syntax.outline import calls_in, positional_arguments, small_statements
from amp_lint.analysis.values.dtype_mismatch import c10_name, half_against_float32
from amp_lint.analysis.values.dtypes import DType, DTypeKind, dtype_from_torch_name
from amp_lint.analysis.values.literals import string_literal
from amp_lint.findings import Edit, Fix, FixSafety
from amp_lint.fixes.builders import method_call
from amp_lint.rules.base import Report, Rule
from amp_lint.rules.common import brief, code, quoted_error

# The RuntimeError each op raises on CPU (torch 2.13) for a half input and float32 weights;
# {h}/{f} are the c10 names of the first two mismatched operands in argument order,
# {H} the torch name of the half one ("Half", "BFloat16").
_MM = "expected m1 and m2 to have the same dtype, but got: {a} != {b}"
_SCALAR = "expected scalar type {H} but found Float"
_ERRORS: dict[str, str] = {
    "mm": _MM,
    "matmul": _MM,
    "linear": _MM,
    "addmm": "mat1 and mat2 must have the same dtype, but got {A} and {B}",
    "bmm": _SCALAR,
    "einsum": _SCALAR,
    "conv1d": _SCALAR,
    "conv2d": _SCALAR,
    "conv3d": _SCALAR,
    "conv_transpose1d": _SCALAR,
    "conv_transpose2d": _SCALAR,
    "conv_transpose3d": _SCALAR,
    "baddbmm": "Input dtypes must be the same",
    "dot": "dot : expected both vectors to have same dtype, but found {A} and {B}",
    "mv": "addmv input tensors must have the same dtype",
    "addmv": "addmv input tensors must have the same dtype",
    "bilinear": "All tensors must have the same dtype",
    "tensordot": "both inputs should have same dtype",
    "inner": "both inputs should have same dtype",
    "scaled_dot_product_attention": "Expected query, key, and value to have the same dtype",
}
# The data operands of each op, by position (einsum: the operands after the equation).
_OPERANDS: dict[str, tuple[int, ...]] = {
    "mm": (0, 1),
    "matmul": (0, 1),
    "bmm": (0, 1),
    "dot": (0, 1),
    "mv": (0, 1),
    "inner": (0, 1),
    "tensordot": (0, 1),
    "linear": (0, 1, 2),
    "addmm": (1, 2, 0),
    "addmv": (1, 2, 0),
    "baddbmm": (1, 2, 0),
    "conv1d": (0, 1, 2),
    "conv2d": (0, 1, 2),
    "conv3d": (0, 1, 2),
    "conv_transpose1d": (0, 1, 2),
    "conv_transpose2d": (0, 1, 2),
    "conv_transpose3d": (0, 1, 2),
    "bilinear": (0, 1, 2, 3),
    "scaled_dot_product_attention": (0, 1, 2),
}
_NAMESPACES = ("torch.nn.functional.", "torch.")
# nn modules with float32 parameters by default, and the error their call raises.
_MODULES: dict[str, str] = {
    "Linear": "mat1 and mat2 must have the same dtype, but got {H} and Float",
    "Bilinear": "All tensors must have the same dtype",
    "Conv1d": "Input type ({h}) and bias type (float) should be the same",
    "Conv2d": "Input type ({h}) and bias type (float) should be the same",
    "Conv3d": "Input type ({h}) and bias type (float) should be the same",
    "ConvTranspose1d": _SCALAR,
    "ConvTranspose2d": _SCALAR,
    "ConvTranspose3d": _SCALAR,
}
# Methods that convert a module's parameters; a file calling one may have half weights.
_MODULE_CONVERSIONS = frozenset(["half", "bfloat16", "to", "type"])


@dataclass(frozen=True, eq=False)
class _Operand:
    node: cst.BaseExpression
    dtype: DType


class DtypeLeakAcrossRegion(Rule):
    code = "AMP104"
    name = "dtype-leak-across-region"
    summary = (
        "Checks for half-precision tensors made under autocast that reach a matmul, linear, "
        "conv or einsum with float32 operands where autocast no longer casts: inside a "
        "nested `enabled=False` region or after the region has ended."
    )
    why = """\
Autocast casts the inputs of a matmul to one dtype only while it is active. Its outputs keep
their half dtype when they leave it, so:

* inside a nested `with torch.autocast(..., enabled=False):` island, `torch.mm(h, w)` with
  `h` float16 from the outer region and `w` float32 raises `RuntimeError: expected m1 and m2
  to have the same dtype, but got: c10::Half != float` (on CUDA: "expected mat1 and mat2 to
  have the same dtype");
* after the region ends, `h @ w`, `F.linear(h, w)` and `torch.matmul` raise the same error;
  an `nn.Linear` with float32 parameters raises `mat1 and mat2 must have the same dtype, but
  got Half and Float`; `bmm`, `einsum` and `F.conv2d` raise `expected scalar type Half but
  found Float`; an `nn.Conv2d` raises `Input type (c10::Half) and bias type (float) should be
  the same`.

bfloat16 fails the same way (measured on torch 2.13 CPU for both dtypes). The PyTorch docs
say of disabled regions that "inputs from the surrounding region should be cast to float32"
before use. Elementwise ops (`h * w`, `h + w`) promote and are not flagged, nor are norms
(`layer_norm`, `group_norm`), which accept half inputs with float32 weights."""
    example = """\
import torch

w = torch.randn(64, 64)
with torch.autocast("cuda"):
    h = x @ w  # float16
    with torch.autocast("cuda", enabled=False):
        y = torch.mm(h, w)  # float32 island
logits = h @ w
"""
    fixed_example = """\
import torch

w = torch.randn(64, 64)
with torch.autocast("cuda"):
    h = x @ w  # float16
    with torch.autocast("cuda", enabled=False):
        y = torch.mm(h.float(), w)  # float32 island
logits = h.float() @ w
"""
    fix_safety = """\
The fix casts the half operand with `.float()` at the boundary.

* It is **safe** when the float32 operand is a tensor made in this file (a factory without
  `dtype=`, a `.float()`): the original raises whenever the half operand really is half, and
  `.float()` changes nothing when it is not (autocast disabled at run time). Where the op
  would have promoted instead of raising (an elementwise `einsum`), it computes in float32
  from the same exactly-upcast values, so the result is identical.
* It is **unsafe** when the float32 side is an `nn.Module` or an attribute such as
  `self.weight`: `model.half()` elsewhere may have made those parameters half, in which case
  the original worked in half precision and `.float()` would make it raise. It is also
  unsafe when the finding was reached by following a call (`via ...`): the edit lands in a
  function that other callers, with other dtypes, share."""
    known_limitations = """\
Both dtypes must be known: a tensor passed in as a parameter, or a weight read as
`self.fc.weight`, is not followed. A local name bound to a module parameter (`w =
self.proj`) is taken as a float32 tensor of this file. nn.Module calls are not flagged in a
file that calls `.half()`, `.bfloat16()`, `.to(...)` with a dtype or `.type(...)` anywhere,
since its modules' parameters may be half. `torch.set_default_dtype` is not followed. The
rule fires for any half tensor outside autocast, including ones made with `.half()`, which
raise the same way."""
    node_types = (cst.Call, cst.BinaryOperation)

    def __init__(self) -> None:
        self._converting_modules: dict[int, bool] = {}

    def check_node(self, node: cst.CSTNode, ctx: ExecutionContext) -> Iterator[Report]:
        if ctx.active_region is not None:
            return
        found = self._operation(node, ctx)
        if found is None:
            return
        op_text, error, operands, module_call = found
        pair = [o for o in operands if o.dtype.is_half or o.dtype.kind is DTypeKind.FLOAT32]
        half = next((o for o in pair if o.dtype.is_half), None)
        full = next((o for o in pair if o.dtype.kind is DTypeKind.FLOAT32), None)
        if half is None or full is None or not half_against_float32(half.dtype, full.dtype):
            return
        first, second = (half, full) if pair.index(half) < pair.index(full) else (full, half)
        text = error.format(
            a=c10_name(first.dtype),
            b=c10_name(second.dtype),
            A=first.dtype.torch_name(),
            B=second.dtype.torch_name(),
            h=c10_name(half.dtype),
            H=half.dtype.torch_name(),
        )
        region = ctx.region
        if region is not None:
            where = "inside an `enabled=False` autocast region, where nothing is cast"
        else:
            where = "where no autocast is active to cast it"
        message = (
            f'`{code(node)}` raises "{text}": `{code(half.node)}` is '
            f"{half.dtype.describe()} and {op_text} float32, {where}; "
            f"cast it with `{code(half.node)}.float()`"
        )
        halves = [o for o in operands if o.dtype.is_half]
        # Reached through a call: the edit lands in a function that other callers share.
        unsafe = (
            module_call
            or bool(ctx.frame.chain)
            or any(
                _read_from_object(o.node, ctx)
                for o in operands
                if o.dtype.kind is DTypeKind.FLOAT32
            )
        )
        # `.float()` whatever the half operand's dtype may be: it meets a float32 one, so
        # float32 is the dtype they must share (a float64 operand would fail the same way).
        fix = Fix(
            FixSafety.UNSAFE if unsafe else FixSafety.SAFE,
            "Cast the half operand to float32",
            edits=tuple(Edit(o.node, method_call(o.node, "float")) for o in halves),
        )
        summary = (
            f"`{brief(node, 16)}` raises {quoted_error(text, 44)}; use "
            f"`{brief(half.node, 15)}.float()`"
        )
        yield Report(node, message, fix, summary=summary)

    # --- which operation, which operands ---------------------------------------------------

    def _operation(
        self, node: cst.CSTNode, ctx: ExecutionContext
    ) -> tuple[str, str, list[_Operand], bool] | None:
        """(how to name the float32 side, error template, operands, is a module call)."""
        if isinstance(node, cst.BinaryOperation):
            if not isinstance(node.operator, cst.MatrixMultiply):
                return None
            operands = [_operand(node.left, ctx), _operand(node.right, ctx)]
            return "the other operand is", _MM, operands, False
        if not isinstance(node, cst.Call):
            return None
        qualified = ctx.qualified_name(node.func)
        if qualified is not None:
            return _function_call(node, qualified, ctx)
        if isinstance(node.func, cst.Attribute):
            method = node.func.attr.value
            callee = ctx.value(node.func)
            if callee.instance_of is not None:
                return self._module_call(node, callee.instance_of, ctx)
            if method in ("mm", "matmul", "bmm", "dot", "mv") and len(node.args) == 1:
                receiver = node.func.value
                operands = [_operand(receiver, ctx), _operand(node.args[0].value, ctx)]
                return "the other operand is", _ERRORS[method], operands, False
            return None
        if isinstance(node.func, cst.Name):
            callee = ctx.value(node.func)
            if callee.instance_of is not None:
                return self._module_call(node, callee.instance_of, ctx)
        return None

    def _module_call(
        self, node: cst.Call, instance: str, ctx: ExecutionContext
    ) -> tuple[str, str, list[_Operand], bool] | None:
        module_class = instance.rsplit(".", 1)[-1]
        if not instance.startswith("torch.nn.") or module_class not in _MODULES:
            return None
        if self._converts_modules(ctx) or not node.args or node.args[0].keyword is not None:
            return None
        operands = [_operand(node.args[0].value, ctx)]
        # The module stands for its float32 parameters.
        weights = _Operand(node.func, DType(DTypeKind.FLOAT32))
        error = _MODULES[module_class]
        return f"the parameters of `{code(node.func)}` are", error, [*operands, weights], True

    def _converts_modules(self, ctx: ExecutionContext) -> bool:
        key = id(ctx.facts.module)
        if key not in self._converting_modules:
            self._converting_modules[key] = any(
                _converts(call, ctx)
                for small in small_statements(ctx.facts.module)
                for call in calls_in(small)
            )
        return self._converting_modules[key]


def _function_call(
    node: cst.Call, qualified: str, ctx: ExecutionContext
) -> tuple[str, str, list[_Operand], bool] | None:
    op = next(
        (qualified[len(p) :] for p in _NAMESPACES if qualified.startswith(p)),
        None,
    )
    if op is None or "." in op:
        if qualified == "torch.linalg.multi_dot":
            return _multi_dot(node, ctx)
        return None
    positional = positional_arguments(node)
    if len(positional) != sum(1 for a in node.args if a.keyword is None):
        return None  # *args
    if op == "einsum":
        if not positional or not _contracts(positional[0]):
            return None
        expressions = positional[1:]
    elif op in _OPERANDS:
        expressions = [positional[i] for i in _OPERANDS[op] if i < len(positional)]
        expressions += [
            a.value
            for a in node.args
            if a.keyword is not None and a.keyword.value in ("weight", "bias")
        ]
    else:
        return None
    operands = [_operand(e, ctx) for e in expressions]
    return "another operand is", _ERRORS[op], operands, False


def _multi_dot(
    node: cst.Call, ctx: ExecutionContext
) -> tuple[str, str, list[_Operand], bool] | None:
    if not node.args or not isinstance(node.args[0].value, (cst.List, cst.Tuple)):
        return None
    elements = node.args[0].value.elements
    operands = [_operand(e.value, ctx) for e in elements if isinstance(e, cst.Element)]
    error = "multi_dot(): all tensors must have be the same dtype"
    return "another operand is", error, operands, False


def _operand(node: cst.BaseExpression, ctx: ExecutionContext) -> _Operand:
    return _Operand(node, ctx.dtype(node))


def _contracts(equation: cst.BaseExpression) -> bool:
    """An einsum equation with a summed index (runs bmm, which refuses mixed dtypes); purely
    elementwise equations such as "ij,ij->ij" run mul, which promotes."""
    text = string_literal(equation)
    if text is None or "->" not in text or "." in text:
        return False
    inputs, output = text.replace(" ", "").split("->", 1)
    return bool(set(inputs.replace(",", "")) - set(output))


def _read_from_object(node: cst.BaseExpression, ctx: ExecutionContext) -> bool:
    """`self.weight`, `model.proj.t()`: a tensor read off an object (likely a parameter, whose
    dtype `model.half()` elsewhere may have changed), not one built in this file."""
    while True:
        if isinstance(node, cst.Attribute):
            if not ctx.dtype(node.value).is_known_tensor:
                return True
            node = node.value
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            if ctx.qualified_name(node.func) is not None:
                return False  # torch.randn(...): a fresh tensor
            node = node.func.value
        elif isinstance(node, cst.Subscript):
            node = node.value
        else:
            return False


def _converts(call: cst.Call, ctx: ExecutionContext) -> bool:
    """`model.half()`, `model.to(torch.bfloat16)`, `model.type(...)`: may make parameters half."""
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value not in _MODULE_CONVERSIONS:
        return False
    if func.attr.value in ("half", "bfloat16", "type"):
        return True
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "dtype":
            return True
        dtype = dtype_from_torch_name(ctx.qualified_name(arg.value))
        if dtype is not None and dtype.is_half:
            return True
        if dotted_name(arg.value) is not None and (dotted_name(arg.value) or "").endswith("dtype"):
            return True
    return False
