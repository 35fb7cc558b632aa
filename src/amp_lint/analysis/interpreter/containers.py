"""Values travelling in containers: tuple, list and dict literals keep the value of each
element; subscripts, unpacking and `for` loops read them back; comprehensions give lists of
alike elements; `zip`, `enumerate`, `range`, `dict.items()` and friends iterate as Python
does. Tensors indexed or unpacked keep their dtype."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from amp_lint.analysis.interpreter.frames import Frame
from amp_lint.analysis.syntax.naming import is_activation_name
from amp_lint.analysis.syntax.outline import positional_arguments
from amp_lint.analysis.values.dtypes import OTHER, SCALAR, DTypeKind
from amp_lint.analysis.values.literals import number_literal, string_literal
from amp_lint.analysis.values.value import UNKNOWN_VALUE, Value, join_all

if TYPE_CHECKING:
    from amp_lint.analysis.interpreter.evaluator import Evaluator

# Tensor methods whose result is a sequence of tensors of the receiver's dtype.
_SPLITTING_METHODS = frozenset(["chunk", "split", "unbind", "tensor_split", "split_with_sizes"])
# Builtins that return their (first) argument's elements in another container or order.
_SAME_ELEMENTS = frozenset(["list", "tuple", "sorted", "reversed", "iter", "set", "frozenset"])


class Containers:
    def __init__(self, evaluator: Evaluator) -> None:
        self.evaluator = evaluator

    def literal(self, node: cst.BaseExpression, frame: Frame) -> Value:
        """`(a, b)`, `[a, b]`, `{"k": a}`; a `*rest` inside gives up on positions."""
        evaluate = self.evaluator.evaluate
        if isinstance(node, cst.Dict):
            keys: list[str | int | None] = []
            values: list[Value] = []
            for element in node.elements:
                if not isinstance(element, cst.DictElement):
                    evaluate(element.value, frame)
                    return Value(OTHER)  # `{**other}`: keys unknown
                keys.append(_constant_key(element.key))
                evaluate(element.key, frame)
                values.append(evaluate(element.value, frame))
            return Value(OTHER, elements=tuple(values), keys=tuple(keys))
        assert isinstance(node, (cst.Tuple, cst.List, cst.Set))
        items = [evaluate(element.value, frame) for element in node.elements]
        if any(isinstance(element, cst.StarredElement) for element in node.elements):
            alike = [i.iterated() or i for i in items]
            return Value(OTHER, each=join_all(alike)) if alike else Value(OTHER)
        if isinstance(node, cst.Set):
            return Value(OTHER, each=join_all(items)) if items else Value(OTHER)
        return Value(OTHER, elements=tuple(items))

    def comprehension(self, node: cst.BaseComp, frame: Frame) -> Value:
        """`[f(x) for x in xs]`: a list whose elements are alike, evaluated in the
        comprehension's own scope."""
        saved = frame.env
        frame.env = saved.copy()
        try:
            clause: cst.CompFor | None = node.for_in
            while clause is not None:
                iterated = self.evaluator.evaluate(clause.iter, frame).iterated()
                target_value = iterated or UNKNOWN_VALUE
                self.evaluator.interpreter.bind_target(clause.target, target_value, frame)
                for condition in clause.ifs:
                    self.evaluator.evaluate(condition.test, frame)
                clause = clause.inner_for_in
            if isinstance(node, cst.DictComp):
                self.evaluator.evaluate(node.key, frame)
                return Value(OTHER, each=self.evaluator.evaluate(node.value, frame))
            assert isinstance(node, (cst.ListComp, cst.SetComp, cst.GeneratorExp))
            return Value(OTHER, each=self.evaluator.evaluate(node.elt, frame))
        finally:
            frame.env = saved

    def subscript(self, node: cst.Subscript, base: Value, frame: Frame) -> Value:
        """`x[i]`: a container's element, or a tensor's dtype."""
        indices = [e.slice for e in node.slice]
        for index in indices:
            if isinstance(index, cst.Index):
                self.evaluator.evaluate(index.value, frame)
            elif isinstance(index, cst.Slice):
                for part in (index.lower, index.upper, index.step):
                    if part is not None:
                        self.evaluator.evaluate(part, frame)
        single = indices[0] if len(indices) == 1 else None
        if base.elements is not None or base.each is not None:
            if isinstance(single, cst.Slice):
                return _sliced(base, single, frame, self.evaluator)
            key = _constant_key(single.value) if isinstance(single, cst.Index) else None
            found = base.element(key)
            return found if found is not None else UNKNOWN_VALUE
        if base.dtype.assumed and not _key_may_be_activation(single):
            return UNKNOWN_VALUE  # `outputs["loss"]` of an assumed model output
        if base.dtype.is_known_tensor or base.dtype.kind is DTypeKind.SCALAR:
            if base.integer_from is not None:  # indices computed in half, sliced
                return Value(base.dtype, integer_from=base.integer_from, conversion=base.conversion)
            return Value(base.dtype)
        return UNKNOWN_VALUE

    def builtin(self, name: str, node: cst.Call, frame: Frame) -> Value | None:
        """`zip`, `enumerate`, `range`, `list(...)` and the like; None for other names."""
        args = [self.evaluator.evaluate(arg.value, frame) for arg in node.args]
        if name == "range":
            return Value(OTHER, each=Value(SCALAR))
        if name == "zip" and args:
            parts = tuple(a.iterated() or UNKNOWN_VALUE for a in args)
            return Value(OTHER, each=Value(OTHER, elements=parts))
        if name == "enumerate" and args:
            item = args[0].iterated() or UNKNOWN_VALUE
            return Value(OTHER, each=Value(OTHER, elements=(Value(SCALAR), item)))
        if name in _SAME_ELEMENTS and args:
            if name in ("list", "tuple") and args[0].elements is not None:
                return Value(OTHER, elements=args[0].elements)
            items = args[0].iterated()
            return Value(OTHER, each=items) if items is not None else Value(OTHER)
        scalars = all(a.dtype.kind is DTypeKind.SCALAR for a in args)
        if name in ("max", "min", "sum") and args and scalars:
            return Value(SCALAR)
        return None

    def stored(self, container: Value, key: cst.BaseSlice, value: Value) -> Value | None:
        """The container after `container[key] = value` (a dict or list, not a tensor)."""
        if container.elements is None and container.each is None:
            return None
        constant = _constant_key(key.value) if isinstance(key, cst.Index) else None
        if container.keys is not None and constant is not None:
            if constant in container.keys:
                index = container.keys.index(constant)
                elements = list(container.elements or ())
                elements[index] = value
                return Value(OTHER, elements=tuple(elements), keys=container.keys)
            return Value(
                OTHER,
                elements=(*(container.elements or ()), value),
                keys=(*container.keys, constant),
            )
        # An unknown key (`cache[name] = window`): any element may now be this value.
        known = [*(container.elements or ()), *((container.each,) if container.each else ())]
        return Value(OTHER, each=join_all([*known, value]))

    def dict_method(self, method: str, receiver: Value) -> Value | None:
        """`d.items()`, `d.values()`, `d.keys()`, `d.get(k)` of a dict of known values."""
        if receiver.keys is None or receiver.elements is None:
            return None
        values = join_all(list(receiver.elements)) if receiver.elements else UNKNOWN_VALUE
        if method == "items":
            return Value(OTHER, each=Value(OTHER, elements=(Value(OTHER), values)))
        if method == "values":
            return Value(OTHER, each=values)
        if method == "keys":
            return Value(OTHER, each=Value(OTHER))
        return None

    def unpacked(
        self, value: Value, node: cst.BaseExpression | None, count: int, frame: Frame
    ) -> list[Value]:
        """Values for `a, b = ...`: element-wise for containers of that length, alike
        elements, `x.chunk(n)` and friends, `h, w = x.shape`; unknown otherwise."""
        if value.elements is not None and len(value.elements) == count and value.keys is None:
            return list(value.elements)
        if value.each is not None:
            return [value.each] * count
        if value.dtype.kind is DTypeKind.NONE:
            return [value] * count  # `cache_a, cache_kv = cache` where cache may be None
        if value.dtype.assumed:
            # `y_hat, attn, ... = net_g(x)`: the parts of an opaque model's output are taken
            # to be its activations too (names that say otherwise drop it when bound).
            return [Value(value.dtype)] * count
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            method = node.func.attr.value
            if method in _SPLITTING_METHODS:
                # `x.chunk(3)`, or `torch.chunk(x, 3)`
                qualified = self.evaluator.names.qualified_name(node.func)
                positional = positional_arguments(node)
                tensor = positional[0] if qualified and positional else node.func.value
                receiver = self.evaluator.evaluate(tensor, frame).dtype
                if receiver.is_known_tensor:
                    return [Value(receiver)] * count
            if method == "size" and not node.args:
                return [Value(SCALAR)] * count
        if isinstance(node, cst.Attribute) and node.attr.value == "shape":
            return [Value(SCALAR)] * count
        return [UNKNOWN_VALUE] * count


def _constant_key(node: cst.BaseExpression | None) -> str | int | None:
    if isinstance(node, cst.SimpleString):
        return string_literal(node)
    if isinstance(node, cst.Integer):
        number = number_literal(node) if node.value.isdigit() else None
        return number if isinstance(number, int) else None
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        inner = _constant_key(node.expression)
        return -inner if isinstance(inner, int) else None
    return None


def _key_may_be_activation(index: cst.BaseSlice | None) -> bool:
    """Not `["loss"]` or `["metrics"]`: a string key that names no loss, or an index."""
    if not isinstance(index, cst.Index):
        return True
    key = _constant_key(index.value)
    return not isinstance(key, str) or is_activation_name(key)


def _sliced(base: Value, index: cst.Slice, frame: Frame, evaluator: Evaluator) -> Value:
    if base.elements is None or base.keys is not None:
        return base
    bounds: list[int | None] = []
    for part in (index.lower, index.upper, index.step):
        constant = evaluator.evaluate(part, frame).constant if part is not None else None
        if part is not None and not isinstance(constant, int):
            return Value(OTHER, each=base.iterated())
        bounds.append(constant if isinstance(constant, int) else None)
    return Value(OTHER, elements=base.elements[bounds[0] : bounds[1] : bounds[2]])
