"""Calls the interpreter follows inside one module: its functions and methods, instances of
its classes and of torch.nn modules, containers of layers (`nn.Sequential`), callables chosen
at run time (`losses[name](...)`), and calls it cannot see into.

A call it cannot see into (a model received as a parameter, built by a registry or a config)
made under an enabled float16/bfloat16 region returns the region's dtype as an assumption:
that is what autocast makes of a model whose last layer is a Linear, convolution or matmul.
Results that are clearly not activations (losses, metrics, tokenizers, norms, embeddings) do
not get it; everything else stays unknown. Such calls are also recorded, so that the project
can analyse its own modules under the region (dispatch).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import libcst as cst

from amp_lint.analysis.autocast_region import AutocastRegion
from amp_lint.analysis.calls import CallSite, ClassInfo
from amp_lint.analysis.dtypes import (
    BFLOAT16,
    FLOAT16,
    FLOAT32,
    NON_TENSOR_KINDS,
    OTHER,
    DType,
    DTypeKind,
)
from amp_lint.analysis.entry_points import decorator_regions
from amp_lint.analysis.frames import MAX_CALL_DEPTH, Frame
from amp_lint.analysis.outline import source_text
from amp_lint.analysis.project import PROJECT_PREFIX
from amp_lint.analysis.semantics import (
    FLOAT32_OUTPUT_MODULES,
    NN_MODULE_OPS,
    PARAMETRIZED_MODULES,
    op_result,
    returns_same_module,
)
from amp_lint.analysis.values import UNKNOWN_VALUE, Env, Value, join_all

if TYPE_CHECKING:
    from amp_lint.analysis.interpreter import Interpreter

# (function, argument values, regions): each function runs once per distinct context.
MemoKey = tuple[int, tuple[object, ...], tuple[tuple[str | None, str | None, bool | None], ...]]

_SEQUENTIAL = ("torch.nn.Sequential", "torch.nn.modules.container.Sequential")
# einops layers that move elements around without changing their dtype.
_EINOPS_LAYERS = frozenset(
    f"einops.layers.{framework}.{layer}"
    for framework in ("torch",)
    for layer in ("Rearrange", "Reduce")
)
# Words in a name that say the value it holds is no activation: a loss or a metric.
_RESULTS = frozenset(
    [
        "loss",
        "losses",
        "criterion",
        "criterions",
        "crit",
        "metric",
        "metrics",
        "evaluator",
        "evaluate",
        "accuracy",
        "acc",
        "scaler",
        "optimizer",
        "scheduler",
        "logger",
        "writer",
    ]
)
# Words in a callee's name that say what it returns is no activation: tokens, data, float32
# embeddings looked up by index.
_NOT_LAYERS = _RESULTS | frozenset(
    [
        "tokenizer",
        "tokenize",
        "processor",
        "embed",
        "embeds",
        "embedding",
        "embeddings",
        "sampler",
        "loader",
        "dataset",
        "collate",
        "collator",
        "transform",
        "transforms",
        "augment",
    ]
)
# Layers whose output CUDA autocast makes float32 (layer_norm, group_norm, softmax): not
# half under autocast, though they are in a model cast to half.
_FLOAT32_UNDER_AUTOCAST = frozenset(["norm", "layernorm", "groupnorm", "rmsnorm", "ln", "softmax"])
_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")


_MODEL_WORDS = frozenset(
    [
        "model",
        "models",
        "net",
        "network",
        "module",
        "generator",
        "discriminator",
        "encoder",
        "decoder",
        "backbone",
        "transformer",
        "unet",
        "vae",
        "classifier",
        "teacher",
        "student",
        "lm",
    ]
)


def is_model_name(name: str) -> bool:
    """`model`, `self.net`, `text_encoder`, `unet`: a name that holds a model."""
    last = name.rsplit(".", 1)[-1]
    return any(word.lower() in _MODEL_WORDS for word in _WORDS.findall(last))


def _words(name: str) -> set[str]:
    return {word.lower() for word in _WORDS.findall(name.rsplit(".", 1)[-1])}


def is_activation_name(name: str) -> bool:
    """False for a variable or key that holds a loss or metric (`loss`, `loss_dict`,
    `outputs["loss"]`, `metrics`)."""
    return not _words(name) & _RESULTS


def is_layer_name(name: str, *, autocast: bool = True) -> bool:
    """False for a callee that returns no activation: `criterion`, `self.loss_fn`,
    `tokenizer`, `self.embed`; under autocast also `self.norm1` and `softmax`, which
    autocast runs in float32."""
    words = _words(name)
    if words & _NOT_LAYERS:
        return False
    return not (autocast and words & _FLOAT32_UNDER_AUTOCAST)


@dataclass(frozen=True)
class Arguments:
    positional: tuple[Value, ...] = ()
    keywords: tuple[tuple[str, Value], ...] = ()
    # `*args` / `**kwargs` in the call: which parameter gets what is not known.
    starred: bool = False

    @property
    def values(self) -> tuple[Value, ...]:
        return self.positional + tuple(value for _, value in self.keywords)

    def key(self) -> tuple[object, ...]:
        """What tells two calls' analyses apart: dtypes, constants and containers."""
        return (
            tuple(_memo_value(v) for v in self.positional),
            tuple((k, _memo_value(v)) for k, v in self.keywords),
            self.starred,
        )

    def after(self, preset: tuple[tuple[str | None, Value], ...]) -> Arguments:
        """These arguments following those a `functools.partial` gave in advance."""
        positional = tuple(value for name, value in preset if name is None)
        keywords = dict((name, value) for name, value in preset if name is not None)
        keywords.update(self.keywords)
        return Arguments(positional + self.positional, tuple(keywords.items()), self.starred)

    def carries_tensor_data(self) -> bool:
        """Some argument may be a tensor or hold tensors (not only numbers and strings)."""
        return self.starred or any(
            v.dtype.kind not in NON_TENSOR_KINDS or v.elements is not None or v.each is not None
            for v in self.values
        )


def _memo_value(value: Value) -> object:
    return (value.portable(), value.instance_of)


@dataclass(frozen=True)
class OpaqueCall:
    """A call made under an enabled region that amp-lint could not see into."""

    region: AutocastRegion
    site: CallSite
    text: str
    method: str = "forward"  # `model.forward_loss(batch)` runs forward_loss


@dataclass(frozen=True)
class ModelCast:
    """`model.half()` (or `.to(torch.bfloat16)`) of a model amp-lint cannot resolve."""

    dtype: DType
    site: CallSite
    text: str


class LocalCalls:
    def __init__(self, interpreter: Interpreter) -> None:
        self.interpreter = interpreter
        self.index = interpreter.index
        self.memo: dict[MemoKey, Value] = {}
        self.in_progress: set[MemoKey] = set()
        self.opaque_calls: list[OpaqueCall] = []
        self.model_casts: list[ModelCast] = []

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
            or self.interpreter.opens_region(function)
        )
        if not worth_following or caller.depth >= MAX_CALL_DEPTH:
            return UNKNOWN_VALUE
        regions = caller.regions + own_regions
        owner = self.index.owner.get(id(function))
        key: MemoKey = (id(function), args.key(), tuple(r.key for r in regions))

        def frame() -> Frame:
            self_value = bound_self or caller.env.get("self") if owner is not None else None
            callee = Frame(
                env=Env(),
                regions=regions,
                chain=(*caller.chain, CallSite(self.interpreter.facts.path, site, self._line)),
                function=function,
                self_class=self._dynamic_class(self_value, owner),
                assumption=caller.assumption,
                half_params=caller.half_params,
                dispatched=caller.dispatched,
                depth=caller.depth + 1,
            )
            if owner is not None and self_value is not None:
                callee.env.set("self", self_value)
            self.bind_arguments(function, args, callee, skip_self=owner is not None)
            return callee

        return self.run_memoised(key, function, frame)

    def _line(self, node: cst.CSTNode) -> int:
        return self.interpreter.facts.line_of(node)

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
            value = result if result is not None else self.opaque(site, None, args, frame)
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

    def find_method(self, info: ClassInfo, method: str) -> cst.FunctionDef | None:
        for current in self.interpreter.method_resolution_order(info):
            if method in current.methods:
                return current.methods[method]
        return None

    # --- calls amp-lint cannot see into ----------------------------------------------------

    def opaque(
        self,
        site: cst.Call,
        callee_name: str | None,
        args: Arguments,
        frame: Frame,
        *,
        method: str = "forward",
    ) -> Value:
        """A call of something amp-lint cannot see into: under an enabled float16/bfloat16
        region, with tensor arguments, it is assumed to return the region's dtype, unless
        its name says it is no activation (a loss, metric, tokenizer, norm, embedding)."""
        region = frame.active_region
        if region is None and frame.half_params is not None and args.carries_tensor_data():
            if callee_name is not None and not is_layer_name(callee_name, autocast=False):
                return UNKNOWN_VALUE
            return Value(frame.half_params)  # a layer of the model cast to half
        if region is None or region.dtype not in (FLOAT16, BFLOAT16, None):
            return UNKNOWN_VALUE
        if not args.carries_tensor_data():
            return UNKNOWN_VALUE
        text = source_text(site)
        if not frame.dispatched:
            # The code it runs may be one of the project's modules, a loss among them.
            site_line = CallSite(self.interpreter.facts.path, site, self._line)
            self.opaque_calls.append(OpaqueCall(region, site_line, text, method))
        if callee_name is not None and not is_layer_name(callee_name):
            return UNKNOWN_VALUE
        dtype = region.lower_precision
        why = (
            f"`{text}` returns {dtype.describe()} under autocast, as a model ending in a "
            "Linear, convolution or matmul does"
        )
        return Value(dtype.assuming(why))

    def cast_model(self, dtype: DType, site: cst.Call, frame: Frame) -> None:
        """Record `model.half()` of a model amp-lint cannot resolve, for dispatch."""
        if frame.dispatched:
            return
        site_line = CallSite(self.interpreter.facts.path, site, self._line)
        self.model_casts.append(ModelCast(dtype, site_line, source_text(site)))

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
                default = self.interpreter.default_value(param.default)
                if not caller_seen:
                    # Maybe the default: `if use_heinsen:` and `if mask is not None:` run
                    # both ways, and where the None is a tensor its dtype is another path's.
                    maybe_none = default.dtype.kind is DTypeKind.NONE
                    default = replace(default, truth=None, maybe_none=maybe_none)
                frame.env.set(name, default)


def parameter_names(function: cst.FunctionDef, *, skip_self: bool) -> list[str]:
    params = [*function.params.posonly_params, *function.params.params]
    if skip_self and params and not is_static(function):
        params = params[1:]
    return [p.name.value for p in (*params, *function.params.kwonly_params)]


def is_static(function: cst.FunctionDef) -> bool:
    return any(
        isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod"
        for d in function.decorators
    )


def split_project_instance(instance: str) -> tuple[str, str]:
    path, _, class_name = instance[len(PROJECT_PREFIX) :].rpartition(":")
    return path, class_name
