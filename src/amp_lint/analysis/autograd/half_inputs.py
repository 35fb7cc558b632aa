"""Whether an autograd Function's forward deals with half inputs itself: it upcasts them
(`x.float()`, `x.to(torch.float32)`), or hands them to a Triton kernel or a registered custom
op, which load each input in its own dtype. AMP203 leaves such Functions alone:
`custom_fwd(cast_inputs=torch.float32)` would materialise the float32 copies the kernel is
written to avoid."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from amp_lint.analysis.autograd.functions import parameters_after_ctx, statements
from amp_lint.analysis.syntax.calls import ModuleIndex
from amp_lint.analysis.syntax.names import ModuleNames, dotted_name
from amp_lint.analysis.syntax.outline import calls_in, statement_expressions
from amp_lint.analysis.values.dtypes import FLOAT32, FLOAT64, dtype_from_torch_name

# `x.float()`, `x.double()`; `x.to(torch.float32)`, `x.type(torch.float32)` (or dtype=).
_UPCAST_METHODS = frozenset(["float", "double"])
_CAST_METHODS = frozenset(["to", "type"])
_FLOAT_TENSOR_TYPES = frozenset(
    ["torch.FloatTensor", "torch.DoubleTensor", "torch.cuda.FloatTensor", "torch.cuda.DoubleTensor"]
)


def upcasts_inputs(forward: cst.FunctionDef, names: ModuleNames) -> bool:
    """Forward converts one of its inputs to float32 (or float64) itself, anywhere in its body:
    `kernel(x.float(), ...)`, `x_fp32 = x.contiguous().to(torch.float32)`."""
    params = frozenset(p.name.value for p in parameters_after_ctx(forward))
    for statement in statements(forward):
        for node in statement_expressions(statement):
            for call in calls_in(node):
                func = call.func
                if (
                    isinstance(func, cst.Attribute)
                    and _receiver_root(func.value) in params
                    and _is_upcast(call, func.attr.value, names)
                ):
                    return True
    return False


def _receiver_root(node: cst.BaseExpression) -> str | None:
    """`x` in `x`, `x.contiguous()`, `x[:, 0]`, `x.view(-1).contiguous()`."""
    while True:
        if isinstance(node, cst.Name):
            return node.value
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            node = node.func.value
        elif isinstance(node, (cst.Attribute, cst.Subscript)):
            node = node.value
        else:
            return None


def _is_upcast(call: cst.Call, method: str, names: ModuleNames) -> bool:
    if method in _UPCAST_METHODS:
        return not call.args
    if method not in _CAST_METHODS:
        return False
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value != "dtype":
            continue
        qualified = names.qualified_name(arg.value)
        if qualified in _FLOAT_TENSOR_TYPES or dtype_from_torch_name(qualified) in (
            FLOAT32,
            FLOAT64,
        ):
            return True
    return False


def dispatches_to_kernel(
    forward: cst.FunctionDef,
    names: ModuleNames,
    index: ModuleIndex,
    launches_kernels: Callable[[str], bool] = lambda qualified: False,
    depth: int = 0,
) -> bool:
    """Forward launches a Triton kernel or calls a registered custom op, itself, through a
    function of its module (one level deep) or through a function imported from a linted
    file that launches them (`launches_kernels` of its qualified name)."""
    imports_triton = any(_is_triton(target) for target in names.bindings.values())
    for statement in statements(forward):
        for node in statement_expressions(statement):
            for call in calls_in(node):
                func = call.func
                if isinstance(func, cst.Subscript):  # kernel[grid](...)
                    kernel = dotted_name(func.value)
                    if imports_triton or _is_triton_kernel(kernel, names, index):
                        return True
                    continue
                qualified = names.qualified_name(func) or ""
                if qualified.startswith("torch.ops.") and not qualified.startswith(_ATEN_OPS):
                    return True
                helper = index.functions.get(func.value) if isinstance(func, cst.Name) else None
                if (
                    helper is None
                    and qualified
                    and not qualified.startswith("torch.")
                    and launches_kernels(qualified)
                ):
                    return True
                if (
                    helper is not None
                    and depth == 0
                    and dispatches_to_kernel(helper, names, index, launches_kernels, depth + 1)
                ):
                    return True
    return False


# torch's own operators through the dispatcher: the same kernels as torch functions.
_ATEN_OPS = ("torch.ops.aten.", "torch.ops.prims.", "torch.ops.prim.")


def _is_triton(qualified: str) -> bool:
    """triton (or tilelang, whose kernels load inputs the same way) itself, or a package's
    re-export of it (DeepSpeed's `from deepspeed.ops.triton_ops._triton import triton`)."""
    parts = qualified.split(".")
    return "triton" in parts or "tilelang" in parts


def _is_triton_kernel(name: str | None, names: ModuleNames, index: ModuleIndex) -> bool:
    """`name` is a function of the module decorated with `@triton.jit` (or `autotune`,
    `heuristics`), wherever in the module it is defined (`if HAS_TRITON:` blocks)."""
    if name is None:
        return False
    for function in index.all_functions:
        if function.name.value != name:
            continue
        for decorator in function.decorators:
            expr = decorator.decorator
            target = expr.func if isinstance(expr, cst.Call) else expr
            if _is_triton(names.qualified_name(target) or ""):
                return True
    return False
