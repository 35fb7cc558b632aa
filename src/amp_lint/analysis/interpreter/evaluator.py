"""Expression evaluation: the Value (dtype, constant, instance, region) of each expression.

Calls into functions and classes of the module go back to the interpreter, which runs their
bodies under the caller's autocast region.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

import libcst as cst

from amp_lint.analysis.autograd.graph import with_fp16_graph
from amp_lint.analysis.interpreter.arguments import Arguments
from amp_lint.analysis.interpreter.call_expressions import CallExpressions
from amp_lint.analysis.interpreter.containers import Containers
from amp_lint.analysis.interpreter.frames import Frame
from amp_lint.analysis.interpreter.torch_calls import TorchCalls
from amp_lint.analysis.syntax.names import dotted_name
from amp_lint.analysis.syntax.outline import child_nodes
from amp_lint.analysis.values import semantics
from amp_lint.analysis.values.dtypes import (
    BOOL,
    NONE,
    OTHER,
    SCALAR,
    DTypeKind,
    dtype_from_torch_name,
    promote,
)
from amp_lint.analysis.values.literals import bounded, number_literal, string_literal
from amp_lint.analysis.values.value import UNKNOWN_VALUE, Origin, Value, join_values

if TYPE_CHECKING:
    from amp_lint.analysis.interpreter.interpreter import Interpreter

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
_MATH_CONSTANTS = {
    "math.inf": math.inf,
    "math.nan": math.nan,
    "math.pi": math.pi,
    "math.e": math.e,
    "torch.inf": math.inf,
    "torch.nan": math.nan,
    "torch.pi": math.pi,
    "torch.e": math.e,
    "numpy.inf": math.inf,
    "numpy.nan": math.nan,
    "numpy.pi": math.pi,
}
# `torch.max(x, dim)` and friends return a named tuple.
_TUPLE_FIELDS = {"values": 0, "indices": 1}
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

# Expressions whose value may carry a float16 autograd graph from an operand or op.
_GRAPH_NODES = frozenset(
    [cst.Call, cst.BinaryOperation, cst.UnaryOperation, cst.Attribute, cst.Subscript]
)


class Evaluator:
    def __init__(self, interpreter: Interpreter) -> None:
        self.interpreter = interpreter
        self.names = interpreter.facts.names
        self.index = interpreter.index
        self.torch_calls = TorchCalls(self)
        self.containers = Containers(self)
        self.call_expressions = CallExpressions(self)
        self.calls = interpreter.calls

    def evaluate(self, node: cst.BaseExpression, frame: Frame) -> Value:
        cached = frame.cache.get(id(node))
        if cached is not None:
            return cached
        value = self._evaluate(node, frame)
        if type(node) in _GRAPH_NODES:
            value = with_fp16_graph(node, value, frame, self.interpreter.facts.path)
        frame.cache[id(node)] = value
        return value

    def _evaluate(self, node: cst.BaseExpression, frame: Frame) -> Value:
        # The commonest nodes first, by exact type: isinstance against libcst's classes goes
        # through ABCMeta in Python, and this runs for every expression of every function.
        if type(node) is cst.Name:
            return self.name_value(node, frame)
        if type(node) is cst.Attribute:
            return self._attribute(node, frame)
        if type(node) is cst.Call:
            return self._call(node, frame)
        if isinstance(node, (cst.Integer, cst.Float)):
            return Value(SCALAR, constant=number_literal(node))
        if isinstance(node, cst.SimpleString):
            text = string_literal(node)
            return Value(OTHER, text=text if text is not None and len(text) < 64 else None)
        if isinstance(node, (cst.ConcatenatedString, cst.FormattedString)):
            return Value(OTHER)
        if isinstance(node, cst.Name):
            return self.name_value(node, frame)
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
            return self.containers.subscript(node, self.evaluate(node.value, frame), frame)
        if isinstance(node, cst.IfExp):
            truth = self.evaluate(node.test, frame).truth
            if truth is not None:
                return self.evaluate(node.body if truth else node.orelse, frame)
            return join_values(self.evaluate(node.body, frame), self.evaluate(node.orelse, frame))
        if isinstance(node, cst.NamedExpr):
            value = self.evaluate(node.value, frame)
            if isinstance(node.target, cst.Name):
                frame.env.set(node.target.value, value)
            return value
        if isinstance(node, cst.Await):
            return self.evaluate(node.expression, frame)
        if isinstance(node, (cst.Tuple, cst.List, cst.Dict, cst.Set)):
            return self.containers.literal(node, frame)
        if isinstance(node, cst.BaseComp):
            return self.containers.comprehension(node, frame)
        self._evaluate_children(node, frame)
        if isinstance(node, cst.BooleanOperation):
            return Value(OTHER)
        return UNKNOWN_VALUE

    def arguments(self, call: cst.Call, frame: Frame) -> Arguments:
        """The values of a call's arguments."""
        positional: list[Value] = []
        keywords: list[tuple[str, Value]] = []
        starred = False
        for arg in call.args:
            value = self._with_origin(self.evaluate(arg.value, frame), arg.value, call)
            if arg.star:
                starred = True
            elif arg.keyword is not None:
                keywords.append((arg.keyword.value, value))
            else:
                positional.append(value)
        return Arguments(tuple(positional), tuple(keywords), starred)

    def _with_origin(self, value: Value, node: cst.BaseExpression, call: cst.Call) -> Value:
        """A constant passed as an argument remembers the argument, unless it came from
        further up already."""
        if value.constant is None or value.origin is not None:
            return value
        origin = Origin(path=self.interpreter.facts.path, node=node, call=call, site=id(node))
        return replace(value, origin=origin)

    def unpacked(
        self, value: Value, node: cst.BaseExpression | None, count: int, frame: Frame
    ) -> list[Value]:
        return self.containers.unpacked(value, node, count, frame)

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

    def name_value(self, node: cst.Name, frame: Frame) -> Value:
        name = node.value
        if name == "None":
            return Value(NONE, truth=False)
        if name in ("True", "False"):
            return Value(OTHER, truth=name == "True")
        found = frame.env.get(name) or self.interpreter.module_env.get(name)
        if found is not None:
            return found
        if name in self.index.functions:
            return Value(OTHER, function=self.index.functions[name])
        qualified = self.names.bindings.get(name)
        if qualified is None:
            return UNKNOWN_VALUE
        if not name.isupper():
            return Value(OTHER)
        # `NEAR_INF` from a linted module: constants are named in capitals, and only they are
        # worth loading another module for.
        imported = self.interpreter.cross_file.imported_value(qualified)
        return imported if imported is not None else Value(OTHER)

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
            return Value(OTHER, denotes=dtype_from_torch_name(qualified))
        attribute = node.attr.value
        if isinstance(node.value, cst.Call):
            constant = self._finfo_constant(node.value, attribute)
            if constant is not None:
                return Value(SCALAR, constant=constant)
        base = self.evaluate(node.value, frame)
        owner = self.index.class_for_qualified(base.instance_of)
        if owner is not None:
            found = self.interpreter.instances.attribute(owner, attribute)
            if found is None:
                return UNKNOWN_VALUE
            if frame.half_params is not None and found.dtype.kind is DTypeKind.FLOAT32:
                return Value(frame.half_params)  # a parameter or buffer cast with the model
            return found
        if base.elements is not None and base.keys is None and attribute in _TUPLE_FIELDS:
            # `x.max(dim=1).values`; a dict's `.values` is its method (`d.values()`).
            found = base.element(_TUPLE_FIELDS[attribute])
            return found if found is not None else UNKNOWN_VALUE
        if attribute in semantics.SHAPE_ATTRIBUTES:
            return Value(base.dtype) if base.dtype.is_known_tensor else UNKNOWN_VALUE
        if attribute == "shape":
            return Value(SCALAR)
        if attribute == "dtype":
            return Value(OTHER, denotes=base.dtype if base.dtype.is_known_tensor else None)
        if attribute in semantics.NON_TENSOR_ATTRIBUTES:
            return Value(OTHER)
        return UNKNOWN_VALUE

    def _finfo_constant(self, call: cst.Call, attribute: str) -> float | None:
        if self.names.qualified_name(call.func) != "torch.finfo" or not call.args:
            return None
        dtype_name = self.names.qualified_name(call.args[0].value)
        return _FINFO.get((dtype_name or "", attribute))

    # --- operators -------------------------------------------------------------------------

    def _binary(self, node: cst.BinaryOperation, frame: Frame) -> Value:
        left = self.evaluate(node.left, frame)
        right = self.evaluate(node.right, frame)
        op = _BINARY_OP_NAMES.get(type(node.operator))
        if left.dtype.kind is DTypeKind.SCALAR and right.dtype.kind is DTypeKind.SCALAR:
            return Value(SCALAR, constant=_fold(op, left.constant, right.constant))
        if op is None:
            result = promote([left.dtype, right.dtype])
        else:
            if op == "div" and left.dtype.kind is DTypeKind.SCALAR:
                op = "reciprocal"  # `c / x` is __rtruediv__, which autocast treats so
            result = semantics.op_result(op, [left.dtype, right.dtype], frame.active_region)
        # `(x * w).long() + offset`: integers computed from half values stay so.
        source = left if left.integer_from is not None else right
        if result.kind is DTypeKind.INTEGER and source.integer_from is not None:
            return Value(result, integer_from=source.integer_from, conversion=source.conversion)
        return Value(result)

    def _unary(self, node: cst.UnaryOperation, frame: Frame) -> Value:
        operand = self.evaluate(node.expression, frame)
        if isinstance(node.operator, cst.Not):
            truth = None if operand.truth is None else not operand.truth
            return Value(OTHER, truth=truth)
        if isinstance(node.operator, cst.BitInvert) and operand.dtype.kind is DTypeKind.UNKNOWN:
            # `~mask`: only bool and integer tensors (or Python ints) can be inverted.
            return Value(BOOL)
        constant = operand.constant
        if constant is not None and isinstance(node.operator, cst.Minus):
            constant = -constant
        return Value(operand.dtype, constant=constant)

    def _comparison(self, node: cst.Comparison, frame: Frame) -> Value:
        left = self.evaluate(node.left, frame)
        dtypes = [left.dtype]
        dtypes += [self.evaluate(target.comparator, frame).dtype for target in node.comparisons]
        if len(node.comparisons) == 1:
            truth = _is_none_test(left, node.comparisons[0])
            if truth is not None:
                return Value(OTHER, truth=truth)
        return Value(BOOL) if any(d.is_known_tensor for d in dtypes) else UNKNOWN_VALUE

    # --- calls -----------------------------------------------------------------------------

    def _call(self, node: cst.Call, frame: Frame) -> Value:
        return self.call_expressions.evaluate(node, frame)


def _is_none_test(left: Value, comparison: cst.ComparisonTarget) -> bool | None:
    """The result of `x is None` / `x is not None` where x is None, or certainly an object."""
    operator = comparison.operator
    if not isinstance(operator, (cst.Is, cst.IsNot)):
        return None
    comparator = comparison.comparator
    if not (isinstance(comparator, cst.Name) and comparator.value == "None"):
        return None
    if left.maybe_none:
        return None  # a parameter that may be None (its default, no caller seen)
    if left.dtype.kind is DTypeKind.NONE:
        is_none = True
    elif left.dtype.is_known_tensor or left.instance_of or left.function or left.is_container:
        is_none = False
    else:
        return None
    return is_none if isinstance(operator, cst.Is) else not is_none


def _fold(op: str | None, left: float | None, right: float | None) -> float | None:
    if left is None or right is None or op is None:
        return None
    try:
        if op == "add":
            return bounded(left + right)
        if op == "sub":
            return bounded(left - right)
        if op == "mul":
            return bounded(left * right)
        if op == "div":
            return left / right
        if op == "pow" and abs(right) < 1100:
            result: float = left**right
            return bounded(result)
    except (ArithmeticError, ValueError, TypeError):
        return None
    return None
