"""The value of a call expression: a region opened (`torch.autocast(...)`), a call into
another linted file, a torch function or tensor method, a function, class or instance of
this module, a builtin, a container module (`nn.Sequential`), `functools.partial`, or a call
amp-lint cannot see into (dispatch.py)."""

from __future__ import annotations

import builtins
import math
from dataclasses import replace
from typing import TYPE_CHECKING

import libcst as cst

from amp_lint.analysis.interpreter.arguments import Arguments
from amp_lint.analysis.interpreter.frames import Frame
from amp_lint.analysis.regions.finder import (
    AutocastRegion,
    default_dtype,
    region_arguments,
    region_from_call,
)
from amp_lint.analysis.syntax.calls import LOCAL_PREFIX
from amp_lint.analysis.syntax.names import dotted_name
from amp_lint.analysis.syntax.naming import is_loss_name, is_model_name
from amp_lint.analysis.training.training_setup import cast_precision
from amp_lint.analysis.values import semantics
from amp_lint.analysis.values.dtypes import OTHER, SCALAR, DTypeKind, half
from amp_lint.analysis.values.literals import bounded, string_literal
from amp_lint.analysis.values.value import UNKNOWN_VALUE, Value

if TYPE_CHECKING:
    from amp_lint.analysis.interpreter.evaluator import Evaluator

_PYTHON_BUILTINS = frozenset(dir(builtins))


class CallExpressions:
    def __init__(self, evaluator: Evaluator) -> None:
        self.evaluator = evaluator
        self.interpreter = evaluator.interpreter
        self.names = evaluator.names
        self.index = evaluator.index
        self.calls = evaluator.interpreter.calls
        self.torch_calls = evaluator.torch_calls
        self.containers = evaluator.containers

    def evaluate(self, node: cst.Call, frame: Frame) -> Value:
        args = self.evaluator.arguments(node, frame)
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
            if qualified.split(".", 1)[0] not in _KNOWN_LIBRARIES:
                # `util.replace_masked_values(x, mask, -1e7)`: a function of a library
                # that is not linted.
                self.interpreter.dispatch.opaque_sites.add(id(node))
            return self.torch_calls.qualified_call(qualified, node, frame)
        if isinstance(func, cst.Name):
            return self._name_call(func, args, node, frame)
        if isinstance(func, cst.Attribute):
            return self._method_call(func, args, node, frame)
        callee = self.evaluator.evaluate(func, frame)  # `losses[name](...)`, `make()(x)`
        found = self.calls.call_value(callee, args, node, frame)
        return found if found is not None else self._opaque(callee, None, args, node, frame)

    def _refined(self, region: AutocastRegion, call: cst.Call, frame: Frame) -> AutocastRegion:
        """The region, with a device or dtype given through a variable read from it
        (`torch.autocast(DEVICE, dtype=AMP_DTYPE)` with module-level constants)."""
        device_node, dtype_node = region_arguments(call, region)
        device = region.device
        if device is None and device_node is not None:
            text = self.evaluator.evaluate(device_node, frame).text
            device = text.split(":", 1)[0] if text else None
        dtype = region.dtype
        if dtype_node is not None and dtype is None:
            denoted = self.evaluator.evaluate(dtype_node, frame).denotes
            if denoted is not None and denoted.kind is not DTypeKind.UNKNOWN:
                dtype = denoted.precision if denoted.is_half else denoted.kind.value
        elif dtype_node is None and device != region.device:
            dtype = default_dtype(device)
        if (device, dtype) == (region.device, region.dtype):
            return region
        return replace(region, device=device, dtype=dtype)

    def _name_call(self, func: cst.Name, args: Arguments, node: cst.Call, frame: Frame) -> Value:
        name = func.value
        callee = self.evaluator.name_value(func, frame)
        found = self.calls.call_value(callee, args, node, frame)
        if found is not None:
            return found
        if name in self.index.classes:
            return Value(OTHER, instance_of=f"{LOCAL_PREFIX}.{name}")
        if name in ("float", "int", "abs") and node.args:
            inner = self.evaluator.evaluate(node.args[0].value, frame)
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
        receiver = self.evaluator.evaluate(receiver_node, frame)
        if self._registers_buffer(receiver, method, node, frame):
            return Value(OTHER)
        callee = self.evaluator.evaluate(func, frame)
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
            method == "forward"
            or (
                receiver_name is not None
                and (is_model_name(receiver_name) or is_loss_name(receiver_name))
            )
        ):
            # `model.forward(x)`, `self.model.forward_loss(batch)`, `criterion.loss(out, y)`:
            # a method of a model or loss amp-lint cannot resolve.
            name = receiver_name if method == "forward" else f"{receiver_name}.{method}"
            return self.interpreter.dispatch.opaque(node, name, args, frame, method=method)
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
        self.interpreter.dispatch.cast_model(half(precision), node, frame)
        return receiver if receiver.instance_of is not None else UNKNOWN_VALUE

    def _opaque(
        self, callee: Value, name: str | None, args: Arguments, node: cst.Call, frame: Frame
    ) -> Value:
        """A call of something amp-lint knows nothing about (not a number, string or known
        object): a model it cannot see, whose result under autocast may be assumed."""
        if callee.dtype.kind is not DTypeKind.UNKNOWN and callee.instance_of is None:
            return UNKNOWN_VALUE
        return self.interpreter.dispatch.opaque(node, name, args, frame)

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
        name = string_literal(node.args[0].value)
        if name is None:
            return False
        value = self.evaluator.evaluate(node.args[1].value, frame)
        frame.env.set(f"self.{name}", Value(value.dtype, constant=value.constant))
        return True

    def _container_module(self, qualified: str, node: cst.Call, frame: Frame) -> Value:
        """`nn.Sequential(a, b)`, `nn.ModuleList([...])`, `nn.ModuleDict({...})`: the
        modules inside, to call in turn or to index and iterate."""
        positional = [a for a in node.args if a.keyword is None]
        if not positional:
            return Value(OTHER, instance_of=qualified, elements=())
        first = self.evaluator.evaluate(positional[0].value, frame)
        if qualified.endswith("Sequential"):
            if len(positional) == 1 and positional[0].star:
                if first.elements is not None and first.keys is None:  # `*layers`, a list
                    return Value(OTHER, instance_of=qualified, elements=first.elements)
                return Value(OTHER, instance_of=qualified, each=first.iterated())
            if any(a.star for a in positional):
                return Value(OTHER, instance_of=qualified)
            layers = tuple(self.evaluator.evaluate(a.value, frame) for a in positional)
            return Value(OTHER, instance_of=qualified, elements=layers)
        return Value(
            OTHER,
            instance_of=qualified,
            elements=first.elements,
            keys=first.keys,
            each=first.each,
        )


# Libraries whose functions amp-lint models (torch) or that hold no tensors worth a guess.
_KNOWN_LIBRARIES = frozenset(["torch", "math", "numpy", "builtins", "functools", "typing"])


def _builtin_number(name: str, constant: float | None, arg: cst.Arg) -> float | None:
    if constant is not None:
        if name == "abs":
            return abs(constant)
        if name == "float" or math.isinf(constant) or math.isnan(constant):
            return float(constant)
        return bounded(int(constant))
    text = string_literal(arg.value)
    if name == "float" and text is not None:
        try:
            return float(text)
        except ValueError:
            return None
    return None
