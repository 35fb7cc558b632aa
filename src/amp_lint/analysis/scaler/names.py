"""What the GradScaler order analysis (scaler_flow.py) recognises: scalers, optimizers,
gradient clipping and the calls of a statement in evaluation order. Names only; the walk
over statements is scaler_flow's."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import libcst as cst

from amp_lint.analysis.regions.finder import GRAD_SCALERS, accelerate_settings
from amp_lint.analysis.syntax.module import ModuleFacts
from amp_lint.analysis.syntax.names import ModuleNames, dotted_name
from amp_lint.analysis.syntax.outline import child_nodes, positional_arguments, walk_statements

SCALER_CONSTRUCTORS = frozenset(
    [
        *GRAD_SCALERS,
        "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler",
        "torch.distributed.fsdp.ShardedGradScaler",
    ]
)
CLIP_NAMES = ("clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "clip_grads_with_norm_")
CLIP_FUNCTIONS = frozenset(
    [f"torch.nn.utils.{name}" for name in CLIP_NAMES]
    + [f"torch.nn.utils.clip_grad.{name}" for name in CLIP_NAMES]
    + [
        "timm.utils.dispatch_clip_grad",
        "timm.utils.clip_grad.dispatch_clip_grad",
        "timm.utils.adaptive_clip_grad",
        "timm.utils.agc.adaptive_clip_grad",
    ]
)
# `model.clip_grad_norm_(max_norm)`: FSDP's method, which does not unscale.
CLIP_METHODS = frozenset(["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_"])
# Every scaler this module recognises has one of these in the source: a constructor
# (`GradScaler`, `ShardedGradScaler`), a use (`x.scale(loss)`, `unscale_`), or a name.
SCALER_VOCABULARY = (b"Scaler", b"scaler", b".scale(", b"unscale_")
AMP_WORDS = frozenset(["amp", "fp16", "float16", "scaler", "half", "mixed", "autocast"])
PER_STEP_WORDS = ("step", "train", "iter", "batch", "epoch", "fit", "optimi", "backward")


@dataclass
class ScalerNames:
    """Spellings (dotted names) of GradScaler instances and optimizers in the module."""

    names: ModuleNames
    enabled: set[str] = field(default_factory=set)
    disabled: set[str] = field(default_factory=set)
    optimizers: set[str] = field(default_factory=set)
    accelerators: frozenset[str] = frozenset()

    def is_scaler(self, node: cst.BaseExpression) -> bool:
        name = dotted_name(node)
        if name is None:
            return False
        if name in self.enabled:
            return True
        if name in self.disabled:
            return False
        return "scaler" in name.rsplit(".", 1)[-1].lower()

    def is_disabled(self, node: cst.BaseExpression) -> bool:
        name = dotted_name(node)
        return name is not None and name in self.disabled and name not in self.enabled

    def is_optimizer(self, node: cst.BaseExpression) -> bool:
        name = dotted_name(node)
        if name is None or self.is_scaler(node):
            return False
        if name in self.optimizers:
            return True
        last = name.rsplit(".", 1)[-1].lower()
        if "sched" in last:
            return False
        return "optim" in last or "opt" in last.split("_")

    def is_accelerator(self, node: cst.BaseExpression) -> bool:
        name = dotted_name(node)
        if name is None:
            return False
        return name in self.accelerators or name.rsplit(".", 1)[-1].lower().endswith("accelerator")


def same_scaler(a: cst.BaseExpression, b: cst.BaseExpression) -> bool:
    """Two spellings of what is taken to be the same scaler (`self.scaler` and
    `trainer.scaler` count as one: the last name decides)."""
    first, second = dotted_name(a), dotted_name(b)
    if first is None or second is None:
        return False
    return first.rsplit(".", 1)[-1] == second.rsplit(".", 1)[-1]


def collect_names(facts: ModuleFacts) -> ScalerNames:
    names = facts.names
    accelerate = accelerate_settings(facts.module, names)
    result = ScalerNames(names, accelerators=accelerate.instance_names)
    for statement in walk_statements(facts.module):
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            targets: list[cst.BaseExpression] = []
            value: cst.BaseExpression | None = None
            if isinstance(small, cst.Assign):
                targets = [t.target for t in small.targets]
                value = small.value
            elif isinstance(small, cst.AnnAssign) and small.value is not None:
                targets = [small.target]
                value = small.value
            if not isinstance(value, cst.Call):
                continue
            qualified = names.qualified_name(value.func)
            spelled = [t for t in (dotted_name(target) for target in targets) if t]
            if qualified in SCALER_CONSTRUCTORS:
                bucket = result.disabled if is_disabled(value) else result.enabled
                bucket.update(spelled)
            elif qualified is not None and is_optimizer_class(qualified):
                result.optimizers.update(spelled)
    for call in all_calls(facts.module):
        func = call.func
        if not isinstance(func, cst.Attribute):
            continue
        receiver = dotted_name(func.value)
        method = func.attr.value
        if method == "backward" and scale_call(func.value) is not None:
            scale = scale_call(func.value)
            assert scale is not None and isinstance(scale.func, cst.Attribute)
            scaler = dotted_name(scale.func.value)
            if scaler and scaler not in result.disabled:
                result.enabled.add(scaler)
        elif method == "unscale_" and receiver and receiver not in result.disabled:
            result.enabled.add(receiver)
    for call in all_calls(facts.module):
        func = call.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value in ("step", "unscale_")
            and result.is_scaler(func.value)
        ):
            arguments = positional_arguments(call)
            optimizer = dotted_name(arguments[0]) if arguments else None
            if optimizer:
                result.optimizers.add(optimizer)
    return result


def is_disabled(call: cst.Call) -> bool:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "enabled":
            return isinstance(arg.value, cst.Name) and arg.value.value == "False"
    return False


def is_optimizer_class(qualified: str) -> bool:
    parts = qualified.split(".")
    return (
        len(parts) >= 3
        and parts[:2] == ["torch", "optim"]
        and parts[2] not in ("lr_scheduler", "swa_utils")
    )


def scale_call(node: cst.BaseExpression) -> cst.Call | None:
    """`scaler.scale(...)` as written (the receiver of `.backward()`)."""
    if (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == "scale"
        and dotted_name(node.func.value) is not None
        and len(node.args) >= 1
    ):
        return node
    return None


def all_calls(node: cst.CSTNode) -> Iterator[cst.Call]:
    stack: list[cst.CSTNode] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Call):
            yield current
        stack.extend(child_nodes(current))


def calls_in_order(node: cst.CSTNode) -> list[cst.Call]:
    """Calls in evaluation order (arguments before the call), not entering nested defs."""
    order: list[cst.Call] = []

    def visit(current: cst.CSTNode) -> None:
        if isinstance(current, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return
        for child in child_nodes(current):
            visit(child)
        if isinstance(current, cst.Call):
            order.append(current)

    visit(node)
    return order


_INFINITY = frozenset(["math.inf", "torch.inf", "numpy.inf", "np.inf"])


def computes_norm_only(call: cst.Call) -> bool:
    """`clip_grad_norm_(params, float("inf"))`: a clip that never clips, called for the
    norm it returns (to log it)."""
    arguments = positional_arguments(call)
    limit = next((a.value for a in call.args if a.keyword and a.keyword.value == "max_norm"), None)
    if limit is None and len(arguments) >= 2:
        limit = arguments[1]
    if limit is None:
        return False
    if dotted_name(limit) in _INFINITY:
        return True
    return (
        isinstance(limit, cst.Call)
        and dotted_name(limit.func) == "float"
        and len(limit.args) == 1
        and isinstance(limit.args[0].value, cst.SimpleString)
        and limit.args[0].value.evaluated_value in ("inf", "Inf", "infinity")
    )
