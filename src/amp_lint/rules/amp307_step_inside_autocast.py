"""AMP307 step-inside-autocast: weights updated in place inside an autocast region that runs
a forward again afterwards, which then reads autocast's stale cached casts of the weights."""

from __future__ import annotations

import builtins
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
    positional_arguments,
    small_statements,
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
from amp_lint.rules.base import Report, Rule
from amp_lint.rules.common import brief, code

_BUILTINS = frozenset(dir(builtins))
# In-place tensor methods that rewrite a parameter.
_IN_PLACE = frozenset(
    [
        "copy_",
        "add_",
        "sub_",
        "mul_",
        "div_",
        "lerp_",
        "addcmul_",
        "addcdiv_",
        "fill_",
        "zero_",
        "clamp_",
        "normal_",
        "uniform_",
        "set_",
    ]
)
# Methods of models that do not run a forward.
_NOT_FORWARD = frozenset(
    [
        "parameters",
        "named_parameters",
        "buffers",
        "named_buffers",
        "modules",
        "named_modules",
        "children",
        "named_children",
        "state_dict",
        "load_state_dict",
        "train",
        "eval",
        "zero_grad",
        "to",
        "cuda",
        "cpu",
        "float",
        "half",
        "bfloat16",
        "double",
        "requires_grad_",
        "apply",
        "step",
        "backward",
        "item",
        "detach",
        "register_buffer",
        "register_parameter",
        "register_forward_hook",
        "register_forward_pre_hook",
        "save_pretrained",
    ]
)
_MODEL_WORDS = ("model", "net", "module", "ema", "encoder", "decoder", "backbone")


@dataclass(frozen=True)
class _Event:
    kind: str  # "step" or "forward"
    node: cst.CSTNode
    order: int  # statement index in the region
    loops: tuple[int, ...]  # ids of the loops (inside the region) around it
    via: cst.CSTNode | None = None  # the step inside a helper, when node is the call to it


class StepInsideAutocast(Rule):
    code = "AMP307"
    name = "step-inside-autocast"
    vocabulary = (b"autocast",)
    summary = (
        "Checks for `optimizer.step()` and other in-place weight updates inside an autocast "
        "region that runs the model's forward again afterwards (a training loop inside one "
        "`with torch.autocast(...)`)."
    )
    why = """\
Inside an autocast region the float32 weights are cast to float16/bfloat16 once, and the
casts are **cached**: the cache holds the half copy of every leaf tensor that requires grad
(the parameters) and is cleared only when the **outermost** autocast region exits. An
in-place update of the weights inside the region (`optimizer.step()`, `scaler.step(opt)`,
`p.data.copy_(...)`, `with torch.no_grad(): p -= lr * p.grad`, `model.load_state_dict(...)`)
does not invalidate the cache, so the next forward in the same region silently computes with
the **old** weights. With the whole training loop inside one `with torch.autocast(...)`, every
iteration's forward reuses the weights of the first one, while the gradients still reach the
float32 weights: the loss does not go down and no error is raised (measured on CPU: float16
and bfloat16 outputs off by 41% and 81% from float32 at the 2nd and 3rd step; per-iteration
regions are within 0.6%). This is why PyTorch's AMP examples wrap only the forward and the
loss in autocast."""
    example = """\
import torch

with torch.autocast("cuda", dtype=torch.bfloat16):
    for x, y in loader:
        loss = loss_fn(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""
    fixed_example = """\
import torch

for x, y in loader:
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""
    fix_safety = """\
There is no fix (lint only): moving statements out of a `with` block changes which code runs
under autocast. Move the autocast region inside the loop so that it covers the forward and
the loss only (PyTorch's recipe), or, where the region must stay, open it with
`cache_enabled=False`."""
    known_limitations = """\
The check is lexical: it looks at the statements inside `with` blocks of an autocast (any
spelling, also through a variable assigned an autocast call) and in functions decorated with
one, following calls to functions and methods of the same module. Regions entered in a
caller of the function that holds the loop are not seen. An optimizer is recognised by name
(`optimizer`, `opt_g`, `self.optim`, `scaler.step(...)`). Parameters are `.data` (not a
gradient's) and what `.parameters()`, `.named_parameters()` and an optimizer's
`param_groups[...]["params"]` yield, followed within one function through variables, `for`
loops, comprehensions, `list`, `filter`, `zip`, `enumerate` and `itertools.chain`; a
`torch._foreach_*_` update counts when its first argument is such a collection. A collection
passed in as an argument, or a name bound to different things in one function, is not
followed. A forward is a call of a model-like object (a variable, `self.<attribute>`,
`model.<method>(...)`), so a loss module called after the step in a region without a loop also
counts. A region with `cache_enabled=False` is not flagged."""

    def check_module(self, facts: ModuleFacts) -> Iterator[Report]:
        scan = _Scan(facts)
        yield from scan.run()


class _Scan:
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

    def run(self) -> Iterator[Report]:
        reported: set[int] = set()
        for body, region_text, scope in self._scopes(self.facts.module.body, self.top):
            events: list[_Event] = []
            self._collect(body, events, [0], (), scope)
            for step in (e for e in events if e.kind == "step"):
                if id(step.node) in reported:
                    continue
                later = self._later_forward(step, events)
                if later is None or not self._casts_cached(step, events):
                    continue
                reported.add(id(step.node))
                summary = (
                    f"`{brief(step.node, 20)}` in autocast: later forwards silently use stale "
                    "weights; end the region first"
                )
                message = self._message(step, later, region_text)
                yield Report(step.node, message, summary=summary)

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
        events: list[_Event],
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
                    events.append(_Event(kind, found, order, loops, via))
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
                if _is_data(target.target) and scope.is_parameter(target.target):
                    yield "step", node, None
        for call in calls_in(node):
            if self._is_step_call(call, scope):
                yield "step", call, None
                continue
            helpers = self._helpers(call)
            for helper in helpers:
                step, forward = self._summary(helper, seen if seen is not None else set())
                if step is not None:
                    yield "step", call, step
                if forward:
                    yield "forward", call, None
            if not helpers and self._is_forward_call(call):
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

    # --- what is a step, what is a forward ---------------------------------------------------

    def _is_step_call(self, call: cst.Call, scope: ParameterScope) -> bool:
        func = call.func
        qualified = self.names.qualified_name(func)
        if qualified is not None:
            # `torch._foreach_add_(params, grads, alpha=-lr)`; not over the gradients.
            last = qualified.rsplit(".", 1)[-1]
            args = positional_arguments(call)
            return (
                qualified.startswith("torch._foreach_")
                and last.endswith("_")
                and bool(args)
                and scope.is_parameter_collection(args[0])
            )
        if not isinstance(func, cst.Attribute):
            return False
        method = func.attr.value
        receiver = _receiver_word(func.value)
        if method == "step":
            return receiver is not None and _is_optimizer_word(receiver)
        if method == "load_state_dict":
            return (
                receiver is not None
                and not _is_optimizer_word(receiver)
                and ("sched" not in receiver)
            )
        if method in _IN_PLACE:
            return scope.is_parameter(func.value)
        return False

    def _is_forward_call(self, call: cst.Call) -> bool:
        func = call.func
        if self.names.qualified_name(func) is not None:
            return False
        if isinstance(func, cst.Name):
            name = func.value
            if name in _BUILTINS or name in self.index.classes or name in self.names.bindings:
                return False
            # `model(x)`, `net_g(z)`; not `metrics(y_hat, y)` or `load_images(path)`.
            return any(w in name.lower() for w in _MODEL_WORDS)
        if not isinstance(func, cst.Attribute):
            return False
        method = func.attr.value
        if method in _NOT_FORWARD:
            return False
        if method == "forward":
            return True
        receiver = dotted_name(func.value)
        if receiver == "self":
            return not _is_loss_word(method.lower())  # self.model(x), self.encoder(x)
        word = _receiver_word(func.value)
        return word is not None and any(w in word for w in _MODEL_WORDS)

    def _casts_cached(self, step: _Event, events: list[_Event]) -> bool:
        """A forward ran in the region before the update (or the update is in a loop with
        one, or in a helper that runs one): autocast has cached casts of the weights. An
        update before any forward (`model.load_state_dict(...)` right after building it)
        leaves nothing stale."""
        if step.loops or step.via is not None:
            return True
        return any(e.kind == "forward" and e.order < step.order for e in events)

    def _later_forward(self, step: _Event, events: list[_Event]) -> _Event | None:
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

    def _message(self, step: _Event, forward: _Event, region_text: str) -> str:
        what = f"`{code(step.node)}`"
        if step.via is not None:
            what += f" updates weights (`{code(step.via)}`, line {self.facts.line_of(step.via)})"
        else:
            what += " updates weights in place"
        loop = forward.order <= step.order
        when = (
            f"the next iteration of the loop runs `{code(forward.node)}`"
            if loop
            else f"`{code(forward.node)}` (line {self.facts.line_of(forward.node)}) runs later"
        )
        return (
            f"{what} inside a {region_text} and {when} in the same region: autocast caches the "
            "half-precision casts of the weights until the outermost region exits, so that "
            "forward silently uses the weights from before the update; end the autocast region "
            "before the update (wrap only the forward and the loss) or pass "
            "`cache_enabled=False`"
        )


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
    return code(region.node) if region.node is not None else region.spelling


def _is_data(node: cst.BaseAssignTargetExpression) -> bool:
    return isinstance(node, cst.Attribute) and node.attr.value == "data"


def _receiver_word(node: cst.BaseExpression) -> str | None:
    """The last name of a receiver, lower-cased: "optimizer" for `self.optimizer`,
    `optimizers[0]`."""
    if isinstance(node, cst.Subscript):
        node = node.value
    name = dotted_name(node)
    return name.rsplit(".", 1)[-1].lower() if name else None


def _is_optimizer_word(word: str) -> bool:
    return ("opt" in word or "scaler" in word) and "sched" not in word


def _is_loss_word(word: str) -> bool:
    return "loss" in word or "criterion" in word
