"""Calls into torch: tensor methods (`x.float()`, `x.to(...)`, `x.sum()`), torch functions
(`torch.zeros`, `F.softmax`, `torch.cat`) and what each does to dtypes under autocast."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from amp_lint.analysis.interpreter.frames import Frame
from amp_lint.analysis.syntax.names import dotted_name
from amp_lint.analysis.syntax.outline import positional_arguments
from amp_lint.analysis.values import semantics
from amp_lint.analysis.values.dtypes import (
    BFLOAT16,
    BOOL,
    COMPLEX,
    FLOAT16,
    FLOAT32,
    FLOAT64,
    INTEGER,
    OTHER,
    SCALAR,
    UNKNOWN,
    DType,
    DTypeKind,
    dtype_from_torch_name,
    half,
)
from amp_lint.analysis.values.value import UNKNOWN_VALUE, Value

if TYPE_CHECKING:
    from amp_lint.analysis.interpreter.evaluator import Evaluator


# Methods that only mean something for complex tensors, and those that take a real part.
_CONJUGATES = frozenset(["conj", "conj_physical", "resolve_conj"])
_REAL_PARTS = frozenset(["abs", "angle", "real", "imag"])
# Functions whose result is complex whatever their input.
_COMPLEX_RESULTS = frozenset(["torch.view_as_complex", "torch.complex", "torch.polar"])


class TorchCalls:
    def __init__(self, evaluator: Evaluator) -> None:
        self.evaluator = evaluator
        self.names = evaluator.names

    def tensor_method(self, method: str, receiver: Value, node: cst.Call, frame: Frame) -> Value:
        dtype = receiver.dtype
        if dtype.kind is DTypeKind.SCALAR and method not in semantics.BOOL_METHODS:
            # A number, or a 0-dimensional tensor (`torch.tensor(d).to(torch.float32)`), which
            # stays weak in promotion whatever its dtype: `x / it` keeps x's dtype.
            return Value(SCALAR)
        if method in semantics.CONVERSION_METHODS:
            return Value(semantics.CONVERSION_METHODS[method])
        if method in _CONJUGATES and dtype.kind in (DTypeKind.UNKNOWN, DTypeKind.COMPLEX):
            return Value(COMPLEX)  # a value one conjugates is complex (a no-op on real ones)
        if dtype.kind is DTypeKind.COMPLEX and method in _REAL_PARTS:
            return UNKNOWN_VALUE  # `.abs()` of complex64 is float32, of complex128 float64
        if method in ("to", "type"):
            return Value(self._to_dtype(node, dtype, frame))
        if method == "type_as" and node.args:
            return Value(self.evaluator.evaluate(node.args[0].value, frame).dtype)
        if method in semantics.BOOL_METHODS:
            return Value(BOOL)
        if method in semantics.INTEGER_METHODS:
            return Value(INTEGER)
        if method in semantics.SCALAR_METHODS:
            return Value(SCALAR)
        if method in semantics.NEW_FACTORIES:
            explicit = self._dtype_keyword(node, frame)
            return Value(explicit or dtype)
        if not (dtype.is_known_tensor or dtype.kind is DTypeKind.UNKNOWN):
            return UNKNOWN_VALUE
        positional = positional_arguments(node)
        if _returns_values_and_indices(method, node, positional):
            return _values_and_indices(dtype)
        inputs = [dtype]
        if method in semantics.BINARY_OPS and positional:
            inputs.append(self.evaluator.evaluate(positional[0], frame).dtype)
        if method == "where" and len(positional) > 1:
            inputs.append(self.evaluator.evaluate(positional[1], frame).dtype)
        return Value(semantics.op_result(method, inputs, frame.active_region))

    def _to_dtype(self, node: cst.Call, current: DType, frame: Frame) -> DType:
        """`x.to(torch.float16)`, `x.to(y.dtype)`, `x.to(y)`, `x.to(device)`."""
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value not in ("dtype", "device", "other"):
                continue
            target = self._dtype_expression(arg.value, frame)
            if target is not None:
                return target
            value = self.evaluator.evaluate(arg.value, frame)
            if value.dtype.is_known_tensor:
                return value.dtype  # x.to(other_tensor)
            if not _looks_like_device(arg.value):
                return UNKNOWN
        return current

    def _dtype_expression(self, node: cst.BaseExpression, frame: Frame) -> DType | None:
        """The dtype an expression such as `torch.float16`, `y.dtype` or a variable holding
        one denotes; UNKNOWN for `y.dtype` of a tensor of unknown dtype; None when the
        expression is no dtype (a device, a tensor)."""
        explicit = dtype_from_torch_name(self.names.qualified_name(node))
        if explicit is not None:
            return explicit
        if isinstance(node, cst.Attribute) and node.attr.value == "dtype":
            base = self.evaluator.evaluate(node.value, frame).dtype
            return base if base.is_known_tensor else UNKNOWN
        return self.evaluator.evaluate(node, frame).denotes

    def _dtype_keyword(self, node: cst.Call, frame: Frame) -> DType | None:
        """The dtype `dtype=` names: `torch.float16`, or another tensor's `x.dtype`."""
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "dtype":
                return self._dtype_expression(arg.value, frame) or UNKNOWN
        return None

    def qualified_call(self, qualified: str, node: cst.Call, frame: Frame) -> Value:
        if qualified in semantics.FALSE_IN_EAGER_MODE:
            return Value(OTHER, truth=False)
        if qualified.startswith("math."):
            return Value(SCALAR)
        if qualified.startswith("einops."):
            return self._einops(qualified.rsplit(".", 1)[-1], node, frame)
        explicit = self._dtype_keyword(node, frame)
        name = qualified.rsplit(".", 1)[-1]
        positional = positional_arguments(node)
        if qualified in _COMPLEX_RESULTS:
            for argument in node.args:
                self.evaluator.evaluate(argument.value, frame)
            return Value(COMPLEX)
        if qualified.startswith("torch.") and name in semantics.LIKE_FACTORIES:
            like = self.evaluator.evaluate(positional[0], frame).dtype if positional else UNKNOWN
            return Value(explicit or like)
        if qualified.startswith("torch.") and name in _FACTORIES and "." not in qualified[6:]:
            fill_node = positional[1] if len(positional) > 1 else _keyword(node, "fill_value")
            fill = self.evaluator.evaluate(fill_node, frame).constant if fill_node else None
            return Value(explicit or semantics.factory_dtype(name, fill))
        if qualified in ("torch.tensor", "torch.as_tensor") and positional:
            given = self.evaluator.evaluate(positional[0], frame)
            if given.dtype.kind is DTypeKind.SCALAR:
                # A 0-dimensional tensor: like a Python number, it does not promote the
                # dimensioned tensors it meets (`x / torch.tensor(d)` keeps x's dtype).
                return Value(SCALAR, constant=given.constant)
            return Value(explicit or (given.dtype if given.dtype.is_known_tensor else UNKNOWN))
        if qualified in ("torch.tensor", "torch.as_tensor", "torch.arange"):
            return Value(explicit or UNKNOWN)
        if qualified in ("torch.where",) and len(positional) == 3:
            inputs = [self.evaluator.evaluate(p, frame).dtype for p in positional[1:]]
            return Value(semantics.op_result("where", inputs, frame.active_region))
        if qualified in ("torch.cat", "torch.stack", "torch.concat") and positional:
            inputs = self._sequence_dtypes(positional[0], frame)
            return Value(semantics.op_result(name, inputs, frame.active_region))
        legacy = _LEGACY_CONSTRUCTORS.get(qualified.replace("torch.cuda.", "torch."))
        if legacy is not None:
            return Value(legacy)  # `torch.Tensor(n)`, `torch.cuda.FloatTensor(...)`
        if qualified in _PARAMETER_CLASSES and positional:
            # nn.Parameter(torch.zeros(n)) is a tensor of its data's dtype.
            return Value(self.evaluator.evaluate(positional[0], frame).dtype)
        if name[:1].isupper():
            return Value(OTHER, instance_of=qualified)
        op = semantics.op_name_for_function(qualified)
        if op is None:
            return UNKNOWN_VALUE
        if positional and _returns_values_and_indices(op, node, positional[1:]):
            return _values_and_indices(self.evaluator.evaluate(positional[0], frame).dtype)
        if op in semantics.CONVERSION_METHODS and positional:
            return self.tensor_method(
                op, self.evaluator.evaluate(positional[0], frame), node, frame
            )
        data = positional[:2] if op in semantics.BINARY_OPS else positional[:1]
        if op == "einsum":
            data = positional[1:]
        inputs = [self.evaluator.evaluate(p, frame).dtype for p in data]
        if explicit is not None:
            return Value(explicit)
        return Value(semantics.op_result(op, inputs, frame.active_region))

    def _einops(self, name: str, node: cst.Call, frame: Frame) -> Value:
        """einops rearranges without changing dtypes (`rearrange`, `repeat`, `reduce`,
        `pack`); its `einsum` is torch's, which autocast casts."""
        positional = positional_arguments(node)
        if not positional:
            return UNKNOWN_VALUE
        if name in ("rearrange", "repeat", "reduce"):
            return Value(self.evaluator.evaluate(positional[0], frame).dtype)
        if name == "pack":
            dtypes = self._sequence_dtypes(positional[0], frame)
            packed = semantics.op_result("cat", dtypes, frame.active_region)
            return Value(OTHER, elements=(Value(packed), Value(OTHER)))
        if name == "unpack":
            return Value(OTHER, each=Value(self.evaluator.evaluate(positional[0], frame).dtype))
        if name == "einsum":
            inputs = [self.evaluator.evaluate(p, frame).dtype for p in positional[:-1]]
            return Value(semantics.op_result("einsum", inputs, frame.active_region))
        return UNKNOWN_VALUE

    def _sequence_dtypes(self, node: cst.BaseExpression, frame: Frame) -> list[DType]:
        """The dtypes of the tensors `torch.cat(...)` or `torch.stack(...)` gets: a list
        written there, a container held in a variable, or the parts of an opaque model's
        output (`torch.stack(model(x).hidden_states)`)."""
        if isinstance(node, (cst.List, cst.Tuple)):
            return [
                self.evaluator.evaluate(element.value, frame).dtype
                for element in node.elements
                if isinstance(element, cst.Element)
            ] or [UNKNOWN]
        value = self.evaluator.evaluate(node, frame)
        if value.elements:
            return [element.dtype for element in value.elements]
        if value.each is not None:
            return [value.each.dtype]
        if value.dtype.assumed:
            return [value.dtype]
        return [UNKNOWN]


_PARAMETER_CLASSES = ("torch.nn.Parameter", "torch.nn.parameter.Parameter")
# Reductions that return (values, indices): always, or when given a dimension.
_ALWAYS_VALUES_AND_INDICES = frozenset(["topk", "sort", "kthvalue", "mode", "cummax", "cummin"])
_VALUES_AND_INDICES_WITH_DIM = frozenset(["max", "min", "median", "nanmedian"])


def _returns_values_and_indices(
    op: str, node: cst.Call, after_tensor: list[cst.BaseExpression]
) -> bool:
    """`torch.topk(x, k)`, `x.sort()`, `x.max(dim=1)`, `torch.max(x, 1)` (not `torch.max(x)`
    nor `torch.max(x, y)`, which return a tensor)."""
    if op in _ALWAYS_VALUES_AND_INDICES:
        return True
    if op not in _VALUES_AND_INDICES_WITH_DIM:
        return False
    if any(arg.keyword is not None and arg.keyword.value == "dim" for arg in node.args):
        return True
    return bool(after_tensor) and isinstance(after_tensor[0], (cst.Integer, cst.UnaryOperation))


def _values_and_indices(dtype: DType) -> Value:
    """The named tuple (values, indices): `.values`/`[0]` keep the dtype, indices are long."""
    return Value(OTHER, elements=(Value(dtype), Value(INTEGER)))


_FACTORIES = semantics.FLOAT32_FACTORIES | {"full", "randint"}
_LEGACY_CONSTRUCTORS = {
    "torch.Tensor": FLOAT32,
    "torch.FloatTensor": FLOAT32,
    "torch.DoubleTensor": FLOAT64,
    "torch.HalfTensor": half(FLOAT16),
    "torch.BFloat16Tensor": half(BFLOAT16),
    "torch.LongTensor": INTEGER,
    "torch.IntTensor": INTEGER,
    "torch.ByteTensor": INTEGER,
    "torch.BoolTensor": BOOL,
}


def _keyword(node: cst.Call, name: str) -> cst.BaseExpression | None:
    return next((a.value for a in node.args if a.keyword and a.keyword.value == name), None)


def _looks_like_device(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.SimpleString):
        return True
    name = dotted_name(node)
    return name is not None and (name.split(".")[-1] in ("device", "dev") or "device" in name)
