"""Half-precision parameters being trained, and how: the facts behind AMP305 and AMP308.

One model with float16/bfloat16 parameters (half_parameters.py) that a training setup
updates becomes one `HalfTraining`, whose `kind` says which bug it is, so that one bug never
gets two findings:

* "scaler": float16 parameters in a `torch.optim` optimizer stepped through the module's
  GradScaler (AMP305);
* "framework": float16 parameters trained by a framework's float16 mixed precision, which
  steps through a GradScaler of its own: `TrainingArguments(fp16=True)` given to a
  Hugging Face `Trainer`, `Accelerator(mixed_precision="fp16")` preparing the model and its
  optimizer, Lightning's `Trainer(precision="16-mixed")` fitting it (AMP305);
* "adam-eps": float16 parameters in a `torch.optim` Adam-family optimizer whose eps float16
  rounds to 0, with no GradScaler (AMP305);
* "plain": bfloat16 parameters, or float16 ones that none of the above covers, updated by a
  `torch.optim` optimizer with no float32 copy, in a scope that steps or backpropagates
  (AMP308); "lightning-true": Lightning's `precision="bf16-true"` converting a module whose
  `configure_optimizers` builds a `torch.optim` optimizer (AMP308).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from amp_lint.analysis.syntax.names import ModuleNames
from amp_lint.analysis.training.half_frameworks import (
    ScaledTraining,
    lightning_true_trainers,
    scaled_trainings,
)
from amp_lint.analysis.training.half_parameters import (
    Float32Trainables,
    HalfParameters,
    float32_copies,
    float32_trainables,
    half_parameters,
    node_order,
)
from amp_lint.analysis.training.training_setup import (
    ADAM_DEFAULT_EPS,
    OptimizerCall,
    Scope,
    TrainingSetup,
    optimizer_calls,
    training_setup,
)
from amp_lint.analysis.values.dtypes import BFLOAT16, FLOAT16
from amp_lint.analysis.values.literals import number_literal

# The smallest float16 subnormal is 2**-24; anything below half of it rounds to 0.
_FLOAT16_ROUNDS_TO_ZERO_BELOW = 2.0**-25


@dataclass(frozen=True)
class HalfTraining:
    kind: str  # "scaler", "framework", "adam-eps", "plain" or "lightning-true"
    source: HalfParameters
    optimizers: tuple[OptimizerCall, ...] = ()
    training: ScaledTraining | None = None
    # "adam-eps": the eps and how it was written ("the default eps=1e-8", "eps=1e-10").
    eps: float | None = None
    eps_text: str = ""
    # Where the optimizer is (for "lightning-true", the `configure_optimizers` method's).
    extra: dict[str, str] = field(default_factory=dict, compare=False)


_LAST: list[tuple[cst.Module, list[HalfTraining]]] = []


def half_trainings(module: cst.Module, names: ModuleNames) -> list[HalfTraining]:
    """The module's half-parameter trainings, computed once for AMP305 and AMP308."""
    for cached, found in _LAST:
        if cached is module:
            return found
    found = _half_trainings(module, names)
    _LAST[:] = [(module, found)]
    return found


def _half_trainings(module: cst.Module, names: ModuleNames) -> list[HalfTraining]:
    setup = training_setup(module, names)
    context = _ModuleContext(setup, names)
    found: list[HalfTraining] = []
    for scope in setup.scopes:
        sources = half_parameters(scope, names)
        if not sources:
            continue
        for source in sources:
            if context.treated(scope).cover(source.holders):
                continue
            training = context.classify(scope, source)
            if training is not None:
                found.append(training)
    found.extend(lightning_true_trainings(setup, names))
    return found


class _ModuleContext:
    """Per-scope facts computed once: optimizers, float32 treatments, class siblings."""

    def __init__(self, setup: TrainingSetup, names: ModuleNames) -> None:
        self.setup = setup
        self.names = names
        self._optimizers: dict[int, list[OptimizerCall]] = {}
        self._treated: dict[int, Float32Trainables] = {}
        self.classes: dict[int, list[Scope]] = {}
        for scope in setup.scopes:
            if scope.owner is not None:
                self.classes.setdefault(id(scope.owner), []).append(scope)
        scalers = {id(s.call) for s in setup.enabled_scalers}
        self.with_scaler = {
            id(scope) for scope in setup.scopes if any(id(c) in scalers for c in scope.calls())
        }

    def siblings(self, scope: Scope) -> list[Scope]:
        return self.classes.get(id(scope.owner), []) if scope.owner is not None else []

    def optimizers(self, scope: Scope) -> list[OptimizerCall]:
        if id(scope) not in self._optimizers:
            self._optimizers[id(scope)] = optimizer_calls(scope, self.names)
        return self._optimizers[id(scope)]

    def treated(self, scope: Scope) -> Float32Trainables:
        """Float32 treatments of the scope, and of its class's other methods."""
        if id(scope) not in self._treated:
            parts = [float32_trainables(s, self.names) for s in (scope, *self.siblings(scope))]
            self._treated[id(scope)] = Float32Trainables(
                any(p.every_model for p in parts), frozenset().union(*(p.models for p in parts))
            )
        return self._treated[id(scope)]

    def has_scaler(self, scope: Scope) -> bool:
        """A GradScaler created at module level, in this function or class, or passed in."""
        return scope.mentions("scaler") or any(
            id(other) in self.with_scaler
            for other in (self.setup.scopes[0], scope, *self.siblings(scope))
        )

    def classify(self, scope: Scope, source: HalfParameters) -> HalfTraining | None:
        optimizers = self._optimizers_of(scope, source)
        if _after_training(source, scope):
            return None
        if source.precision == FLOAT16:
            if optimizers and self.has_scaler(scope):
                return HalfTraining("scaler", source, tuple(optimizers))
            for training in scaled_trainings(scope, self.names, self.setup.accelerate):
                if training.model in source.holders:
                    return HalfTraining("framework", source, tuple(optimizers), training)
            adam = _adam_eps_underflow(optimizers)
            if adam is not None:
                optimizer, eps, text = adam
                return HalfTraining("adam-eps", source, (optimizer,), eps=eps, eps_text=text)
        plain = [o for o in optimizers if not _copies_parameters(o, scope, self.names)]
        if plain and self._steps(scope):
            return HalfTraining("plain", source, tuple(plain))
        return None

    def _optimizers_of(self, scope: Scope, source: HalfParameters) -> list[OptimizerCall]:
        """`torch.optim` optimizers of the model's parameters: in the scope, or for a
        `self.` model in the class's other methods."""
        found = [o for o in self.optimizers(scope) if o.parameter_owners & source.holders]
        for other in self.siblings(scope):
            for optimizer in self.optimizers(other):
                shared = optimizer.parameter_owners & source.holders
                if optimizer not in found and any(h.startswith("self.") for h in shared):
                    found.append(optimizer)
        return found

    def _steps(self, scope: Scope) -> bool:
        """The scope (or its class) backpropagates or steps an optimizer."""
        return any(_steps_in(other) for other in (scope, *self.siblings(scope)))


def _steps_in(scope: Scope) -> bool:
    return any(
        isinstance(call.func, cst.Attribute) and call.func.attr.value in ("backward", "step")
        for call in scope.calls()
    )


def _after_training(source: HalfParameters, scope: Scope) -> bool:
    """A cast after every backward/step call of its function: half precision for export or
    inference after training."""
    order = node_order(scope)
    steps = [
        order[id(call)]
        for call in scope.calls()
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in ("backward", "step")
    ]
    return bool(steps) and all(step < source.order for step in steps)


def _adam_eps_underflow(
    optimizers: list[OptimizerCall],
) -> tuple[OptimizerCall, float, str] | None:
    for adam in optimizers:
        if not adam.is_adam:
            continue
        node = adam.eps()
        if node is None:
            eps: float | None = ADAM_DEFAULT_EPS
            text = "the default eps=1e-8"
        else:
            eps = number_literal(node)
            text = "eps=" + " ".join(cst.Module([]).code_for_node(node).split())
        if eps is not None and eps < _FLOAT16_ROUNDS_TO_ZERO_BELOW:
            return adam, float(eps), text
    return None


def _copies_parameters(optimizer: OptimizerCall, scope: Scope, names: ModuleNames) -> bool:
    """An optimizer given float32 copies of the parameters (master weights), directly or one
    assignment back (`master = [p.float() for p in model.parameters()]; AdamW(master)`)."""
    arguments = [arg.value for arg in optimizer.call.args]
    wanted = {arg.value for arg in arguments if isinstance(arg, cst.Name)}
    for node in scope.nodes():
        if isinstance(node, cst.Assign) and any(
            isinstance(t.target, cst.Name) and t.target.value in wanted for t in node.targets
        ):
            arguments.append(node.value)
    return any(float32_copies(argument, names) for argument in arguments)


def lightning_true_trainings(setup: TrainingSetup, names: ModuleNames) -> list[HalfTraining]:
    """`Trainer(precision="bf16-true")` in a module whose LightningModule builds a
    `torch.optim` optimizer in `configure_optimizers`: Lightning converts the module to
    bfloat16 before `configure_optimizers` runs."""
    trainers = lightning_true_trainers(setup, names)
    if not trainers:
        return []
    context = _ModuleContext(setup, names)
    for scope in setup.scopes:
        node = scope.node
        if not isinstance(node, cst.FunctionDef) or node.name.value != "configure_optimizers":
            continue
        if context.treated(scope).every_model or context.treated(scope).models:
            continue
        plain = [
            o
            for o in context.optimizers(scope)
            if any(owner == "self" or owner.startswith("self.") for owner in o.parameter_owners)
            and not _copies_parameters(o, scope, names)
        ]
        if plain:
            return [
                HalfTraining(
                    "lightning-true",
                    HalfParameters(call, BFLOAT16, frozenset(), False, 0),
                    (plain[0],),
                    extra={"setting": setting},
                )
                for call, setting in trainers
            ]
    return []
