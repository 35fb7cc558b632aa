"""The GradScaler order walk: each function's statements in source order, from a state of
what may have happened to the gradients since the last scaled backward (flow.py says how).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import libcst as cst

from amp_lint.analysis.scaler.branches import amp_test, updates_with_scaler
from amp_lint.analysis.scaler.calls import CallTargets, in_caller_terms
from amp_lint.analysis.scaler.hazards import (
    CLEAN_STATE,
    MAX_DEPTH,
    Backward,
    ScalerFlow,
    ScalerHazard,
    WalkContext,
    WalkState,
)
from amp_lint.analysis.scaler.names import (
    CLIP_FUNCTIONS,
    CLIP_METHODS,
    ScalerNames,
    all_calls,
    calls_in_order,
    computes_norm_only,
    scale_call,
)
from amp_lint.analysis.scaler.updates import UpdateChecks
from amp_lint.analysis.syntax.calls import ModuleIndex
from amp_lint.analysis.syntax.module import ModuleFacts
from amp_lint.analysis.syntax.names import dotted_name
from amp_lint.analysis.syntax.outline import positional_arguments

# Followed calls (distinct function and entry state) per module.
MAX_FOLLOWED = 1000


class ScalerWalker:
    def __init__(self, facts: ModuleFacts, index: ModuleIndex, names: ScalerNames) -> None:
        self.facts = facts
        self.index = index
        self.names = names
        self.flow = ScalerFlow()
        self.seen: set[tuple[str, int]] = set()
        # (kind, id(call)) -> the position in flow.hazards of the hazard reported there.
        self.reported: dict[tuple[str, int], int] = {}
        # `scaled = scaler.scale(loss)`, per walked function: name -> the scaler.
        self.scaled_names: dict[int, dict[str, cst.BaseExpression]] = {}
        # (function, entry state, suppressed) -> exit state of a followed call
        self.followed: dict[tuple[int, WalkState, bool, str | None], WalkState] = {}
        self.calls: dict[int, list[cst.Call]] = {}  # statement -> its calls, in order
        self.targets = CallTargets(index)
        # AMP303: whether an update follows each `scaler.step(optimizer)` met.
        self.updates = UpdateChecks(facts, index, self.targets, self.flow)

    # Statements

    def block(
        self, body: Sequence[cst.BaseStatement], state: WalkState, ctx: WalkContext
    ) -> WalkState:
        for statement in body:
            state = self.statement(statement, state, ctx)
        return state

    def statement(
        self, statement: cst.BaseStatement, state: WalkState, ctx: WalkContext
    ) -> WalkState:
        if isinstance(statement, cst.SimpleStatementLine):
            line_ctx = replace(ctx, line=statement)
            for small in statement.body:
                state = self.small(small, state, line_ctx)
            return state
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            return state
        inner = replace(ctx, path=(*ctx.path, statement), line=None)
        if isinstance(statement, cst.If):
            return self.if_chain(statement, state, inner)
        if isinstance(statement, (cst.For, cst.While)):
            header = statement.iter if isinstance(statement, cst.For) else statement.test
            state = self.expression(header, state, inner)
            entry = state
            for _ in range(4):
                end = self.suite(statement.body, entry, inner)
                # The next iteration starts a new one: its steps are not this one's.
                merged = entry.merge(replace(end, steps=frozenset()))
                if merged == entry:
                    entry = entry.merge(end)
                    break
                entry = merged
            if statement.orelse is not None:
                entry = self.suite(statement.orelse.body, entry, inner)
            return entry
        if isinstance(statement, cst.With):
            for item in statement.items:
                state = self.expression(item.item, state, inner)
            return self.suite(statement.body, state, inner)
        if isinstance(statement, cst.Try):
            after = self.suite(statement.body, state, inner)
            handled = after
            for handler in statement.handlers:
                handled = handled.merge(self.suite(handler.body, state.merge(after), inner))
            if statement.orelse is not None:
                handled = handled.merge(self.suite(statement.orelse.body, after, inner))
            if statement.finalbody is not None:
                handled = self.suite(statement.finalbody.body, handled, inner)
            return handled
        if isinstance(statement, cst.Match):
            state = self.expression(statement.subject, state, inner)
            merged = state
            for case in statement.cases:
                merged = merged.merge(self.suite(case.body, state, inner))
            return merged
        return state

    def suite(self, body: cst.BaseSuite, state: WalkState, ctx: WalkContext) -> WalkState:
        if isinstance(body, cst.IndentedBlock):
            return self.block(body.body, state, ctx)
        assert isinstance(body, cst.SimpleStatementSuite)
        for small in body.body:
            state = self.small(small, state, replace(ctx, line=None))
        return state

    def if_chain(self, node: cst.If, state: WalkState, ctx: WalkContext) -> WalkState:
        branches: list[tuple[cst.BaseSuite, bool]] = []  # (body, is the non-AMP branch)
        current: cst.If | None = node
        has_else = False
        while current is not None:
            state = self.expression(current.test, state, ctx)
            polarity = amp_test(current.test)
            branches.append((current.body, polarity is False))
            orelse = current.orelse
            if isinstance(orelse, cst.If):
                current = orelse
            else:
                if orelse is not None:
                    branches.append((orelse.body, polarity is True))
                    has_else = True
                current = None
        uses_scaler = [updates_with_scaler(body, self.names) for body, _ in branches]
        merged = None if has_else else state
        for position, (body, non_amp) in enumerate(branches):
            sibling_uses = any(u for i, u in enumerate(uses_scaler) if i != position)
            suppressed = ctx.suppressed or non_amp or (sibling_uses and not uses_scaler[position])
            end = self.suite(body, state, replace(ctx, suppressed=suppressed))
            merged = end if merged is None else merged.merge(end)
        assert merged is not None
        return merged

    def small(self, small: cst.BaseSmallStatement, state: WalkState, ctx: WalkContext) -> WalkState:
        state = self.expression(small, state, ctx)
        if isinstance(small, cst.Assign):
            scaler = self.scaler_of_scale(small.value)
            for target in small.targets:
                name = dotted_name(target.target)
                if name and scaler is not None:
                    self.scaled_names.setdefault(_key(ctx.function), {})[name] = scaler
        return state

    def expression(self, node: cst.CSTNode, state: WalkState, ctx: WalkContext) -> WalkState:
        calls = self.calls.get(id(node))
        if calls is None:
            calls = self.calls[id(node)] = calls_in_order(node)
        for call in calls:
            state = self.call(call, state, ctx)
        return state

    # Calls

    def call(self, call: cst.Call, state: WalkState, ctx: WalkContext) -> WalkState:
        func = call.func
        names = self.names
        qualified = self.facts.names.qualified_name(func)
        if qualified in CLIP_FUNCTIONS:
            return self.clip(call, state, ctx)
        if qualified == "torch.autograd.backward":
            arguments = positional_arguments(call)
            scaler = self.scaled(arguments[0], ctx) if arguments else None
            return self.backward(call, scaler, ctx) if scaler is not None else state
        if isinstance(func, cst.Attribute) and qualified is None:
            method = func.attr.value
            receiver = func.value
            if method == "backward":
                scaler = self.scaled(receiver, ctx)
                if scaler is not None:
                    return self.backward(call, scaler, ctx)
                return self.follow(call, state, ctx)  # `self.backward(loss)`, a helper
            if names.is_scaler(receiver) and not names.is_disabled(receiver):
                if method == "unscale_":
                    if not ctx.via and ("unscale", id(call)) not in self.seen:
                        self.seen.add(("unscale", id(call)))
                        self.flow.unscales.setdefault(_key(ctx.function), []).append(call)
                    return replace(state, unscaled=True)
                if method == "step" and call.args:
                    if not ctx.via and ("step", id(call)) not in self.seen:
                        self.seen.add(("step", id(call)))
                        self.flow.steps.setdefault(_key(ctx.function), []).append((call, ctx.path))
                        self.updates.record_step(call, ctx)
                    self.clips_before_step(state)
                    steps = state.steps | _stepped(call, ctx)
                    return replace(state, unscaled=True, stepped=True, clips=(), steps=steps)
                if method == "update":
                    return replace(state, unscaled=True, stepped=True)
                return state
            if method == "zero_grad":
                return CLEAN_STATE
            if method in CLIP_METHODS and not names.is_accelerator(receiver):
                if dotted_name(receiver) not in ("self", None) or isinstance(receiver, cst.Call):
                    return self.clip(call, state, ctx)
                return state
            if method == "step" and not call.args and names.is_optimizer(receiver):
                return self.optimizer_step(call, state, ctx)
        return self.follow(call, state, ctx)

    def scaled(self, receiver: cst.BaseExpression, ctx: WalkContext) -> cst.BaseExpression | None:
        """The scaler of a scaled loss: `scaler.scale(loss)`, `scaler.scale(loss) / k`, or a
        name assigned from one; None when the loss is not scaled."""
        name = dotted_name(receiver)
        if name is not None:
            return self.scaled_names.get(_key(ctx.function), {}).get(name)
        return self.scaler_of_scale(receiver)

    def scaler_of_scale(self, node: cst.BaseExpression) -> cst.BaseExpression | None:
        for inner in all_calls(node):
            scale = scale_call(inner)
            if scale is None:
                continue
            assert isinstance(scale.func, cst.Attribute)
            scaler = scale.func.value
            if self.names.is_scaler(scaler) and not self.names.is_disabled(scaler):
                return scaler
        return None

    def backward(self, call: cst.Call, scaler: cst.BaseExpression, ctx: WalkContext) -> WalkState:
        event = Backward(call, in_caller_terms(scaler, ctx.self_as), bool(ctx.via))
        return WalkState(frozenset([event]), unscaled=False, stepped=False)

    def clip(self, call: cst.Call, state: WalkState, ctx: WalkContext) -> WalkState:
        if state.steps and not ctx.suppressed and not computes_norm_only(call):
            self.report("late_clip", call, state, ctx)
        elif state.backwards and not state.unscaled and not ctx.suppressed:
            self.report("clip", call, state, ctx)
        elif not state.backwards and not state.unscaled and not state.stepped:
            return replace(state, clips=(*state.clips, (call, ctx)))
        return state

    def clips_before_step(self, state: WalkState) -> None:
        """`scaler.step(optimizer)` after clips that saw no backward and no `unscale_`: the
        backward ran in the caller, scaled (why else step through the scaler), so the clips
        saw scaled gradients (returnn's `Updater.step(grad_scaler=...)`)."""
        for call, clip_ctx in state.clips:
            if not clip_ctx.suppressed:
                self.report("clip", call, state, clip_ctx)

    def optimizer_step(self, call: cst.Call, state: WalkState, ctx: WalkContext) -> WalkState:
        assert isinstance(call.func, cst.Attribute)
        optimizer = dotted_name(in_caller_terms(call.func.value, ctx.self_as))
        again = [step for step, stepped in state.steps if stepped == optimizer]
        if again and not ctx.suppressed:
            self.report("double_step", call, state, ctx)
        elif state.backwards and not state.stepped and not ctx.suppressed:
            self.report("bypass", call, state, ctx)
        # The bypassing step consumed the gradients; what follows is another story.
        return replace(state, unscaled=True, stepped=True)

    def report(self, kind: str, call: cst.Call, state: WalkState, ctx: WalkContext) -> None:
        """Record a hazard once. The module's code is walked before its functions, so a
        hazard in `train()` is often met first through `if __name__ == "__main__": train()`;
        the copy reached through the fewest calls is kept (only a direct one can be fixed)."""
        key = (kind, id(call))
        known = self.reported.get(key)
        if known is not None and len(self.flow.hazards[known].via) <= len(ctx.via):
            return
        backwards = tuple(sorted(state.backwards, key=lambda b: b.in_callee))
        steps = sorted(state.steps, key=lambda step: step[1])
        hazard = ScalerHazard(
            kind,
            call,
            ctx.via,
            backwards,
            unscaled=state.unscaled,
            line=ctx.line if not ctx.via else None,
            function=ctx.function,
            path=ctx.path,
            step=steps[0][0] if steps else None,
        )
        if known is not None:
            self.flow.hazards[known] = hazard
        else:
            self.reported[key] = len(self.flow.hazards)
            self.flow.hazards.append(hazard)

    def follow(self, call: cst.Call, state: WalkState, ctx: WalkContext) -> WalkState:
        if len(ctx.via) >= MAX_DEPTH:
            return state
        target = self.targets.resolve(call, ctx.owner, ctx.body_of or ctx.function, ctx.self_as)
        if target is None or id(target.function) in ctx.active:
            return state
        function, owner = target.function, target.owner
        memo_key = (id(function), state, ctx.suppressed, _spelling(target.self_as))
        if memo_key in self.followed:
            return self.followed[memo_key]
        if len(self.followed) >= MAX_FOLLOWED:
            return state  # a module of many calls: stop following rather than slow down
        inner = WalkContext(
            function=ctx.function,
            owner=owner,
            via=(*ctx.via, call),
            path=ctx.path,
            suppressed=ctx.suppressed,
            active=ctx.active | {id(function)},
            body_of=function,
            self_as=target.self_as,
        )
        self.followed[memo_key] = state  # while walking it (recursion): no effect
        end = self.suite(function.body, state, inner)
        self.followed[memo_key] = end
        return end


def _stepped(call: cst.Call, ctx: WalkContext) -> frozenset[tuple[cst.Call, str]]:
    """`scaler.step(optimizer)`'s optimizer as spelled in the walked function."""
    arguments = positional_arguments(call)
    spelled = dotted_name(in_caller_terms(arguments[0], ctx.self_as)) if arguments else None
    return frozenset([(call, spelled)]) if spelled else frozenset()


def _spelling(node: cst.BaseExpression | None) -> str | None:
    return dotted_name(node) if node is not None else None


def _key(function: cst.FunctionDef | None) -> int:
    return id(function) if function is not None else 0
