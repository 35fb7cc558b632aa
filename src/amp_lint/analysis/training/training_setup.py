"""How a module sets up mixed-precision training: its autocast calls, GradScalers, backward
calls, models cast to a half dtype and the optimizers their parameters go to.

Syntactic facts, collected per scope (a function body, or the module's top-level code, nested
functions and classes excluded), for rules about the training setup rather than about values:
AMP304 (float16 training without a GradScaler), AMP305 (half parameters with a GradScaler or
Adam) and AMP306 (a GradScaler for bfloat16).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import libcst as cst

from amp_lint.analysis.regions.finder import (
    GRAD_SCALERS,
    AccelerateSettings,
    AutocastRegion,
    accelerate_settings,
    call_argument,
    region_from_call,
)
from amp_lint.analysis.syntax.names import ModuleNames, dotted_name
from amp_lint.analysis.syntax.outline import child_nodes, positional_arguments, subtree_nodes
from amp_lint.analysis.values.dtypes import BFLOAT16, FLOAT16, dtype_from_torch_name

# Module methods that return the module itself (so `Net().cuda().half()` is still the model).
_MODULE_CHAIN = frozenset(["cuda", "cpu", "to", "half", "bfloat16", "float", "train", "eval"])
_ADAM_FAMILY = frozenset(["Adam", "AdamW", "Adamax", "NAdam", "RAdam", "SparseAdam"])
# Adam's default eps, in every torch.optim Adam-family class.
ADAM_DEFAULT_EPS = 1e-8


@dataclass(eq=False)
class Scope:
    """A function body, or the module's top-level code."""

    node: cst.FunctionDef | cst.Module
    # The class the function is a method of, when it is one.
    owner: cst.ClassDef | None = None
    _nodes: list[cst.CSTNode] | None = field(default=None, init=False, repr=False)

    def nodes(self) -> list[cst.CSTNode]:
        """Every node of the scope, without nested functions', classes' and lambdas' own."""
        if self._nodes is None:
            self._nodes = list(self._walk())
        return self._nodes

    def _walk(self) -> Iterator[cst.CSTNode]:
        body = self.node.body if isinstance(self.node, cst.FunctionDef) else self.node
        stack: list[cst.CSTNode] = [body]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(
                reversed(
                    [
                        child
                        for child in child_nodes(node)
                        if not isinstance(child, (cst.FunctionDef, cst.ClassDef, cst.Lambda))
                    ]
                )
            )

    def calls(self) -> Iterator[cst.Call]:
        for node in self.nodes():
            if isinstance(node, cst.Call):
                yield node

    def mentions(self, word: str) -> bool:
        """Whether a name or attribute of the scope contains `word` (lower case)."""
        return any(
            isinstance(node, cst.Name) and word in node.value.lower() for node in self.nodes()
        )


def scopes(module: cst.Module) -> list[Scope]:
    found = [Scope(module)]

    def walk(node: cst.CSTNode, owner: cst.ClassDef | None) -> None:
        for child in child_nodes(node):
            if isinstance(child, cst.FunctionDef):
                found.append(Scope(child, owner))
                walk(child.body, None)
            elif isinstance(child, cst.ClassDef):
                walk(child.body, child)
            elif not isinstance(child, cst.BaseExpression):
                walk(child, owner)

    walk(module, None)
    return found


# Autocast, GradScaler, backward


@dataclass(frozen=True)
class AutocastCall:
    call: cst.Call
    region: AutocastRegion


def autocast_calls(
    calls: Iterator[cst.Call] | list[cst.Call],
    names: ModuleNames,
    accelerate: AccelerateSettings,
) -> list[AutocastCall]:
    found = []
    for call in calls:
        region = region_from_call(call, names, accelerate)
        if region is not None:
            found.append(AutocastCall(call, region))
    return found


@dataclass(frozen=True)
class ScalerCall:
    call: cst.Call
    qualified: str
    # The `enabled` argument: True/False when a literal (True when absent), None otherwise.
    enabled: bool | None
    # The argument node holding `enabled`, when the call passes one.
    enabled_arg: cst.Arg | None


def grad_scaler_calls(
    calls: Iterator[cst.Call] | list[cst.Call], names: ModuleNames
) -> list[ScalerCall]:
    found = []
    for call in calls:
        qualified = names.qualified_name(call.func)
        if qualified not in GRAD_SCALERS:
            continue
        # torch.amp.GradScaler(device, init_scale, growth_factor, backoff_factor,
        # growth_interval, enabled); the device-specific ones have no device argument.
        position = 5 if GRAD_SCALERS[qualified] is None else 4
        arg = _argument(call, position, "enabled")
        if arg is None:
            starred = any(a.star for a in call.args)
            found.append(ScalerCall(call, qualified, None if starred else True, None))
            continue
        found.append(ScalerCall(call, qualified, _bool_literal(arg.value), arg))
    return found


def backpropagated_tensor(call: cst.Call, names: ModuleNames) -> cst.BaseExpression | None:
    """The tensor a backward call differentiates: `loss` in `loss.backward()`,
    `torch.autograd.backward(loss)` and `torch.autograd.grad(loss, params)`; None for any
    other call.

    `accelerator.backward(loss)`, `engine.backward(loss)` and `fabric.backward(loss)` take the
    loss as their first argument and scale it themselves (when so configured); a tensor's
    `.backward()` is called without positional arguments (its `gradient` is rarely passed)."""
    func = call.func
    qualified = names.qualified_name(func)
    if qualified in ("torch.autograd.backward", "torch.autograd.grad"):
        keyword = "tensors" if qualified.endswith("backward") else "outputs"
        return call_argument(call, 0, keyword)
    if not isinstance(func, cst.Attribute) or func.attr.value != "backward":
        return None
    if qualified is not None:
        return None
    receiver = dotted_name(func.value)
    if positional_arguments(call) and not (receiver and "loss" in receiver.lower()):
        return None
    return func.value


# Models cast to a half dtype, and their optimizers


@dataclass(frozen=True)
class HalfCast:
    """`model.half()`, `model.to(torch.float16)`, `model = Net().to(device, torch.bfloat16)`."""

    call: cst.Call  # the casting call
    precision: str  # FLOAT16 or BFLOAT16
    # The names that hold the cast object: the receiver's, and an assignment's target.
    holders: frozenset[str]


def cast_precision(call: cst.Call, names: ModuleNames) -> str | None:
    """FLOAT16 or BFLOAT16 for `.half()`, `.bfloat16()` and `.to(...)` with a half dtype."""
    func = call.func
    if not isinstance(func, cst.Attribute) or names.qualified_name(func) is not None:
        return None
    method = func.attr.value
    if method == "half" and not call.args:
        return FLOAT16
    if method == "bfloat16" and not call.args:
        return BFLOAT16
    if method != "to":
        return None
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value != "dtype":
            continue
        dtype = dtype_from_torch_name(names.qualified_name(arg.value))
        if dtype is not None and dtype.is_half and dtype.precision is not None:
            return dtype.precision
    return None


def half_casts(scope: Scope, names: ModuleNames) -> list[HalfCast]:
    found = []
    for node in scope.nodes():
        if isinstance(node, cst.Expr) and isinstance(node.value, cst.Call):
            cast = _cast_in_chain(node.value, names)
            if cast is not None:
                call, precision, root = cast
                found.append(HalfCast(call, precision, frozenset([root] if root else [])))
        elif isinstance(node, cst.Assign) and isinstance(node.value, cst.Call):
            cast = _cast_in_chain(node.value, names)
            if cast is None:
                continue
            call, precision, root = cast
            holders = {root} if root else set()
            for target in node.targets:
                name = dotted_name(target.target)
                if name:
                    holders.add(name)
            found.append(HalfCast(call, precision, frozenset(holders)))
    return found


def _cast_in_chain(call: cst.Call, names: ModuleNames) -> tuple[cst.Call, str, str | None] | None:
    """The half cast in a method chain such as `Net().to(device).half()`, with the chain's
    root name (`model` in `model.cuda().half()`; None for a constructor call)."""
    cast: tuple[cst.Call, str] | None = None
    node: cst.BaseExpression = call
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        if node.func.attr.value not in _MODULE_CHAIN:
            if node.func.attr.value[:1].isupper():
                break  # `nn.Linear(8, 8).half()`: the chain starts at a constructor
            return None
        precision = cast_precision(node, names)
        if precision is not None and cast is None:
            cast = (node, precision)
        node = node.func.value
    if cast is None:
        return None
    return cast[0], cast[1], dotted_name(node)


@dataclass(frozen=True)
class OptimizerCall:
    call: cst.Call
    qualified: str
    # The dotted names whose `.parameters()` / `.named_parameters()` the optimizer receives.
    parameter_owners: frozenset[str]

    @property
    def class_name(self) -> str:
        return self.qualified.rsplit(".", 1)[-1]

    @property
    def is_adam(self) -> bool:
        return self.class_name in _ADAM_FAMILY

    def eps(self) -> cst.BaseExpression | None:
        # Adam(params, lr, betas, eps, ...): eps is the fourth argument in every Adam class.
        arg = _argument(self.call, 3, "eps")
        return arg.value if arg is not None else None


def optimizer_calls(scope: Scope, names: ModuleNames) -> list[OptimizerCall]:
    found = []
    assigned = _assignments(scope)
    for call in scope.calls():
        qualified = names.qualified_name(call.func)
        if qualified is None or not qualified.startswith("torch.optim."):
            continue
        last = qualified.rsplit(".", 1)[-1]
        if not last[:1].isupper() or last in ("Optimizer", "lr_scheduler"):
            continue
        owners = set()
        for arg in call.args:
            owners |= parameter_owners(arg.value)
            # `groups = [{"params": model.parameters()}]; Adam(groups)`: one assignment back.
            if isinstance(arg.value, cst.Name) and arg.value.value in assigned:
                for value in assigned[arg.value.value]:
                    owners |= parameter_owners(value)
        found.append(OptimizerCall(call, qualified, frozenset(owners)))
    return found


def _assignments(scope: Scope) -> dict[str, list[cst.BaseExpression]]:
    assigned: dict[str, list[cst.BaseExpression]] = {}
    for node in scope.nodes():
        if isinstance(node, cst.Assign):
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    assigned.setdefault(target.target.value, []).append(node.value)
    return assigned


def parameter_owners(expression: cst.BaseExpression) -> set[str]:
    """`m` for every `m.parameters()` / `m.named_parameters()` in the expression."""
    owners = set()
    for node in subtree_nodes(expression):
        if (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value in ("parameters", "named_parameters")
        ):
            owner = dotted_name(node.func.value)
            if owner:
                owners.add(owner)
    return owners


# Module-wide facts


@dataclass(frozen=True)
class TrainingSetup:
    scopes: list[Scope]
    autocasts: list[AutocastCall]
    scalers: list[ScalerCall]
    accelerate: AccelerateSettings

    @property
    def enabled_scalers(self) -> list[ScalerCall]:
        return [scaler for scaler in self.scalers if scaler.enabled is not False]


_LAST: list[tuple[cst.Module, TrainingSetup]] = []


def training_setup(module: cst.Module, names: ModuleNames) -> TrainingSetup:
    """The module's setup, computed once for the rules that share it."""
    for cached_module, setup in _LAST:
        if cached_module is module:
            return setup
    setup = _training_setup(module, names)
    _LAST[:] = [(module, setup)]
    return setup


def _training_setup(module: cst.Module, names: ModuleNames) -> TrainingSetup:
    accelerate = accelerate_settings(module, names)
    all_scopes = scopes(module)
    calls = [call for scope in all_scopes for call in scope.calls()]
    return TrainingSetup(
        all_scopes,
        autocast_calls(calls, names, accelerate),
        grad_scaler_calls(calls, names),
        accelerate,
    )


def mentions_float16(module: cst.Module, names: ModuleNames) -> bool:
    """Whether the module names `torch.float16` / `torch.half` anywhere (a dtype chosen at
    run time between float16 and bfloat16 names both)."""
    for node in subtree_nodes(module):
        if isinstance(node, (cst.Attribute, cst.Name)):
            dtype = dtype_from_torch_name(names.qualified_name(node))
            if dtype is not None and dtype.is_float16:
                return True
    return False


def snippet(node: cst.CSTNode) -> str:
    """The node's code on one line, shortened to 40 characters, for messages."""
    text = " ".join(cst.Module([]).code_for_node(node).split())
    text = text.replace("( ", "(").replace(", )", ")").replace(",)", ")")
    return text if len(text) <= 40 else text[:37] + "..."


def _argument(call: cst.Call, position: int, keyword: str) -> cst.Arg | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg
    positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
    return positional[position] if position < len(positional) else None


def _bool_literal(node: cst.BaseExpression) -> bool | None:
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None
