"""Expression evaluation: the Value (dtype, constant, instance, region) of each expression.

Calls into functions and classes of the module go back to the interpreter, which runs their
bodies under the caller's autocast region.
"""

from __future__ import annotations

import builtins
import math
from dataclasses import replace
from typing import TYPE_CHECKING

import libcst as cst

from amp_lint.analysis import semantics
from amp_lint.analysis.calling import Arguments, is_model_name
from amp_lint.analysis.calls import LOCAL_PREFIX
from amp_lint.analysis.containers import Containers
from amp_lint.analysis.dtypes import (
    BOOL,
    NONE,
    OTHER,
    SCALAR,
    DTypeKind,
    dtype_from_torch_name,
    half,
    promote,
)
from amp_lint.analysis.frames import Frame
from amp_lint.analysis.names import dotted_name
from amp_lint.analysis.outline import child_nodes
from amp_lint.analysis.regions import (
    AutocastRegion,
    default_dtype,
    region_arguments,
    region_from_call,
)
from amp_lint.analysis.torch_calls import TorchCalls
from amp_lint.analysis.training_setup import cast_precision
from amp_lint.analysis.values import UNKNOWN_VALUE, Origin, Value, join_values

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
_PYTHON_BUILTINS = frozenset(dir(builtins))
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


class Evaluator:
    def __init__(self, interpreter: Interpreter) -> None:
        self.interpreter = interpreter
        self.names = interpreter.facts.names
        self.index = interpreter.index
        self.torch_calls = TorchCalls(self)
        self.containers = Containers(self)
        self.calls = interpreter.calls

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
        if isinstance(node, cst.SimpleString):
            text = node.evaluated_value
            return Value(OTHER, text=text if isinstance(text, str) and len(text) < 64 else None)
        if isinstance(node, (cst.ConcatenatedString, cst.FormattedString)):
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

    def _name(self, node: cst.Name, frame: Frame) -> Value:
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
        if base.elements is not None and attribute in _TUPLE_FIELDS:
            found = base.element(_TUPLE_FIELDS[attribute])  # `x.max(dim=1).values`
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
        args = self.arguments(node, frame)
        region = region_from_call(node, self.names, self.interpreter.accelerate)
        if region is not None:
            return Value(OTHER, region=self._refined(region, node, frame))
        func = node.func
        qualified = self.names.qualified_name(func)
        if qualified is not None:
            followed = self.interpreter.cross_file.project_call(qualified, args, node, frame)
            if followed is not None:
                return followed
            if qualified in semantics.CONTAINER_MODULES:
                return self._container_module(qualified, node, frame)
            if qualified == "functools.partial" and args.positional and not args.starred:
                return self._partial(args)
            return self.torch_calls.qualified_call(qualified, node, frame)
        if isinstance(func, cst.Name):
            return self._name_call(func, args, node, frame)
        if isinstance(func, cst.Attribute):
            return self._method_call(func, args, node, frame)
        callee = self.evaluate(func, frame)  # `losses[name](...)`, `make()(x)`
        found = self.calls.call_value(callee, args, node, frame)
        return found if found is not None else self._opaque(callee, None, args, node, frame)

    def _refined(self, region: AutocastRegion, call: cst.Call, frame: Frame) -> AutocastRegion:
        """The region, with a device or dtype given through a variable read from it
        (`torch.autocast(DEVICE, dtype=AMP_DTYPE)` with module-level constants)."""
        device_node, dtype_node = region_arguments(call, region)
        device = region.device
        if device is None and device_node is not None:
            text = self.evaluate(device_node, frame).text
            device = text.split(":", 1)[0] if text else None
        dtype = region.dtype
        if dtype_node is not None and dtype is None:
            denoted = self.evaluate(dtype_node, frame).denotes
            if denoted is not None and denoted.kind is not DTypeKind.UNKNOWN:
                dtype = denoted.precision if denoted.is_half else denoted.kind.value
        elif dtype_node is None and device != region.device:
            dtype = default_dtype(device)
        if (device, dtype) == (region.device, region.dtype):
            return region
        return replace(region, device=device, dtype=dtype)

    def _name_call(self, func: cst.Name, args: Arguments, node: cst.Call, frame: Frame) -> Value:
        name = func.value
        callee = self._name(func, frame)
        found = self.calls.call_value(callee, args, node, frame)
        if found is not None:
            return found
        if name in self.index.classes:
            return Value(OTHER, instance_of=f"{LOCAL_PREFIX}.{name}")
        if name in ("float", "int", "abs") and node.args:
            inner = self.evaluate(node.args[0].value, frame)
            return Value(SCALAR, constant=_builtin_number(name, inner.constant, node.args[0]))
        if name in ("len", "round"):
            return Value(SCALAR)
        if name not in self.names.bindings and frame.env.get(name) is None:
            if name == "super":
                return self._super(frame)
            builtin = self.containers.builtin(name, node, frame)
            if builtin is not None:
                return builtin
            if name in _PYTHON_BUILTINS:
                return UNKNOWN_VALUE
        return self._opaque(callee, name, args, node, frame)

    def _super(self, frame: Frame) -> Value:
        """`super()`: the nearest base class, local or not, whose methods then run."""
        info = frame.self_class
        if info is None or not info.base_names:
            return UNKNOWN_VALUE
        local = self.index.classes.get(info.base_names[0])
        return Value(OTHER, instance_of=local.qualified if local else info.base_names[0])

    def _method_call(
        self, func: cst.Attribute, args: Arguments, node: cst.Call, frame: Frame
    ) -> Value:
        method = func.attr.value
        receiver_node = func.value
        receiver = self.evaluate(receiver_node, frame)
        if self._registers_buffer(receiver, method, node, frame):
            return Value(OTHER)
        callee = self.evaluate(func, frame)
        found = self.calls.call_value(callee, args, node, frame)  # self.fc(x), self.helper(x)
        if found is not None:
            return found
        if receiver.instance_of is not None:
            found = self.calls.call_method(receiver, method, args, node, frame)
            if found is not None:
                return found
            if self.index.class_for_qualified(receiver.instance_of) is not None:
                # `self.model(x)`: an attribute holding something amp-lint cannot see.
                return self._opaque(callee, dotted_name(func), args, node, frame)
            return UNKNOWN_VALUE
        dict_value = self.containers.dict_method(method, receiver)
        if dict_value is not None:
            return dict_value
        cast = self._model_cast(receiver, receiver_node, node, frame)
        if cast is not None:
            return cast
        receiver_name = dotted_name(receiver_node)
        if receiver.dtype.kind is DTypeKind.UNKNOWN and (
            method == "forward" or (receiver_name is not None and is_model_name(receiver_name))
        ):
            # `model.forward(x)`, `self.model.forward_loss(batch)`: a model's method.
            name = receiver_name if method == "forward" else f"{receiver_name}.{method}"
            return self.calls.opaque(node, name, args, frame, method=method)
        value = self.torch_calls.tensor_method(method, receiver, node, frame)
        if method in semantics.CONVERSION_METHODS or method in ("to", "type", "type_as"):
            from_half = receiver.dtype if receiver.dtype.is_half else None
            if value.dtype.kind is DTypeKind.INTEGER and from_half is not None:
                return Value(value.dtype, conversion=node, integer_from=from_half)
            return Value(value.dtype, conversion=node)
        return value

    def _model_cast(
        self, receiver: Value, receiver_node: cst.BaseExpression, node: cst.Call, frame: Frame
    ) -> Value | None:
        """`self.model = self.model.half()` of a model amp-lint cannot resolve: recorded, so
        that the project's modules run with half parameters; the module itself is returned."""
        precision = cast_precision(node, self.names)
        if precision is None:
            return None
        name = dotted_name(receiver_node)
        is_model = receiver.instance_of is not None and not receiver.instance_of.startswith(
            "torch."
        )
        if not is_model and not (
            receiver.dtype.kind is DTypeKind.UNKNOWN and name is not None and is_model_name(name)
        ):
            return None
        self.calls.cast_model(half(precision), node, frame)
        return receiver if receiver.instance_of is not None else UNKNOWN_VALUE

    def _opaque(
        self, callee: Value, name: str | None, args: Arguments, node: cst.Call, frame: Frame
    ) -> Value:
        """A call of something amp-lint knows nothing about (not a number, string or known
        object): a model it cannot see, whose result under autocast may be assumed."""
        if callee.dtype.kind is not DTypeKind.UNKNOWN and callee.instance_of is None:
            return UNKNOWN_VALUE
        return self.calls.opaque(node, name, args, frame)

    def _partial(self, args: Arguments) -> Value:
        """`partial(f, x, eps=1e-8)`: f, with those arguments given in advance."""
        function = args.positional[0]
        if function.function is None and function.instance_of is None:
            return UNKNOWN_VALUE
        given: list[tuple[str | None, Value]] = [(None, v) for v in args.positional[1:]]
        given += list(args.keywords)
        return replace(function, preset=(*function.preset, *given))

    def _registers_buffer(self, receiver: Value, method: str, node: cst.Call, frame: Frame) -> bool:
        """`self.register_buffer("mask", torch.zeros(n))` binds `self.mask`."""
        if method not in ("register_buffer", "register_parameter") or len(node.args) < 2:
            return False
        if self.index.class_for_qualified(receiver.instance_of) is None:
            return False
        name = node.args[0].value
        if not isinstance(name, cst.SimpleString) or not isinstance(name.evaluated_value, str):
            return False
        value = self.evaluate(node.args[1].value, frame)
        frame.env.set(f"self.{name.evaluated_value}", Value(value.dtype, constant=value.constant))
        return True

    def _container_module(self, qualified: str, node: cst.Call, frame: Frame) -> Value:
        """`nn.Sequential(a, b)`, `nn.ModuleList([...])`, `nn.ModuleDict({...})`: the
        modules inside, to call in turn or to index and iterate."""
        positional = [a for a in node.args if a.keyword is None]
        if not positional:
            return Value(OTHER, instance_of=qualified, elements=())
        first = self.evaluate(positional[0].value, frame)
        if qualified.endswith("Sequential"):
            if len(positional) == 1 and positional[0].star:
                return Value(OTHER, instance_of=qualified, each=first.iterated())
            if any(a.star for a in positional):
                return Value(OTHER, instance_of=qualified)
            layers = tuple(self.evaluate(a.value, frame) for a in positional)
            return Value(OTHER, instance_of=qualified, elements=layers)
        return Value(
            OTHER,
            instance_of=qualified,
            elements=first.elements,
            keys=first.keys,
            each=first.each,
        )


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
