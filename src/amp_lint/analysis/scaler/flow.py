"""GradScaler training-loop order: what happens to the gradients between
`scaler.scale(loss).backward()` and the optimizer update, statement by statement.

Every function (and the module's top-level code) is walked in source order. `if`/`match`
branches are walked from the same state and merged; loops are walked until their entry state
stops changing; `with` and `try` bodies are walked in place; calls to the module's own
functions and to `self.method(...)` are followed into their bodies (depth 4), so a helper that
clips, unscales or steps counts where it is called.

The state is "may" information merged with OR, chosen so that correlated conditions
(`if use_amp: scaler.unscale_(opt)` before an unconditional clip) do not raise false alarms:

* `backwards`: the scaled backward passes that may have run with nothing handled since;
* `unscaled`: an `unscale_`, `step`, `update` or `zero_grad` may have run since (gradients
  no longer scaled on some path);
* `stepped`: a `scaler.step` or `scaler.update` may have run since.

Branches that are the non-AMP alternative (an `else` whose sibling calls `scaler.step` or
`scaler.unscale_`, or the branch of `if not use_amp:` / `if scaler is None:`) are not checked:
they run when the scaler does not.

The facts are hazards, no opinions on wording: the AMP301-AMP303 rules phrase and fix them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

import libcst as cst

from amp_lint.analysis.scaler.calls import CallTargets, in_caller_terms
from amp_lint.analysis.scaler.names import (
    AMP_WORDS,
    CLIP_FUNCTIONS,
    CLIP_METHODS,
    PER_STEP_WORDS,
    ScalerNames,
    all_calls,
    calls_in_order,
    collect_names,
    computes_norm_only,
    same_scaler,
    scale_call,
)
from amp_lint.analysis.syntax.calls import ClassInfo, ModuleIndex, build_index
from amp_lint.analysis.syntax.module import ModuleFacts
from amp_lint.analysis.syntax.names import dotted_name
from amp_lint.analysis.syntax.outline import child_nodes, positional_arguments, walk_statements

MAX_DEPTH = 4
# Followed calls (distinct function and entry state) per module.
MAX_FOLLOWED = 1000


@dataclass(frozen=True)
class Backward:
    """`scaler.scale(loss).backward()` (or a name assigned from `scaler.scale(...)`)."""

    call: cst.Call
    scaler: cst.BaseExpression  # as spelled where the backward is (maybe in a callee)
    in_callee: bool  # reached through a call from the walked function


@dataclass(frozen=True)
class ScalerHazard:
    # "clip" (AMP301), "bypass" and "double_step" (AMP302), "no_update" (AMP303),
    # "late_clip" (AMP311)
    kind: str
    node: cst.Call
    via: tuple[cst.Call, ...] = ()
    backwards: tuple[Backward, ...] = ()
    # Whether an unscale_ may have run before (bypass: gradients unscaled, inf still applied).
    unscaled: bool = False
    # Where the node's statement sits, for fixes: the line, and whether it is the only
    # statement on its line inside an indented block (a fix can add a line beside it).
    line: cst.SimpleStatementLine | None = None
    function: cst.FunctionDef | None = None
    path: tuple[cst.CSTNode, ...] = ()
    # no_update: "never" (no update in reach) or "after_loop" (only outside the loop).
    detail: str = ""
    # no_update: the loop over optimizers the step is in, after which an update belongs.
    optimizer_loop: cst.For | None = None
    # double_step, late_clip: the `scaler.step(optimizer)` that already made the update.
    step: cst.Call | None = None


@dataclass(frozen=True)
class _State:
    backwards: frozenset[Backward] = frozenset()
    unscaled: bool = False
    stepped: bool = False
    # Clips made with no backward in sight (it ran in the caller): they clipped scaled
    # gradients if a `scaler.step(...)` follows here with no `unscale_` before them.
    clips: tuple[tuple[cst.Call, _Context], ...] = ()
    # The `scaler.step(optimizer)` calls of this iteration that may have run, with the
    # optimizer as spelled where the walk is: the gradients they consumed are still there.
    steps: frozenset[tuple[cst.Call, str]] = frozenset()

    def merge(self, other: _State) -> _State:
        return _State(
            self.backwards | other.backwards,
            self.unscaled or other.unscaled,
            self.stepped or other.stepped,
            self.clips + tuple(c for c in other.clips if c not in self.clips),
            self.steps | other.steps,
        )


_CLEAN = _State()


@dataclass(frozen=True)
class _Context:
    function: cst.FunctionDef | None
    owner: ClassInfo | None
    via: tuple[cst.Call, ...] = ()
    path: tuple[cst.CSTNode, ...] = ()
    line: cst.SimpleStatementLine | None = None
    suppressed: bool = False  # a non-AMP branch
    active: frozenset[int] = frozenset()  # functions being walked (no recursion)
    # The function whose body is walked (a followed callee's), and what its `self` is in
    # the walked function's terms (`self.engine` inside `self.engine.backward_loss()`).
    body_of: cst.FunctionDef | None = None
    self_as: cst.BaseExpression | None = None


@dataclass
class ScalerFlow:
    """Hazards of one module, in the order found."""

    hazards: list[ScalerHazard] = field(default_factory=list)
    # Every `scaler.step(...)` call of a walked function body (not via a call): for fixes.
    steps: dict[int, list[tuple[cst.Call, tuple[cst.CSTNode, ...]]]] = field(default_factory=dict)
    unscales: dict[int, list[cst.Call]] = field(default_factory=dict)

    def of_kind(self, kind: str) -> Iterator[ScalerHazard]:
        return (hazard for hazard in self.hazards if hazard.kind == kind)


_CACHE: dict[int, tuple[cst.Module, ScalerFlow]] = {}


def scaler_flow(facts: ModuleFacts) -> ScalerFlow:
    """The hazards of the module, computed once for all the rules that ask."""
    cached = _CACHE.get(id(facts.module))
    if cached is not None and cached[0] is facts.module:
        return cached[1]
    flow = _analyse(facts)
    _CACHE.clear()
    _CACHE[id(facts.module)] = (facts.module, flow)
    return flow


# --- the walk ----------------------------------------------------------------------------


class _Walker:
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
        self._called_in_loops: set[str] | None = None
        # (function, entry state, suppressed) -> exit state of a followed call
        self.followed: dict[tuple[int, _State, bool, str | None], _State] = {}
        self.calls: dict[int, list[cst.Call]] = {}  # statement -> its calls, in order
        self.targets = CallTargets(index)

    # Statements

    def block(self, body: Sequence[cst.BaseStatement], state: _State, ctx: _Context) -> _State:
        for statement in body:
            state = self.statement(statement, state, ctx)
        return state

    def statement(self, statement: cst.BaseStatement, state: _State, ctx: _Context) -> _State:
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

    def suite(self, body: cst.BaseSuite, state: _State, ctx: _Context) -> _State:
        if isinstance(body, cst.IndentedBlock):
            return self.block(body.body, state, ctx)
        assert isinstance(body, cst.SimpleStatementSuite)
        for small in body.body:
            state = self.small(small, state, replace(ctx, line=None))
        return state

    def if_chain(self, node: cst.If, state: _State, ctx: _Context) -> _State:
        branches: list[tuple[cst.BaseSuite, bool]] = []  # (body, is the non-AMP branch)
        current: cst.If | None = node
        has_else = False
        while current is not None:
            state = self.expression(current.test, state, ctx)
            polarity = self.amp_test(current.test)
            branches.append((current.body, polarity is False))
            orelse = current.orelse
            if isinstance(orelse, cst.If):
                current = orelse
            else:
                if orelse is not None:
                    branches.append((orelse.body, polarity is True))
                    has_else = True
                current = None
        uses_scaler = [self.updates_with_scaler(body) for body, _ in branches]
        merged = None if has_else else state
        for position, (body, non_amp) in enumerate(branches):
            sibling_uses = any(u for i, u in enumerate(uses_scaler) if i != position)
            suppressed = ctx.suppressed or non_amp or (sibling_uses and not uses_scaler[position])
            end = self.suite(body, state, replace(ctx, suppressed=suppressed))
            merged = end if merged is None else merged.merge(end)
        assert merged is not None
        return merged

    def amp_test(self, test: cst.BaseExpression) -> bool | None:
        """True for `if use_amp:` / `if scaler is not None:`, False for their negations,
        None for a test that does not read an AMP switch."""
        negated = False
        while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            negated = not negated
            test = test.expression
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            target = test.comparisons[0]
            right = target.comparator
            if isinstance(right, cst.Name) and right.value in ("None", "False"):
                if isinstance(target.operator, (cst.Is, cst.Equal)):
                    negated = not negated
                elif not isinstance(target.operator, (cst.IsNot, cst.NotEqual)):
                    return None
                test = test.left
            else:
                return None
        if not _mentions_amp(test):
            return None
        return not negated

    def updates_with_scaler(self, body: cst.BaseSuite) -> bool:
        for call in all_calls(body):
            func = call.func
            if (
                isinstance(func, cst.Attribute)
                and func.attr.value in ("step", "unscale_")
                and self.names.is_scaler(func.value)
            ):
                return True
        return False

    def small(self, small: cst.BaseSmallStatement, state: _State, ctx: _Context) -> _State:
        state = self.expression(small, state, ctx)
        if isinstance(small, cst.Assign):
            scaler = self.scaler_of_scale(small.value)
            for target in small.targets:
                name = dotted_name(target.target)
                if name and scaler is not None:
                    self.scaled_names.setdefault(_key(ctx.function), {})[name] = scaler
        return state

    def expression(self, node: cst.CSTNode, state: _State, ctx: _Context) -> _State:
        calls = self.calls.get(id(node))
        if calls is None:
            calls = self.calls[id(node)] = calls_in_order(node)
        for call in calls:
            state = self.call(call, state, ctx)
        return state

    # Calls

    def call(self, call: cst.Call, state: _State, ctx: _Context) -> _State:
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
                        self.record_step(call, ctx)
                    self.clips_before_step(state)
                    steps = state.steps | _stepped(call, ctx)
                    return replace(state, unscaled=True, stepped=True, clips=(), steps=steps)
                if method == "update":
                    return replace(state, unscaled=True, stepped=True)
                return state
            if method == "zero_grad":
                return _CLEAN
            if method in CLIP_METHODS and not names.is_accelerator(receiver):
                if dotted_name(receiver) not in ("self", None) or isinstance(receiver, cst.Call):
                    return self.clip(call, state, ctx)
                return state
            if method == "step" and not call.args and names.is_optimizer(receiver):
                return self.optimizer_step(call, state, ctx)
        return self.follow(call, state, ctx)

    def scaled(self, receiver: cst.BaseExpression, ctx: _Context) -> cst.BaseExpression | None:
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

    def backward(self, call: cst.Call, scaler: cst.BaseExpression, ctx: _Context) -> _State:
        event = Backward(call, in_caller_terms(scaler, ctx.self_as), bool(ctx.via))
        return _State(frozenset([event]), unscaled=False, stepped=False)

    def clip(self, call: cst.Call, state: _State, ctx: _Context) -> _State:
        if state.steps and not ctx.suppressed and not computes_norm_only(call):
            self.report("late_clip", call, state, ctx)
        elif state.backwards and not state.unscaled and not ctx.suppressed:
            self.report("clip", call, state, ctx)
        elif not state.backwards and not state.unscaled and not state.stepped:
            return replace(state, clips=(*state.clips, (call, ctx)))
        return state

    def clips_before_step(self, state: _State) -> None:
        """`scaler.step(optimizer)` after clips that saw no backward and no `unscale_`: the
        backward ran in the caller, scaled (why else step through the scaler), so the clips
        saw scaled gradients (returnn's `Updater.step(grad_scaler=...)`)."""
        for call, clip_ctx in state.clips:
            if not clip_ctx.suppressed:
                self.report("clip", call, state, clip_ctx)

    def optimizer_step(self, call: cst.Call, state: _State, ctx: _Context) -> _State:
        assert isinstance(call.func, cst.Attribute)
        optimizer = dotted_name(in_caller_terms(call.func.value, ctx.self_as))
        again = [step for step, stepped in state.steps if stepped == optimizer]
        if again and not ctx.suppressed:
            self.report("double_step", call, state, ctx)
        elif state.backwards and not state.stepped and not ctx.suppressed:
            self.report("bypass", call, state, ctx)
        # The bypassing step consumed the gradients; what follows is another story.
        return replace(state, unscaled=True, stepped=True)

    def report(self, kind: str, call: cst.Call, state: _State, ctx: _Context) -> None:
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

    def follow(self, call: cst.Call, state: _State, ctx: _Context) -> _State:
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
        inner = _Context(
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

    # AMP303

    def record_step(self, call: cst.Call, ctx: _Context) -> None:
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
        used = {n.value for n in _names_in(call.args[0].value)} if call.args else set()
        optimizer_loop: cst.For | None = None
        for node in reversed(path):
            if isinstance(node, cst.While):
                return node, optimizer_loop
            if isinstance(node, cst.For):
                bound = {n.value for n in _names_in(node.target)}
                if bound & used:
                    optimizer_loop = node
                    continue
                return node, optimizer_loop
        return None, optimizer_loop

    def function_updates(self, ctx: _Context, scaler: cst.BaseExpression) -> bool:
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


def _stepped(call: cst.Call, ctx: _Context) -> frozenset[tuple[cst.Call, str]]:
    """`scaler.step(optimizer)`'s optimizer as spelled in the walked function."""
    arguments = positional_arguments(call)
    spelled = dotted_name(in_caller_terms(arguments[0], ctx.self_as)) if arguments else None
    return frozenset([(call, spelled)]) if spelled else frozenset()


def _spelling(node: cst.BaseExpression | None) -> str | None:
    return dotted_name(node) if node is not None else None


def _names_in(node: cst.CSTNode) -> Iterator[cst.Name]:
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            yield current
        stack.extend(child_nodes(current))


def _mentions_amp(test: cst.BaseExpression) -> bool:
    """`use_amp`, `args.fp16`, `self.scaler`: a plain name chain naming an AMP switch."""
    if dotted_name(test) is None:
        return False
    for name in _names_in(test):
        words = name.value.lower().split("_")
        if any(word in AMP_WORDS for word in words):
            return True
    return False


def module_updates(module: cst.Module, scaler: cst.BaseExpression) -> bool:
    """Whether `scaler.update()` (any spelling of that scaler) is called anywhere."""
    return any(
        isinstance(call.func, cst.Attribute)
        and call.func.attr.value == "update"
        and same_scaler(call.func.value, scaler)
        for call in all_calls(module)
    )


def function_key(function: cst.FunctionDef | None) -> int:
    """The key of ScalerFlow.steps / unscales for a function (0: the module's own code)."""
    return id(function) if function is not None else 0


def _key(function: cst.FunctionDef | None) -> int:
    return id(function) if function is not None else 0


def _uses_a_scaler(call: cst.Call, names: ScalerNames) -> bool:
    """`x.scale(loss)`, or `grad_scaler.step(optimizer)` on a scaler made elsewhere."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return False
    if func.attr.value == "scale":
        return True
    return (
        func.attr.value in ("step", "unscale_") and bool(call.args) and names.is_scaler(func.value)
    )


def _analyse(facts: ModuleFacts) -> ScalerFlow:
    names = collect_names(facts)
    if not names.enabled and not any(_uses_a_scaler(c, names) for c in all_calls(facts.module)):
        return ScalerFlow()
    index = build_index(facts.module, facts.names)
    walker = _Walker(facts, index, names)
    top = _Context(function=None, owner=None)
    walker.block(facts.module.body, _CLEAN, top)
    for function in index.all_functions:
        owner = index.owner.get(id(function))
        ctx = _Context(function=function, owner=owner, active=frozenset([id(function)]))
        walker.suite(function.body, _CLEAN, ctx)
    return walker.flow
