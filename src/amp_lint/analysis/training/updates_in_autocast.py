"""Weight updates inside autocast regions that run a forward again afterwards (AMP307).

Autocast caches its casts of the weights until the outermost region exits, so a forward after
an in-place update in the same region reads the casts of the old weights. The regions are the
outermost `with` blocks of an autocast (also through a variable assigned one) and functions
decorated with one; calls to the module's functions and `self` methods are followed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import libcst as cst

from amp_lint.analysis.regions.finder import (
    AccelerateSettings,
    AutocastRegion,
    accelerate_settings,
    region_from_call,
)
from amp_lint.analysis.syntax.calls import ModuleIndex, build_index
from amp_lint.analysis.syntax.module import ModuleFacts
from amp_lint.analysis.syntax.names import ModuleNames, dotted_name
from amp_lint.analysis.syntax.outline import (
    calls_in,
    small_statements,
    source_text,
    statement_expressions,
    walk_statements,
)
from amp_lint.analysis.training.parameter_collections import (
    ParameterScope,
    body_of,
    child_blocks,
    function_scope,
    parameter_scopes,
)
from amp_lint.analysis.training.weight_updates import is_data, is_forward_call, is_step_call


@dataclass(frozen=True)
class RegionEvent:
    """A weight update or a forward in an autocast region."""

    kind: str  # "step" or "forward"
    node: cst.CSTNode
    order: int  # statement index in the region
    loops: tuple[int, ...]  # ids of the loops (inside the region) around it
    via: cst.CSTNode | None = None  # the step inside a helper, when node is the call to it


class UpdatesInAutocast:
    """The weight updates and forwards in the module's outermost autocast regions."""

    def __init__(self, facts: ModuleFacts) -> None:
        self.facts = facts
        self.names: ModuleNames = facts.names
        self.accelerate: AccelerateSettings = accelerate_settings(facts.module, facts.names)
        self.index: ModuleIndex = build_index(facts.module, facts.names)
        self.region_names = self._region_names()
        self.parameters = parameter_scopes(facts.module)
        self.top = self.parameters[id(facts.module)]
        self.methods: dict[str, list[cst.FunctionDef]] = {}
        for info in self.index.classes.values():
            for name, method in info.methods.items():
                self.methods.setdefault(name, []).append(method)
        self._summaries: dict[int, tuple[cst.CSTNode | None, bool]] = {}

    def stale_updates(self) -> Iterator[tuple[RegionEvent, RegionEvent, str]]:
        """Each weight update that a forward later in its region runs after, while autocast
        holds casts of the weights: (the update, that forward, the region as written)."""
        reported: set[int] = set()
        for body, region_text, scope in self._scopes(self.facts.module.body, self.top):
            events: list[RegionEvent] = []
            self._collect(body, events, [0], (), scope)
            for step in (e for e in events if e.kind == "step"):
                if id(step.node) in reported:
                    continue
                later = self._later_forward(step, events)
                if later is None or not self._casts_cached(step, events):
                    continue
                reported.add(id(step.node))
                yield step, later, region_text

    # --- regions ---------------------------------------------------------------------------

    def _region_names(self) -> dict[str, AutocastRegion]:
        found: dict[str, AutocastRegion] = {}
        for small in small_statements(self.facts.module):
            if isinstance(small, cst.Assign):
                region = self._region_in(small.value)
                if region is not None:
                    for target in small.targets:
                        name = dotted_name(target.target)
                        if name:
                            found[name] = region
        return found

    def _region_in(self, node: cst.BaseExpression) -> AutocastRegion | None:
        for call in calls_in(node):
            region = region_from_call(call, self.names, self.accelerate)
            if region is not None:
                return region
        return None

    def _with_region(self, statement: cst.With) -> tuple[AutocastRegion | None, bool]:
        """(the autocast the `with` enters, whether its cast cache is disabled)."""
        for item in statement.items:
            name = dotted_name(item.item)
            region = self.region_names.get(name) if name else self._region_in(item.item)
            if region is not None:
                return region, _cache_disabled(region)
        return None, False

    def _scopes(
        self, statements: Sequence[cst.BaseStatement], scope: ParameterScope
    ) -> Iterator[tuple[Sequence[cst.BaseStatement], str, ParameterScope]]:
        """Bodies of the outermost autocast regions (`with` blocks and decorated functions),
        each with the parameters of the function that holds it."""
        for statement in statements:
            if isinstance(statement, cst.FunctionDef):
                inner = self.parameters.get(id(statement)) or function_scope(statement, scope)
                region = self._decorator_region(statement)
                if region is not None and region.is_active and not _cache_disabled(region):
                    yield body_of(statement.body), f"`@{_call_text(region)}` function", inner
                    continue
                yield from self._scopes(body_of(statement.body), inner)
                continue
            if isinstance(statement, cst.With):
                region, no_cache = self._with_region(statement)
                if region is not None:
                    if region.is_active and not no_cache:
                        yield body_of(statement.body), f"`with {_call_text(region)}` block", scope
                    continue
            for child in child_blocks(statement):
                yield from self._scopes(child, scope)

    def _decorator_region(self, function: cst.FunctionDef) -> AutocastRegion | None:
        for decorator in function.decorators:
            if isinstance(decorator.decorator, cst.Call):
                region = region_from_call(decorator.decorator, self.names, self.accelerate)
                if region is not None:
                    return region
        return None

    # --- events ----------------------------------------------------------------------------

    def _collect(
        self,
        statements: Sequence[cst.BaseStatement],
        events: list[RegionEvent],
        counter: list[int],
        loops: tuple[int, ...],
        scope: ParameterScope,
    ) -> None:
        for statement in statements:
            if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
                continue
            counter[0] += 1
            order = counter[0]
            for node in statement_expressions(statement):
                for kind, found, via in self._events_in(node, scope):
                    events.append(RegionEvent(kind, found, order, loops, via))
            is_loop = isinstance(statement, (cst.For, cst.While))
            inner = (*loops, id(statement)) if is_loop else loops
            for child in child_blocks(statement):
                self._collect(child, events, counter, inner, scope)
            if isinstance(statement, (cst.For, cst.While)):
                # The header runs again after the body.
                counter[0] += 1

    def _events_in(
        self, node: cst.CSTNode, scope: ParameterScope, seen: set[int] | None = None
    ) -> Iterator[tuple[str, cst.CSTNode, cst.CSTNode | None]]:
        """("step" or "forward", the node, the update inside a helper the node calls)."""
        if isinstance(node, cst.AugAssign) and scope.is_parameter(node.target):
            yield "step", node, None
        if isinstance(node, cst.Assign):
            for target in node.targets:
                if is_data(target.target) and scope.is_parameter(target.target):
                    yield "step", node, None
        for call in calls_in(node):
            if is_step_call(call, scope, self.names):
                yield "step", call, None
                continue
            helpers = self._helpers(call)
            for helper in helpers:
                step, forward = self._summary(helper, seen if seen is not None else set())
                if step is not None:
                    yield "step", call, step
                if forward:
                    yield "forward", call, None
            if not helpers and is_forward_call(call, self.names, self.index):
                yield "forward", call, None

    def _helpers(self, call: cst.Call) -> list[cst.FunctionDef]:
        func = call.func
        if isinstance(func, cst.Name) and func.value in self.index.functions:
            return [self.index.functions[func.value]]
        if (
            isinstance(func, cst.Attribute)
            and isinstance(func.value, cst.Name)
            and func.value.value == "self"
        ):
            return self.methods.get(func.attr.value, [])
        return []

    def _summary(
        self, function: cst.FunctionDef, seen: set[int]
    ) -> tuple[cst.CSTNode | None, bool]:
        """(a weight update in the function or what it calls, whether it runs a forward)."""
        key = id(function)
        if key in self._summaries:
            return self._summaries[key]
        if key in seen:
            return None, False
        seen.add(key)
        step: cst.CSTNode | None = None
        forward = False
        scope = self.parameters.get(key) or function_scope(function, self.top)
        for statement in walk_statements(cst.Module(body=[function])):
            if statement is function or isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
                continue
            for node in statement_expressions(statement):
                for kind, found, via in self._events_in(node, scope, seen):
                    if kind == "step" and step is None:
                        step = via or found
                    elif kind == "forward":
                        forward = True
        self._summaries[key] = (step, forward)
        return step, forward

    def _casts_cached(self, step: RegionEvent, events: list[RegionEvent]) -> bool:
        """A forward ran in the region before the update (or the update is in a loop with
        one, or in a helper that runs one): autocast has cached casts of the weights. An
        update before any forward (`model.load_state_dict(...)` right after building it)
        leaves nothing stale."""
        if step.loops or step.via is not None:
            return True
        return any(e.kind == "forward" and e.order < step.order for e in events)

    def _later_forward(self, step: RegionEvent, events: list[RegionEvent]) -> RegionEvent | None:
        for event in events:
            if event.kind != "forward":
                continue
            if event.node is step.node:
                # A helper that both updates and runs the model: again in the next iteration.
                if step.loops:
                    return event
                continue
            if event.order > step.order:
                return event
            if set(event.loops) & set(step.loops):
                return event
        return None


def _cache_disabled(region: AutocastRegion) -> bool:
    call = region.node
    if not isinstance(call, cst.Call):
        return False
    for arg in call.args:
        if (
            arg.keyword is not None
            and arg.keyword.value == "cache_enabled"
            and isinstance(arg.value, cst.Name)
            and arg.value.value == "False"
        ):
            return True
    return False


def _call_text(region: AutocastRegion) -> str:
    return source_text(region.node) if region.node is not None else region.spelling
