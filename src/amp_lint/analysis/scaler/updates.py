"""AMP303's question: is a `scaler.step(optimizer)` followed by `scaler.update()`?

A step in a loop needs an update in that loop's body; a loop over the optimizers the step goes
through is not that loop (the update belongs after it). A step outside any loop lacks its
update only when neither its function nor the module calls one and the function runs once per
training step (its name says so, or a loop calls it). Calls to the module's own functions are
followed, as the walk follows them.
"""

from __future__ import annotations

import libcst as cst

from amp_lint.analysis.scaler.branches import names_in
from amp_lint.analysis.scaler.calls import CallTargets
from amp_lint.analysis.scaler.hazards import MAX_DEPTH, ScalerFlow, ScalerHazard, WalkContext
from amp_lint.analysis.scaler.names import PER_STEP_WORDS, all_calls, same_scaler
from amp_lint.analysis.syntax.calls import ClassInfo, ModuleIndex
from amp_lint.analysis.syntax.module import ModuleFacts
from amp_lint.analysis.syntax.outline import walk_statements


class UpdateChecks:
    """Records a "no_update" hazard in the walk's ScalerFlow for each `scaler.step(optimizer)`
    that no `scaler.update()` follows where it should."""

    def __init__(
        self, facts: ModuleFacts, index: ModuleIndex, targets: CallTargets, flow: ScalerFlow
    ) -> None:
        self.facts = facts
        self.index = index
        self.targets = targets
        self.flow = flow
        self._called_in_loops: set[str] | None = None

    def record_step(self, call: cst.Call, ctx: WalkContext) -> None:
        assert isinstance(call.func, cst.Attribute)
        scaler = call.func.value
        loop, optimizer_loop = self.innermost_loop(call, ctx.path)
        if loop is not None:
            if self.reaches_update(loop.body, scaler, ctx.owner, 0):
                return
            detail = "after_loop" if self.function_updates(ctx, scaler) else "never"
        else:
            if self.function_updates(ctx, scaler) or self.module_updates(scaler):
                return
            if not self.per_step(ctx.function):
                return
            detail = "never"
        self.flow.hazards.append(
            ScalerHazard(
                "no_update",
                call,
                line=ctx.line,
                function=ctx.function,
                path=ctx.path,
                detail=detail,
                optimizer_loop=optimizer_loop,
            )
        )

    def innermost_loop(
        self, call: cst.Call, path: tuple[cst.CSTNode, ...]
    ) -> tuple[cst.For | cst.While | None, cst.For | None]:
        """The loop that runs the step once per iteration, and the outermost loop over
        optimizers inside it (`for optimizer in optimizers: scaler.step(optimizer)`)."""
        used = {n.value for n in names_in(call.args[0].value)} if call.args else set()
        optimizer_loop: cst.For | None = None
        for node in reversed(path):
            if isinstance(node, cst.While):
                return node, optimizer_loop
            if isinstance(node, cst.For):
                bound = {n.value for n in names_in(node.target)}
                if bound & used:
                    optimizer_loop = node
                    continue
                return node, optimizer_loop
        return None, optimizer_loop

    def function_updates(self, ctx: WalkContext, scaler: cst.BaseExpression) -> bool:
        body: cst.CSTNode = ctx.function.body if ctx.function is not None else self.facts.module
        return self.reaches_update(body, scaler, ctx.owner, 0)

    def reaches_update(
        self, node: cst.CSTNode, scaler: cst.BaseExpression, owner: ClassInfo | None, depth: int
    ) -> bool:
        for call in all_calls(node):
            func = call.func
            if (
                isinstance(func, cst.Attribute)
                and func.attr.value == "update"
                and same_scaler(func.value, scaler)
            ):
                return True
            target = self.targets.resolve(call, owner, None, None) if depth < MAX_DEPTH else None
            if (
                target is not None
                and target.function is not node
                and self.reaches_update(target.function.body, scaler, target.owner, depth + 1)
            ):
                return True
        return False

    def module_updates(self, scaler: cst.BaseExpression) -> bool:
        return self.reaches_update(self.facts.module, scaler, None, MAX_DEPTH)

    def per_step(self, function: cst.FunctionDef | None) -> bool:
        if function is None:
            return False
        name = function.name.value.lower()
        if any(word in name for word in PER_STEP_WORDS):
            return True
        return function.name.value in self.called_in_loops()

    def called_in_loops(self) -> set[str]:
        if self._called_in_loops is not None:
            return self._called_in_loops
        called: set[str] = set()
        for statement in walk_statements(self.facts.module):
            if isinstance(statement, (cst.For, cst.While)):
                for call in all_calls(statement.body):
                    func = call.func
                    if isinstance(func, cst.Name):
                        called.add(func.value)
                    elif isinstance(func, cst.Attribute):
                        called.add(func.attr.value)
        # Transitively: what those functions call.
        frontier = set(called)
        for _ in range(MAX_DEPTH):
            more: set[str] = set()
            for function in self.index.all_functions:
                if function.name.value in frontier:
                    for call in all_calls(function.body):
                        func = call.func
                        if isinstance(func, cst.Name):
                            more.add(func.value)
                        elif isinstance(func, cst.Attribute):
                            more.add(func.attr.value)
            frontier = more - called
            called |= more
            if not frontier:
                break
        self._called_in_loops = called
        return called


def module_updates(module: cst.Module, scaler: cst.BaseExpression) -> bool:
    """Whether `scaler.update()` (any spelling of that scaler) is called anywhere."""
    return any(
        isinstance(call.func, cst.Attribute)
        and call.func.attr.value == "update"
        and same_scaler(call.func.value, scaler)
        for call in all_calls(module)
    )
