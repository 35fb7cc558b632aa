"""Which values autograd would backpropagate through float16 autocast.

Under an enabled float16 autocast region with gradient recording on, the ops autocast lowers
(matmuls, convolutions, linear layers) record float16 backward functions. A value computed
there, and everything computed from it afterwards (a float32 loss included: its graph still
runs through the float16 ops), carries the region as `Value.fp16_graph`. Under
`torch.no_grad()` or `torch.inference_mode()` nothing is recorded, so nothing is tagged.

The tag is a fact about value flow; rules decide what matters (AMP304: a `backward()` of
such a value without loss scaling).
"""

from __future__ import annotations

from dataclasses import replace

import libcst as cst

from amp_lint.analysis.interpreter.arguments import Arguments
from amp_lint.analysis.interpreter.frames import Frame
from amp_lint.analysis.regions.finder import call_argument, flag_literal
from amp_lint.analysis.regions.region import AutocastRegion
from amp_lint.analysis.syntax.names import ModuleNames
from amp_lint.analysis.values.dtypes import FLOAT16, DTypeKind
from amp_lint.analysis.values.value import Fp16Graph, Value

_GRAD_OFF = frozenset(
    [
        "torch.no_grad",
        "torch.autograd.no_grad",
        "torch.autograd.grad_mode.no_grad",
        "torch.inference_mode",
        "torch.autograd.inference_mode",
        "torch.autograd.grad_mode.inference_mode",
    ]
)
_GRAD_ON = frozenset(["torch.enable_grad", "torch.autograd.grad_mode.enable_grad"])
_SET_GRAD_ENABLED = frozenset(
    ["torch.set_grad_enabled", "torch.autograd.grad_mode.set_grad_enabled"]
)
# Dtypes no gradient flows through: integer and boolean tensors, Python numbers, objects.
_NO_GRADIENT = frozenset(
    [DTypeKind.INTEGER, DTypeKind.BOOL, DTypeKind.SCALAR, DTypeKind.OTHER, DTypeKind.NONE]
)
# How deep into containers a tag is looked for (a dict of losses, a tuple of outputs).
_CONTAINER_DEPTH = 3


def grad_mode(node: cst.BaseExpression, names: ModuleNames) -> bool | None:
    """What a `with` item or decorator does to gradient recording: False for
    `torch.no_grad()`, `torch.inference_mode()`, `torch.set_grad_enabled(False)`; True for
    `torch.enable_grad()`, `torch.set_grad_enabled(True)`; None when it changes nothing or
    the mode is decided at run time."""
    call = node if isinstance(node, cst.Call) else None
    qualified = names.qualified_name(call.func if call is not None else node)
    if qualified in _GRAD_ON:
        return True
    if qualified in _GRAD_OFF:
        # `inference_mode(False)` (mode=False) leaves gradient recording as it was.
        mode = call_argument(call, 0, "mode") if call is not None else None
        return None if flag_literal(mode) is False else False
    if qualified in _SET_GRAD_ENABLED and call is not None:
        mode = call_argument(call, 0, "mode")
        return flag_literal(mode) if mode is not None else None
    return None


def records_in(function: cst.FunctionDef, names: ModuleNames, caller_records: bool = True) -> bool:
    """Whether the function's body records gradients: as its caller does (no caller in
    sight: it does), unless decorated with `@torch.no_grad()`, `@torch.inference_mode()`
    (with or without the call) or `@torch.enable_grad()`."""
    for decorator in function.decorators:
        mode = grad_mode(decorator.decorator, names)
        if mode is not None:
            return mode
    return caller_records


def records_fp16_graph(frame: Frame) -> AutocastRegion | None:
    """The enabled float16 region the frame runs under while recording gradients, if any.
    accelerate's `accelerator.autocast()` is left out: `accelerator.backward()` scales."""
    region = frame.active_region
    if region is None or not frame.grad_enabled or region.dtype != FLOAT16:
        return None
    return None if region.spelling == "accelerator.autocast" else region


def fp16_graph(value: Value | None, depth: int = 0) -> Fp16Graph | None:
    """The float16 region the value's autograd graph runs through, looking into containers."""
    if value is None:
        return None
    if value.fp16_graph is not None or depth >= _CONTAINER_DEPTH:
        return value.fp16_graph
    inner = value.elements or ((value.each,) if value.each is not None else ())
    for element in inner:
        found = fp16_graph(element, depth + 1)
        if found is not None:
            return found
    return None


def without_fp16_graph(value: Value) -> Value:
    """The value without its float16 graph, also inside containers. A callee receives its
    arguments so: what it returns then depends on its own regions only, and one analysis
    serves callers with and without graphs (the call site adds the arguments' graphs)."""
    if fp16_graph(value) is None:
        return value
    elements = tuple(map(without_fp16_graph, value.elements)) if value.elements else value.elements
    each = without_fp16_graph(value.each) if value.each is not None else None
    return replace(value, fp16_graph=None, elements=elements, each=each)


def arguments_without_fp16_graphs(args: Arguments) -> Arguments:
    if not any(fp16_graph(value) is not None for value in args.values):
        return args
    return Arguments(
        tuple(map(without_fp16_graph, args.positional)),
        tuple((name, without_fp16_graph(value)) for name, value in args.keywords),
        args.starred,
    )


def with_fp16_graph(node: cst.BaseExpression, value: Value, frame: Frame, path: str) -> Value:
    """The value of `node` with the float16 graph it depends on: one its operands carry,
    or, for an op or call executed under a float16 region recording gradients, that region."""
    if value.fp16_graph is not None or value.dtype.kind in _NO_GRADIENT:
        return value
    found: Fp16Graph | None = None
    for operand in _operands(node):
        found = fp16_graph(_known_value(operand, frame))
        if found is not None:
            break
    if found is None and _records_op(node):
        region = records_fp16_graph(frame)
        if region is not None:
            assumed = frame.assumption is not None
            found = Fp16Graph(region.spelling, path, region.node, assumed=assumed)
    return value if found is None else replace(value, fp16_graph=found)


def _known_value(node: cst.BaseExpression, frame: Frame) -> Value | None:
    """The operand's value if already evaluated in this statement (or a variable's): never
    evaluated again here, which could follow calls."""
    cached = frame.cache.get(id(node))
    if cached is None and isinstance(node, cst.Name):
        return frame.env.get(node.value)
    return cached


def _records_op(node: cst.BaseExpression) -> bool:
    """A call (a layer, a model, an op) or a matrix product: what autocast may lower."""
    if isinstance(node, cst.Call):
        return True
    return isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.MatrixMultiply)


def _operands(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The sub-expressions whose graphs flow into the node's value."""
    if isinstance(node, cst.Call):
        receiver = [node.func.value] if isinstance(node.func, cst.Attribute) else []
        return receiver + [arg.value for arg in node.args]
    if isinstance(node, cst.BinaryOperation):
        return [node.left, node.right]
    if isinstance(node, cst.UnaryOperation):
        return [node.expression]
    if isinstance(node, (cst.Attribute, cst.Subscript)):
        return [node.value]
    return []
