"""Calls the interpreter follows inside one module: its functions and methods, instances of
its classes and of torch.nn modules, containers of layers (`nn.Sequential`), callables chosen
at run time (`losses[name](...)`). What it cannot see into is dispatch.py's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Optional

import libcst as cst

from amp_lint.analysis.autograd.graph import arguments_without_fp16_graphs, records_in
from amp_lint.analysis.interpreter.arguments import Arguments, is_static
from amp_lint.analysis.interpreter.frames import MAX_CALL_DEPTH, Frame, call_site
from amp_lint.analysis.project.entry_points import decorator_regions
from amp_lint.analysis.project.index import PROJECT_PREFIX
from amp_lint.analysis.regions.finder import region_from_call
from amp_lint.analysis.syntax.calls import ClassInfo
from amp_lint.analysis.syntax.outline import calls_in, walk_function_statements
from amp_lint.analysis.values.dtypes import (
    FLOAT32,
    OTHER,
    DTypeKind,
)
from amp_lint.analysis.values.semantics import (
    FLOAT32_OUTPUT_MODULES,
    NN_MODULE_OPS,
    PARAMETRIZED_MODULES,
    op_result,
    returns_same_module,
)
from amp_lint.analysis.values.value import UNKNOWN_VALUE, Env, Value, join_all

if TYPE_CHECKING:
    from amp_lint.analysis.interpreter.interpreter import Interpreter

# (function, argument values, regions, whether gradients are recorded): each function runs
# once per distinct context. Evaluated at import, so `Optional` rather than `X | None`
# (Python 3.9).
MemoKey = tuple[
    int,
    tuple[object, ...],
    tuple[tuple[Optional[str], Optional[str], Optional[bool]], ...],
    bool,
]

_SEQUENTIAL = ("torch.nn.Sequential", "torch.nn.modules.container.Sequential")
# einops layers that move elements around without changing their dtype.
_EINOPS_LAYERS = frozenset(
    f"einops.layers.{framework}.{layer}"
    for framework in ("torch",)
    for layer in ("Rearrange", "Reduce")
)


class LocalCalls:
    def __init__(self, interpreter: Interpreter) -> None:
        self.interpreter = interpreter
        self.index = interpreter.index
        self.memo: dict[MemoKey, Value] = {}
        self.in_progress: set[MemoKey] = set()
        self.defaults: dict[int, Value] = {}
        self.region_openers: dict[int, bool] = {}

    # --- calling a value -------------------------------------------------------------------

    def call_value(
        self, callee: Value, args: Arguments, site: cst.Call, frame: Frame
    ) -> Value | None:
        """What calling `callee` returns; None when nothing is known about what it is."""
        if callee.alternatives:
            results = [self.call_value(option, args, site, frame) for option in callee.alternatives]
            return join_all([r if r is not None else UNKNOWN_VALUE for r in results])
        if callee.preset:
            args = args.after(callee.preset)
        if callee.function is not None:
            bound = Value(OTHER, instance_of=callee.bound_to) if callee.bound_to else None
            return self.call_function(callee.function, args, site, frame, bound_self=bound)
        if callee.instance_of is not None:
            return self.call_instance(callee, args, site, frame)
        return None

    def call_function(
        self,
        function: cst.FunctionDef,
        args: Arguments,
        site: cst.Call,
        caller: Frame,
        bound_self: Value | None = None,
        *,
        force: bool = False,
    ) -> Value:
        own_regions = decorator_regions(
            function, self.interpreter.facts.names, self.interpreter.accelerate
        )
        worth_following = (
            force
            or caller.in_half
            or any(v.carries_half() for v in args.values)
            or bool(own_regions)
            or self.opens_region(function)
        )
        if not worth_following or caller.depth >= MAX_CALL_DEPTH:
            return UNKNOWN_VALUE
        regions = caller.regions + own_regions
        owner = self.index.owner.get(id(function))
        args = arguments_without_fp16_graphs(args)
        grad_enabled = records_in(function, self.interpreter.facts.names, caller.grad_enabled)
        region_keys = tuple(r.key for r in regions)
        key: MemoKey = (id(function), args.key(), region_keys, grad_enabled)

        def frame() -> Frame:
            self_value = bound_self or caller.env.get("self") if owner is not None else None
            callee = Frame(
                env=Env(),
                regions=regions,
                chain=(*caller.chain, call_site(self.interpreter.facts, site, caller)),
                function=function,
                self_class=self._dynamic_class(self_value, owner),
                assumption=caller.assumption,
                half_params=caller.half_params,
                dispatched=caller.dispatched,
                grad_enabled=grad_enabled,
                depth=caller.depth + 1,
            )
            if owner is not None and self_value is not None:
                callee.env.set("self", self_value)
            self.bind_arguments(function, args, callee, skip_self=owner is not None)
            if caller.active_region is not None and any(r.casts_inputs for r in own_regions):
                _cast_half_arguments(callee)
            return callee

        return self.run_memoised(key, function, frame)

    def _dynamic_class(self, self_value: Value | None, owner: ClassInfo | None) -> ClassInfo | None:
        """The class `self` is an instance of, where it is a subclass of the method's owner:
        `self._forward()` in a base class runs the subclass's override."""
        if self_value is not None:
            local = self.index.class_for_qualified(self_value.instance_of)
            if local is not None:
                return local
        return owner

    def run_memoised(
        self, key: MemoKey, function: cst.FunctionDef, make_frame: Callable[[], Frame]
    ) -> Value:
        """The function's joined return value in the frame's context; each context once,
        recursion cut (a call already in progress returns unknown)."""
        if key in self.memo:
            return self.memo[key]
        if key in self.in_progress:
            return UNKNOWN_VALUE
        self.in_progress.add(key)
        frame = make_frame()
        self.interpreter.exec_suite(function.body, frame)
        result = join_all(frame.returns) if frame.returns else Value(OTHER)
        self.in_progress.discard(key)
        self.memo[key] = result
        return result

    # --- instances and methods -------------------------------------------------------------

    def call_instance(
        self, callee: Value, args: Arguments, site: cst.Call, frame: Frame
    ) -> Value | None:
        """`module(x)`: the class's forward, the op of a known torch.nn module, the layers
        of an `nn.Sequential` in turn; None for instances of classes amp-lint cannot see."""
        instance = callee.instance_of
        assert instance is not None
        if instance.startswith(PROJECT_PREFIX):
            path, class_name = split_project_instance(instance)
            cross_file = self.interpreter.cross_file
            return cross_file.call_external(path, f"{class_name}.__call__", args, site, frame)
        local = self.index.class_for_qualified(instance)
        if local is not None:
            forward = self.find_method(local, "forward") or self.find_method(local, "__call__")
            if forward is None:
                return None  # its forward is inherited from a class amp-lint cannot see
            return self.call_function(forward, args, site, frame, bound_self=callee)
        if instance in _SEQUENTIAL:
            return self._run_layers(callee, args, site, frame)
        if instance in _EINOPS_LAYERS:
            return Value(args.positional[0].dtype) if args.positional else UNKNOWN_VALUE
        if not instance.startswith("torch.nn."):
            return None
        module_class = instance.rsplit(".", 1)[-1]
        inputs = [v.dtype for v in args.positional[:1]]
        weighted = module_class in FLOAT32_OUTPUT_MODULES or module_class in PARAMETRIZED_MODULES
        if frame.half_params is not None and frame.active_region is None and weighted:
            return Value(frame.half_params)  # its weights were cast with the model
        if module_class in FLOAT32_OUTPUT_MODULES:
            return Value(FLOAT32)  # float32 weights looked up, never autocast
        if module_class not in NN_MODULE_OPS:
            return UNKNOWN_VALUE
        region = frame.active_region
        if region is None and module_class in PARAMETRIZED_MODULES:
            # float32 weights outside autocast: only float32 input gives a defined result.
            return Value(FLOAT32) if inputs == [FLOAT32] else UNKNOWN_VALUE
        return Value(op_result(NN_MODULE_OPS[module_class], inputs, region))

    def _run_layers(self, sequence: Value, args: Arguments, site: cst.Call, frame: Frame) -> Value:
        """`nn.Sequential(a, b, c)(x)` is `c(b(a(x)))`; alike layers of unknown number are
        applied once."""
        layers = sequence.elements if sequence.elements is not None else ()
        if sequence.elements is None and sequence.each is not None:
            layers = (sequence.each,)
        if not layers:
            return UNKNOWN_VALUE
        value = args.positional[0] if args.positional else UNKNOWN_VALUE
        for layer in layers:
            result = self.call_value(layer, Arguments((value,)), site, frame)
            if result is None:
                result = self.interpreter.dispatch.opaque(site, None, args, frame)
            value = result
        return value

    def call_method(
        self, receiver: Value, method: str, args: Arguments, site: cst.Call, frame: Frame
    ) -> Value | None:
        local = self.index.class_for_qualified(receiver.instance_of)
        overridden = local is not None and self.find_method(local, method) is not None
        if not overridden and returns_same_module(method, site):
            return receiver  # `model = Net().to(device)` is still a Net
        instance = receiver.instance_of or ""
        if local is None and instance.startswith(PROJECT_PREFIX):
            path, class_name = split_project_instance(instance)
            cross_file = self.interpreter.cross_file
            return cross_file.call_external(path, f"{class_name}.{method}", args, site, frame)
        if local is None:
            return self.call_instance(receiver, args, site, frame) if method == "forward" else None
        function = self.find_method(local, method)
        if function is None:
            return None
        return self.call_function(function, args, site, frame, bound_self=receiver)

    def default_value(self, default: cst.BaseExpression) -> Value:
        """A parameter's default, evaluated once at module level (`eps=1e-10`)."""
        found = self.defaults.get(id(default))
        if found is None:
            found = self.interpreter.evaluator.evaluate(
                default, Frame(env=self.interpreter.module_env, regions=())
            )
            self.defaults[id(default)] = found
        return found

    def opens_region(self, function: cst.FunctionDef) -> bool:
        """The function enters autocast itself (`with torch.autocast(...)` in its body), so
        what it returns is worth knowing even when called from outside any region."""
        found = self.region_openers.get(id(function))
        if found is None:
            found = any(
                self._opens_region(item.item)
                for statement in walk_function_statements(function)
                if isinstance(statement, cst.With)
                for item in statement.items
            )
            self.region_openers[id(function)] = found
        return found

    def _opens_region(self, item: cst.BaseExpression) -> bool:
        """`with torch.autocast(...)`, or `with ctx:` over a module-level region object."""
        if isinstance(item, cst.Name):
            held = self.interpreter.module_env.get(item.value)
            return held is not None and held.region is not None
        names, accelerate = self.interpreter.facts.names, self.interpreter.accelerate
        return any(region_from_call(call, names, accelerate) is not None for call in calls_in(item))

    def method_resolution_order(self, info: ClassInfo) -> list[ClassInfo]:
        """The class and its bases defined in this module, nearest first."""
        order: list[ClassInfo] = []
        pending = [info]
        while pending:
            current = pending.pop(0)
            if any(seen is current for seen in order):
                continue
            order.append(current)
            pending.extend(b for b in map(self.index.classes.get, current.base_names) if b)
        return order

    def find_method(self, info: ClassInfo, method: str) -> cst.FunctionDef | None:
        for current in self.method_resolution_order(info):
            if method in current.methods:
                return current.methods[method]
        return None

    # --- calls amp-lint cannot see into ----------------------------------------------------

    # --- parameters ------------------------------------------------------------------------

    def bind_arguments(
        self, function: cst.FunctionDef, args: Arguments, frame: Frame, *, skip_self: bool
    ) -> None:
        if args.starred:
            return  # *args / **kwargs: which parameter gets what is not known
        self.bind_values(
            function, list(args.positional), dict(args.keywords), frame, skip_self=skip_self
        )

    def bind_values(
        self,
        function: cst.FunctionDef,
        positional: list[Value],
        keywords: dict[str, Value],
        frame: Frame,
        *,
        skip_self: bool,
        caller_seen: bool = True,
    ) -> None:
        """Bind parameters to the values given, and the others to their defaults. Without a
        caller in sight, a default is only a maybe: its value counts (`eps=1e-8` is usually
        left as it is) but no branch is decided by it (callers pass the optional mask of
        `if mask is not None:` and switch the flags of `if use_heinsen:`)."""
        params = list(function.params.posonly_params) + list(function.params.params)
        if skip_self and params and not is_static(function):
            params = params[1:]
        for param, value in zip(params, positional):
            frame.env.set(param.name.value, value)
        for param in params[len(positional) :] + list(function.params.kwonly_params):
            name = param.name.value
            if name in keywords:
                frame.env.set(name, keywords[name])
            elif param.default is not None:
                default = self.default_value(param.default)
                if not caller_seen:
                    # Maybe the default: `if use_heinsen:` and `if mask is not None:` run
                    # both ways, and where the None is a tensor its dtype is another path's.
                    maybe_none = default.dtype.kind is DTypeKind.NONE
                    default = replace(default, truth=None, maybe_none=maybe_none)
                frame.env.set(name, default)


def split_project_instance(instance: str) -> tuple[str, str]:
    path, _, class_name = instance[len(PROJECT_PREFIX) :].rpartition(":")
    return path, class_name


def _cast_half_arguments(callee: Frame) -> None:
    """`@custom_fwd(cast_inputs=torch.float32)` under an enabled region: the half inputs
    arrive as float32 (neosr's DISTS loss after its fix)."""
    for name, value in list(callee.env.values.items()):
        if value.dtype.is_half:
            callee.env.set(name, replace(value, dtype=FLOAT32))
