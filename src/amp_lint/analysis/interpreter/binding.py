"""Binding values to assignment targets: names and attributes, tuples unpacked, stores into
containers (`cache[key] = window`). A value assumed to be half (an opaque model's output)
bound to a loss or a metric (`loss = model(x)`, a name later passed to `.backward()`) drops
the assumption: it does not hold for it."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import libcst as cst

from amp_lint.analysis.interpreter.frames import Frame
from amp_lint.analysis.scaler.losses import backpropagated_names
from amp_lint.analysis.syntax.names import dotted_name
from amp_lint.analysis.syntax.naming import is_activation_name
from amp_lint.analysis.values.value import Value

if TYPE_CHECKING:
    from amp_lint.analysis.interpreter.interpreter import Interpreter


class Binding:
    def __init__(self, interpreter: Interpreter) -> None:
        self.interpreter = interpreter
        # Names a function passes to `.backward()` or `scaler.scale()`: losses, by function.
        self.loss_names: dict[int, frozenset[str]] = {}

    def bind(
        self,
        target: cst.BaseExpression,
        value: Value,
        value_node: cst.BaseExpression | None,
        frame: Frame,
    ) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            parts = self.interpreter.evaluator.unpacked(
                value, value_node, len(target.elements), frame
            )
            for element, part in zip(target.elements, parts):
                self.bind(element.value, part, None, frame)
            return
        if isinstance(target, cst.Subscript) and len(target.slice) == 1:
            self._store(target, value, frame)
            return
        name = dotted_name(target)
        if name is None:
            return
        if value.dtype.assumed and not self._may_hold_activation(name, frame):
            value = replace(value, dtype=value.dtype.known())
        frame.env.set(name, value)

    def _store(self, target: cst.Subscript, value: Value, frame: Frame) -> None:
        """`cache[key] = value` into a dict or list held in a variable: later reads in this
        frame see the value (a module-level cache is shadowed here, not changed for others:
        each calling context fills it with its own values)."""
        name = dotted_name(target.value)
        if name is None:
            return
        container = frame.env.get(name) or self.interpreter.module_env.get(name)
        if container is None:
            return
        stored = self.interpreter.evaluator.containers.stored(
            container, target.slice[0].slice, value
        )
        if stored is not None:
            frame.env.set(name, stored)

    def _may_hold_activation(self, name: str, frame: Frame) -> bool:
        """An assumed half value bound to `loss`, `metrics`, or a name later passed to
        `.backward()` is no activation: the assumption does not hold for it."""
        if not is_activation_name(name):
            return False
        function = frame.function
        if function is None:
            return True
        names = self.loss_names.get(id(function))
        if names is None:
            names = backpropagated_names(function)
            self.loss_names[id(function)] = names
        return name not in names
