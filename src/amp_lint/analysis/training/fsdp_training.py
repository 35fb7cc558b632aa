"""Which FSDP wraps of a module are trained there: AMP309 reports a float16 policy only for a
model that runs backward, not for one wrapped to load a checkpoint or to evaluate.

A wrap counts as trained when the model it returns (the name or attribute it is assigned to;
for FSDP2's in-place `fully_shard` also the module it is given, or the model whose layers a
loop hands it) is

- called (`model(x)`, `model.forward(x)`) in a function that calls backward, or, for a module
  level name or an attribute (`self.model`), in any function of the module that does;
- passed to a function or class of the module that calls backward (`train(model, ...)`);
- returned by its function: then whatever the module binds a call of that function to is
  followed the same way; a builder that the module never calls counts as trained when the
  module calls backward anywhere (its caller lives elsewhere).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import libcst as cst

from amp_lint.analysis.syntax.names import ModuleNames, dotted_name
from amp_lint.analysis.training.fsdp_precision import FSDP2, Wrap
from amp_lint.analysis.training.training_setup import Scope, backpropagated_tensor, scopes

# How many builder functions deep a returned model is followed.
_DEPTH = 3


def trained_wraps(module: cst.Module, names: ModuleNames, wraps: Iterable[Wrap]) -> set[int]:
    """The ids of the wrap calls whose model the module trains."""
    index = _TrainingIndex(module, names)
    return {id(wrap.call) for wrap in wraps if index.trains_wrap(wrap)}


class _TrainingIndex:
    def __init__(self, module: cst.Module, names: ModuleNames) -> None:
        self.scopes = scopes(module)
        self.module_scope = self.scopes[0]
        self.training = {
            id(scope)
            for scope in self.scopes
            if any(backpropagated_tensor(call, names) is not None for call in scope.calls())
        }
        # Function and class names whose code calls backward (a method counts for its class).
        self.trainers: set[str] = set()
        for scope in self.scopes:
            if id(scope) in self.training and isinstance(scope.node, cst.FunctionDef):
                self.trainers.add(scope.node.name.value)
                if scope.owner is not None:
                    self.trainers.add(scope.owner.name.value)
        self.scope_of_call = {id(call): scope for scope in self.scopes for call in scope.calls()}

    def trains_wrap(self, wrap: Wrap) -> bool:
        scope = self.scope_of_call.get(id(wrap.call))
        if scope is None:
            return False
        return self._trains_result(wrap.call, scope, _DEPTH, fully_shard=wrap.api == FSDP2)

    def _trains_result(
        self, call: cst.Call, scope: Scope, depth: int, *, fully_shard: bool = False
    ) -> bool:
        """Whether the model `call` returns (or shards in place) is trained."""
        targets = list(_bound_to(call, scope))
        if fully_shard and call.args:
            targets += _sharded_models(call.args[0].value, scope)
        if any(self._trains_target(target, scope, depth) for target in targets):
            return True
        if _returned(call, scope) or self._passed_to_trainer(call, scope):
            return self._trains_returned(scope, depth)
        return False

    def _trains_target(self, target: str, scope: Scope, depth: int) -> bool:
        if id(scope) in self.training and _drives(scope, target):
            return True
        if self._passes_to_trainer(scope, target):
            return True
        shared = scope is self.module_scope or "." in target  # a global, or `self.model`
        if shared and any(
            id(other) in self.training and _drives(other, target) for other in self.scopes
        ):
            return True
        if any(isinstance(node, cst.Return) and _is(node.value, target) for node in scope.nodes()):
            return self._trains_returned(scope, depth)
        return False

    def _trains_returned(self, scope: Scope, depth: int) -> bool:
        """A model returned by the scope's function: trained where the module binds a call of
        that function to a trained name; when the module never calls it, whenever the module
        trains at all."""
        if not isinstance(scope.node, cst.FunctionDef) or depth <= 0:
            return False
        builder = scope.node.name.value
        uses = [
            (call, other)
            for other in self.scopes
            for call in other.calls()
            if _callee_name(call) == builder
        ]
        if not uses:
            return bool(self.training)
        return any(self._trains_result(call, other, depth - 1) for call, other in uses)

    def _passes_to_trainer(self, scope: Scope, target: str) -> bool:
        return any(
            _callee_name(call) in self.trainers and any(_is(arg.value, target) for arg in call.args)
            for call in scope.calls()
        )

    def _passed_to_trainer(self, call: cst.Call, scope: Scope) -> bool:
        """`train(build_model(), ...)`: the call's result goes straight to a trainer."""
        return any(
            _callee_name(outer) in self.trainers and any(arg.value is call for arg in outer.args)
            for outer in scope.calls()
        )


def _bound_to(call: cst.Call, scope: Scope) -> Iterator[str]:
    """The names and attributes (`self.model`) the call's result is assigned to."""
    for node in scope.nodes():
        if isinstance(node, cst.Assign) and node.value is call:
            for target in node.targets:
                name = dotted_name(target.target)
                if name is not None:
                    yield name
        elif isinstance(node, cst.AnnAssign) and node.value is call:
            name = dotted_name(node.target)
            if name is not None:
                yield name


def _sharded_models(argument: cst.BaseExpression, scope: Scope) -> list[str]:
    """The model `fully_shard(argument)` shards in place: the argument's root name, and for a
    loop variable (`for layer in model.layers`) the root of what the loop walks."""
    root = _root_name(argument)
    if root is None:
        return []
    found = [root]
    for node in scope.nodes():
        if isinstance(node, cst.For) and dotted_name(node.target) == root:
            walked = _root_name(node.iter)
            if walked is not None:
                found.append(walked)
    return found


def _root_name(expression: cst.BaseExpression) -> str | None:
    while isinstance(expression, (cst.Attribute, cst.Subscript, cst.Call)):
        expression = expression.func if isinstance(expression, cst.Call) else expression.value
    return expression.value if isinstance(expression, cst.Name) else None


def _returned(call: cst.Call, scope: Scope) -> bool:
    return any(isinstance(node, cst.Return) and node.value is call for node in scope.nodes())


def _drives(scope: Scope, target: str) -> bool:
    """Whether the scope runs the model: `model(x)` or `model.forward(x)`."""
    return any(dotted_name(call.func) in (target, f"{target}.forward") for call in scope.calls())


def _is(expression: cst.BaseExpression | None, target: str) -> bool:
    return expression is not None and dotted_name(expression) == target


def _callee_name(call: cst.Call) -> str | None:
    """`train` for `train(...)`, `self.train(...)` and `Trainer(...)`."""
    if isinstance(call.func, cst.Name):
        return call.func.value
    func = call.func
    if (
        isinstance(func, cst.Attribute)
        and isinstance(func.value, cst.Name)
        and func.value.value in ("self", "cls")
    ):
        return func.attr.value
    return None
