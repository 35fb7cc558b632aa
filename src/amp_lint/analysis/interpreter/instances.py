"""What `self.NAME` holds in the methods of a class defined in the module: the values its
`__init__` binds (and the `__init__`s of its bases in the module, bases first), run once per
class with its parameters' defaults (`self.eps = eps` where `eps=1e-8`), including buffers
(`self.register_buffer("mask", torch.zeros(n))`) and tuple assignments. Its methods, looked
up as attributes (`self.loss_labels`), are bound to the instance."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from amp_lint.analysis.interpreter.frames import Frame
from amp_lint.analysis.syntax.calls import ClassInfo
from amp_lint.analysis.values.dtypes import OTHER, SCALAR, DTypeKind
from amp_lint.analysis.values.value import Env, Value

if TYPE_CHECKING:
    from amp_lint.analysis.interpreter.interpreter import Interpreter


class InstanceAttributes:
    def __init__(self, interpreter: Interpreter) -> None:
        self.interpreter = interpreter
        self.by_class: dict[str, Env] = {}
        self.in_progress: set[str] = set()

    def attribute(self, info: ClassInfo, name: str) -> Value | None:
        """`instance.name` for an instance of `info` (`name` without "self.")."""
        found = self.bound(info).get(f"self.{name}")
        if found is not None:
            if found.dtype.kind is DTypeKind.UNKNOWN and f"self.{name}" in info.scalar_attributes:
                return Value(SCALAR)
            return found
        if f"self.{name}" in info.scalar_attributes:
            return Value(SCALAR)
        method = self.interpreter.find_method(info, name)
        if method is not None:
            return Value(OTHER, function=method, bound_to=info.qualified)
        return None

    def bound(self, info: ClassInfo) -> Env:
        """The attributes `__init__` binds, as "self.NAME" entries."""
        found = self.by_class.get(info.name)
        if found is not None:
            return found
        if info.name in self.in_progress:
            return Env()
        self.in_progress.add(info.name)
        attributes = Env()
        for cls in reversed(self.interpreter.method_resolution_order(info)):
            init = cls.methods.get("__init__")
            if init is not None:
                attributes = self._run_init(info, init, attributes)
        self.in_progress.discard(info.name)
        self.by_class[info.name] = attributes
        return attributes

    def _run_init(self, info: ClassInfo, init: cst.FunctionDef, inherited: Env) -> Env:
        frame = Frame(env=Env(), regions=(), self_class=info, function=init)
        frame.env.set("self", Value(OTHER, instance_of=info.qualified))
        for name, value in inherited.values.items():
            frame.env.values[name] = value
        self.interpreter.calls.bind_values(init, [], {}, frame, skip_self=True, caller_seen=False)
        # Values only: `__init__` was analysed on its own, and is reported from there.
        with self.interpreter.observers_paused():
            self.interpreter.exec_suite(init.body, frame)
        return Env(
            {name: value for name, value in frame.env.values.items() if name.startswith("self.")}
        )
