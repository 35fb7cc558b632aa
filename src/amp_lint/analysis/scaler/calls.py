"""Which of the module's own functions a call in the GradScaler order walk (scaler_flow.py)
runs: a function, a method of `self` (inherited from a class of the module too), a method
of an object the module builds from one of its own classes (`self.engine = AmpEngine()` in
`__init__`, or `engine = AmpEngine()` in the calling function) and called through it
(`self.engine.backward_loss(loss)`, `engine.optimizer_step(opt)`).

An object is followed only when what it holds is certain: one of the module's classes built
by a call the module makes. An object received as a parameter (`runner.engine`, a framework's
plugin) could be any class; its methods are not guessed."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from amp_lint.analysis.syntax.calls import ClassInfo, ModuleIndex
from amp_lint.analysis.syntax.names import dotted_name
from amp_lint.analysis.syntax.outline import walk_function_statements

# Levels of base classes searched for an inherited method.
_MAX_BASES = 8


@dataclass(frozen=True)
class CallTarget:
    function: cst.FunctionDef
    owner: ClassInfo | None
    # What `self` is inside the target, spelled in the caller's terms (`self.engine` for
    # `self.engine.backward_loss()`); None when `self` is the caller's own `self` or there
    # is none.
    self_as: cst.BaseExpression | None = None


class CallTargets:
    def __init__(self, index: ModuleIndex) -> None:
        self.index = index
        # id(function) -> local name -> the module's class it was built from.
        self._locals: dict[int, dict[str, ClassInfo]] = {}

    def resolve(
        self,
        call: cst.Call,
        owner: ClassInfo | None,
        function: cst.FunctionDef | None,
        self_as: cst.BaseExpression | None,
    ) -> CallTarget | None:
        func = call.func
        if isinstance(func, cst.Name):
            found = self.index.functions.get(func.value)
            return CallTarget(found, None) if found is not None else None
        if not isinstance(func, cst.Attribute):
            return None
        receiver = func.value
        method = func.attr.value
        if isinstance(receiver, cst.Name) and receiver.value == "self":
            if owner is None:
                return None
            return self._method(owner, method, self_as)
        instance = self.instance_class(receiver, owner, function)
        if instance is None:
            return None
        return self._method(instance, method, in_caller_terms(receiver, self_as))

    def instance_class(
        self,
        receiver: cst.BaseExpression,
        owner: ClassInfo | None,
        function: cst.FunctionDef | None,
    ) -> ClassInfo | None:
        """The module's class `receiver` was built from: `self.NAME` assigned in `__init__`,
        or a local name assigned in `function` (every assignment the same class)."""
        name = dotted_name(receiver)
        if name is None:
            return None
        if name.startswith("self.") and name.count(".") == 1:
            if owner is None:
                return None
            built = owner.attribute_calls.get(name)
            return self._class_built_by(built) if built is not None else None
        if "." in name or function is None:
            return None
        return self._local_instances(function).get(name)

    def _class_built_by(self, call: cst.Call) -> ClassInfo | None:
        func = call.func
        return self.index.classes.get(func.value) if isinstance(func, cst.Name) else None

    def _local_instances(self, function: cst.FunctionDef) -> dict[str, ClassInfo]:
        known = self._locals.get(id(function))
        if known is not None:
            return known
        built: dict[str, ClassInfo | None] = {}
        for statement in walk_function_statements(function):
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                if not isinstance(small, cst.Assign):
                    continue
                cls = (
                    self._class_built_by(small.value) if isinstance(small.value, cst.Call) else None
                )
                for target in small.targets:
                    if isinstance(target.target, cst.Name):
                        name = target.target.value
                        # A name bound to two things holds neither for certain.
                        built[name] = cls if built.get(name, cls) is cls else None
        found = {name: cls for name, cls in built.items() if cls is not None}
        self._locals[id(function)] = found
        return found

    def _method(
        self, cls: ClassInfo, method: str, self_as: cst.BaseExpression | None
    ) -> CallTarget | None:
        """`method` of `cls` or of the first of its module-defined bases that has it."""
        current: ClassInfo | None = cls
        for _ in range(_MAX_BASES):
            if current is None:
                return None
            found = current.methods.get(method)
            if found is not None:
                return CallTarget(found, cls, self_as)
            bases = [self.index.classes.get(base) for base in current.base_names]
            current = next((base for base in bases if base is not None), None)
        return None


def in_caller_terms(
    node: cst.BaseExpression, self_as: cst.BaseExpression | None
) -> cst.BaseExpression:
    """`node` with a leading `self` replaced by what `self` is in the caller."""
    if self_as is None:
        return node
    if isinstance(node, cst.Name):
        return self_as if node.value == "self" else node
    if isinstance(node, cst.Attribute):
        return node.with_changes(value=in_caller_terms(node.value, self_as))
    return node
