"""Expression evaluation: the Value (dtype, constant, instance, region) of each expression.

Calls into functions and classes of the module go back to the interpreter, which runs their
bodies under the caller's autocast region.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import libcst as cst

from amp_lint.analysis import semantics
from amp_lint.analysis.calls import LOCAL_PREFIX
from amp_lint.analysis.dtypes import (
    BOOL,
    OTHER,
    SCALAR,
    DTypeKind,
    promote,
)
from amp_lint.analysis.frames import Frame
from amp_lint.analysis.names import dotted_name
from amp_lint.analysis.outline import child_nodes
from amp_lint.analysis.regions import region_from_call
from amp_lint.analysis.torch_calls import TorchCalls
from amp_lint.analysis.values import UNKNOWN_VALUE, Env, Value, join_values

if TYPE_CHECKING:
    from amp_lint.analysis.interpreter import Interpreter

_FINFO = {
    ("torch.float32", "min"): -3.4028234663852886e38,
    ("torch.float32", "max"): 3.4028234663852886e38,
    ("torch.float", "min"): -3.4028234663852886e38,
    ("torch.float", "max"): 3.4028234663852886e38,
    ("torch.float64", "min"): -1.7976931348623157e308,
    ("torch.float64", "max"): 1.7976931348623157e308,
    ("torch.float16", "min"): -65504.0,
    ("torch.float16", "max"): 65504.0,
    ("torch.bfloat16", "min"): -3.3895313892515355e38,
    ("torch.bfloat16", "max"): 3.3895313892515355e38,
}
_MATH_CONSTANTS = {"math.inf": math.inf, "math.pi": math.pi, "math.e": math.e}
_PARAMETER_CLASSES = ("torch.nn.Parameter", "torch.nn.parameter.Parameter")
_BINARY_OP_NAMES: dict[type[cst.BaseBinaryOp], str] = {
    cst.Add: "add",
    cst.Subtract: "sub",
    cst.Multiply: "mul",
    cst.Divide: "div",
    cst.FloorDivide: "floor_divide",
    cst.Modulo: "remainder",
    cst.Power: "pow",
    cst.MatrixMultiply: "matmul",
}


class Evaluator:
    def __init__(self, interpreter: Interpreter) -> None:
        self.interpreter = interpreter
        self.names = interpreter.facts.names
        self.index = interpreter.index
        self.torch_calls = TorchCalls(self)

    def evaluate(self, node: cst.BaseExpression, frame: Frame) -> Value:
        cached = frame.cache.get(id(node))
        if cached is not None:
            return cached
        value = self._evaluate(node, frame)
        frame.cache[id(node)] = value
        return value

    def _evaluate(self, node: cst.BaseExpression, frame: Frame) -> Value:
        # The commonest nodes first, by exact type: isinstance against libcst's classes goes
        # through ABCMeta in Python, and this runs for every expression of every function.
        if type(node) is cst.Name:
            return self._name(node, frame)
        if type(node) is cst.Attribute:
            return self._attribute(node, frame)
        if type(node) is cst.Call:
            return self._call(node, frame)
        if isinstance(node, (cst.Integer, cst.Float)):
            literal = node.evaluated_value
            return Value(SCALAR, constant=literal if isinstance(literal, (int, float)) else None)
        if isinstance(node, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
            return Value(OTHER)
        if isinstance(node, cst.Name):
            return self._name(node, frame)
        if isinstance(node, cst.Attribute):
            return self._attribute(node, frame)
        if isinstance(node, cst.Call):
            return self._call(node, frame)
        if isinstance(node, cst.BinaryOperation):
            return self._binary(node, frame)
        if isinstance(node, cst.UnaryOperation):
            return self._unary(node, frame)
        if isinstance(node, cst.Comparison):
            return self._comparison(node, frame)
        if isinstance(node, cst.Subscript):
            base = self.evaluate(node.value, frame)
            self._evaluate_children(node, frame)
            kind = base.dtype.kind
            keeps = base.dtype.is_known_tensor or kind is DTypeKind.SCALAR
            return Value(base.dtype) if keeps else UNKNOWN_VALUE
        if isinstance(node, cst.IfExp):
            self.evaluate(node.test, frame)
            return join_values(self.evaluate(node.body, frame), self.evaluate(node.orelse, frame))
        if isinstance(node, cst.NamedExpr):
            value = self.evaluate(node.value, frame)
            if isinstance(node.target, cst.Name):
                frame.env.set(node.target.value, value)
            return value
        if isinstance(node, cst.Await):
            return self.evaluate(node.expression, frame)
        self._evaluate_children(node, frame)
        if isinstance(node, (cst.Tuple, cst.List, cst.Dict, cst.Set, cst.BooleanOperation)):
            return Value(OTHER)
        return UNKNOWN_VALUE

    def _evaluate_children(self, node: cst.CSTNode, frame: Frame) -> None:
        """Evaluate sub-expressions so that calls inside them are followed."""
        if isinstance(node, (cst.Lambda, cst.BaseComp)):
            return  # their own scope: names in them are unknown here
        for child in child_nodes(node):
            if isinstance(child, cst.BaseExpression):
                self.evaluate(child, frame)
            elif not isinstance(child, (cst.BaseSuite, cst.BaseStatement)):
                self._evaluate_children(child, frame)

    # --- names and attributes -------------------------------------------------------------

    def _name(self, node: cst.Name, frame: Frame) -> Value:
        name = node.value
        if name in ("True", "False", "None"):
            return Value(OTHER)
        found = frame.env.get(name) or self.interpreter.module_env.get(name)
        if found is not None:
            return found
        if name in self.index.functions:
            return Value(OTHER, function=self.index.functions[name])
        return Value(OTHER) if name in self.names.bindings else UNKNOWN_VALUE

    def _attribute(self, node: cst.Attribute, frame: Frame) -> Value:
        dotted = dotted_name(node)
        if dotted is not None:
            found = frame.env.get(dotted)
            if found is not None:
                return found
        qualified = self.names.qualified_name(node)
        if qualified is not None:
            if qualified in _MATH_CONSTANTS:
                return Value(SCALAR, constant=_MATH_CONSTANTS[qualified])
            return Value(OTHER)
        attribute = node.attr.value
        if isinstance(node.value, cst.Call):
            constant = self._finfo_constant(node.value, attribute)
            if constant is not None:
                return Value(SCALAR, constant=constant)
        if dotted is not None and dotted.startswith("self.") and dotted.count(".") == 1:
            instance = self._self_attribute(dotted, frame)
            if instance is not None:
                return instance
        base = self.evaluate(node.value, frame)
        if attribute in semantics.SHAPE_ATTRIBUTES:
            return Value(base.dtype) if base.dtype.is_known_tensor else UNKNOWN_VALUE
        if attribute == "shape":
            return Value(SCALAR)
        if attribute in semantics.NON_TENSOR_ATTRIBUTES:
            return Value(OTHER)
        return UNKNOWN_VALUE

    def _finfo_constant(self, call: cst.Call, attribute: str) -> float | None:
        if self.names.qualified_name(call.func) != "torch.finfo" or not call.args:
            return None
        dtype_name = self.names.qualified_name(call.args[0].value)
        return _FINFO.get((dtype_name or "", attribute))

    def _self_attribute(self, dotted: str, frame: Frame) -> Value | None:
        if frame.self_class is None:
            return None
        if dotted in frame.self_class.scalar_attributes:
            return Value(SCALAR)
        call = frame.self_class.attribute_calls.get(dotted)
        if call is None:
            return None
        # `self.model = Net(dim).cuda()` is still a Net.
        while (
            isinstance(call.func, cst.Attribute)
            and isinstance(call.func.value, cst.Call)
            and semantics.returns_same_module(call.func.attr.value, call)
        ):
            call = call.func.value
        region = region_from_call(call, self.names, self.interpreter.accelerate)
        if region is not None:
            return Value(OTHER, region=region)
        if self.names.qualified_name(call.func) in _PARAMETER_CLASSES and call.args:
            # nn.Parameter(torch.zeros(n)) is a tensor of its data's dtype; the data is built
            # from factories and sizes, so a frame of its own is enough to evaluate it.
            return Value(self.evaluate(call.args[0].value, Frame(env=Env(), regions=())).dtype)
        return Value(OTHER, instance_of=self._class_name(call.func))

    def _class_name(self, func: cst.BaseExpression) -> str | None:
        if isinstance(func, cst.Name) and func.value in self.index.classes:
            return f"{LOCAL_PREFIX}.{func.value}"
        qualified = self.names.qualified_name(func)
        if qualified is not None:
            project = self.interpreter.cross_file.project_class(qualified)
            if project is not None:
                return project
        if qualified and qualified.rsplit(".", 1)[-1][:1].isupper():
            return qualified
        return None

    # --- operators -------------------------------------------------------------------------

    def _binary(self, node: cst.BinaryOperation, frame: Frame) -> Value:
        left = self.evaluate(node.left, frame)
        right = self.evaluate(node.right, frame)
        op = _BINARY_OP_NAMES.get(type(node.operator))
        if left.dtype.kind is DTypeKind.SCALAR and right.dtype.kind is DTypeKind.SCALAR:
            return Value(SCALAR, constant=_fold(op, left.constant, right.constant))
        if op is None:
            return Value(promote([left.dtype, right.dtype]))
        if op == "div" and left.dtype.kind is DTypeKind.SCALAR:
            op = "reciprocal"  # `c / x` is __rtruediv__, which autocast treats as reciprocal
        return Value(semantics.op_result(op, [left.dtype, right.dtype], frame.active_region))

    def _unary(self, node: cst.UnaryOperation, frame: Frame) -> Value:
        operand = self.evaluate(node.expression, frame)
        if isinstance(node.operator, cst.Not):
            return Value(OTHER)
        constant = operand.constant
        if constant is not None and isinstance(node.operator, cst.Minus):
            constant = -constant
        return Value(operand.dtype, constant=constant)

    def _comparison(self, node: cst.Comparison, frame: Frame) -> Value:
        dtypes = [self.evaluate(node.left, frame).dtype]
        dtypes += [self.evaluate(target.comparator, frame).dtype for target in node.comparisons]
        return Value(BOOL) if any(d.is_known_tensor for d in dtypes) else UNKNOWN_VALUE

    # --- calls -----------------------------------------------------------------------------

    def _call(self, node: cst.Call, frame: Frame) -> Value:
        for arg in node.args:
            self.evaluate(arg.value, frame)
        region = region_from_call(node, self.names, self.interpreter.accelerate)
        if region is not None:
            return Value(OTHER, region=region)
        func = node.func
        qualified = self.names.qualified_name(func)
        if qualified is not None:
            followed = self.interpreter.cross_file.project_call(qualified, node, frame)
            if followed is not None:
                return followed
            return self.torch_calls.qualified_call(qualified, node, frame)
        if isinstance(func, cst.Name):
            return self._name_call(func, node, frame)
        if isinstance(func, cst.Attribute):
            return self._method_call(func, node, frame)
        callee = self.evaluate(func, frame)
        return self.interpreter.call_instance(callee, node, frame)

    def _name_call(self, func: cst.Name, node: cst.Call, frame: Frame) -> Value:
        name = func.value
        callee = self._name(func, frame)
        if callee.function is not None:
            return self.interpreter.call_function(callee.function, node, frame)
        if name in self.index.classes:
            return Value(OTHER, instance_of=f"{LOCAL_PREFIX}.{name}")
        if name in ("float", "int", "abs") and node.args:
            inner = self.evaluate(node.args[0].value, frame)
            return Value(SCALAR, constant=_builtin_number(name, inner.constant, node.args[0]))
        if name in ("len", "round"):
            return Value(SCALAR)
        if callee.instance_of is not None:
            return self.interpreter.call_instance(callee, node, frame)
        return UNKNOWN_VALUE

    def _method_call(self, func: cst.Attribute, node: cst.Call, frame: Frame) -> Value:
        method = func.attr.value
        receiver_node = func.value
        if (
            isinstance(receiver_node, cst.Name)
            and receiver_node.value == "self"
            and frame.self_class is not None
            and method in frame.self_class.methods
        ):
            return self.interpreter.call_function(
                frame.self_class.methods[method], node, frame, bound_self=frame.env.get("self")
            )
        callee = self.evaluate(func, frame)
        if callee.function is not None:
            return self.interpreter.call_function(callee.function, node, frame)
        if callee.instance_of is not None:
            return self.interpreter.call_instance(callee, node, frame)  # self.fc(x)
        receiver = self.evaluate(receiver_node, frame)
        if receiver.instance_of is not None:
            return self.interpreter.call_method(receiver, method, node, frame)
        value = self.torch_calls.tensor_method(method, receiver, node, frame)
        if method in semantics.CONVERSION_METHODS or method in ("to", "type", "type_as"):
            from_half = receiver.dtype if receiver.dtype.is_half else None
            if value.dtype.kind is DTypeKind.INTEGER and from_half is not None:
                return Value(value.dtype, conversion=node, integer_from=from_half)
            return Value(value.dtype, conversion=node)
        return value


def _fold(op: str | None, left: float | None, right: float | None) -> float | None:
    if left is None or right is None or op is None:
        return None
    try:
        if op == "add":
            return left + right
        if op == "sub":
            return left - right
        if op == "mul":
            return left * right
        if op == "div":
            return left / right
        if op == "pow" and abs(right) < 1100:
            result: float = left**right
            return result
    except (ArithmeticError, ValueError, TypeError):
        return None
    return None


def _builtin_number(name: str, constant: float | None, arg: cst.Arg) -> float | None:
    if constant is not None:
        if name == "abs":
            return abs(constant)
        if name == "float" or math.isinf(constant) or math.isnan(constant):
            return float(constant)
        return int(constant)
    value = arg.value
    if name == "float" and isinstance(value, cst.SimpleString):
        text = value.evaluated_value
        try:
            return float(text) if isinstance(text, str) else None
        except ValueError:
            return None
    return None
