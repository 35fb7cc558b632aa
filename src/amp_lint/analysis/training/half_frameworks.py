"""Frameworks training a model with float16 mixed precision, which steps through a GradScaler
of their own, by the name of the model they train (for AMP305), and Lightning's
`precision="bf16-true"`, which converts the module to bfloat16 (for AMP308).

* Hugging Face: `Trainer(model=model, args=TrainingArguments(..., fp16=True))` (also
  `Seq2SeqTrainingArguments`, trl's `SFTTrainer` with an `SFTConfig`); the arguments inline or
  assigned in the same function or at module level. Only a literal `fp16=True` counts.
* accelerate: `accelerator.prepare(model, optimizer, ...)` with a module-level
  `Accelerator(mixed_precision="fp16")`, the optimizer built on `model.parameters()`.
* Lightning: `trainer.fit(model)` (or `Trainer(...).fit(model)`) where
  `trainer = Trainer(precision="16-mixed")` (or `16`, `"16"`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from amp_lint.analysis.regions.finder import AccelerateSettings, call_argument
from amp_lint.analysis.syntax.names import ModuleNames, dotted_name
from amp_lint.analysis.training.training_setup import Scope, TrainingSetup, parameter_owners
from amp_lint.analysis.values.dtypes import FLOAT16
from amp_lint.analysis.values.literals import string_literal

_HF_PACKAGES = ("transformers", "trl")
_LIGHTNING_PACKAGES = ("lightning", "pytorch_lightning")
_LIGHTNING_FLOAT16_MIXED = frozenset(["16", "16-mixed"])
_LIGHTNING_BF16_TRUE = frozenset(["bf16-true"])
# Optimizers of any library (accelerate wraps whichever it is given in its GradScaler).
_OPTIMIZER_NAME = re.compile(r"adam|sgd|lion|optim|adafactor|lamb|rmsprop|prodigy", re.I)


@dataclass(frozen=True)
class ScaledTraining:
    """A framework call that trains `model` under float16 mixed precision."""

    call: cst.Call  # `Trainer(...)`, `accelerator.prepare(...)`, `trainer.fit(...)`
    framework: str  # "transformers", "accelerate" or "lightning"
    setting: str  # the setting as written: `TrainingArguments(fp16=True)`
    model: str  # the dotted name of the model trained


def scaled_trainings(
    scope: Scope, names: ModuleNames, accelerate: AccelerateSettings
) -> list[ScaledTraining]:
    assigned = _assigned_calls(scope)
    found = _hf_trainers(scope, names, assigned)
    found += _accelerate_prepares(scope, accelerate, assigned)
    found += _lightning_fits(scope, names, assigned)
    return found


def _assigned_calls(scope: Scope) -> dict[str, cst.Call]:
    """`name = Call(...)` in the scope, by target (the last assignment wins)."""
    found: dict[str, cst.Call] = {}
    for node in scope.nodes():
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call):
            for target in node.targets:
                name = dotted_name(target.target)
                if name:
                    found[name] = node.value
    return found


def _package(qualified: str | None) -> str:
    return (qualified or "").partition(".")[0]


def _last(qualified: str | None) -> str:
    return (qualified or "").rsplit(".", 1)[-1]


def _hf_trainers(
    scope: Scope, names: ModuleNames, assigned: dict[str, cst.Call]
) -> list[ScaledTraining]:
    found = []
    for call in scope.calls():
        qualified = names.qualified_name(call.func)
        if _package(qualified) not in _HF_PACKAGES or not _last(qualified).endswith("Trainer"):
            continue
        model = dotted_name(call_argument(call, 0, "model") or cst.Name("_"))
        arguments = call_argument(call, 1, "args")
        if isinstance(arguments, (cst.Name, cst.Attribute)):
            arguments = assigned.get(dotted_name(arguments) or "")
        if model is None or not isinstance(arguments, cst.Call):
            continue
        class_name = _last(names.qualified_name(arguments.func))
        if _package(names.qualified_name(arguments.func)) not in _HF_PACKAGES or not (
            class_name.endswith("Arguments") or class_name.endswith("Config")
        ):
            continue
        flag = call_argument(arguments, 99, "fp16")
        if isinstance(flag, cst.Name) and flag.value == "True":
            found.append(ScaledTraining(call, "transformers", f"{class_name}(fp16=True)", model))
    return found


def _accelerate_prepares(
    scope: Scope, accelerate: AccelerateSettings, assigned: dict[str, cst.Call]
) -> list[ScaledTraining]:
    if accelerate.dtype != FLOAT16 or accelerate.enabled is False:
        return []
    trained = _optimized_models(scope, assigned)
    found = []
    for call in scope.calls():
        func = call.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "prepare":
            continue
        if dotted_name(func.value) not in accelerate.instance_names:
            continue
        prepared = {dotted_name(arg.value) for arg in call.args}
        for model in sorted(name for name in prepared if name in trained):
            setting = 'Accelerator(mixed_precision="fp16")'
            found.append(ScaledTraining(call, "accelerate", setting, model))
    return found


def _optimized_models(scope: Scope, assigned: dict[str, cst.Call]) -> set[str]:
    """Models whose `.parameters()` an optimizer of any library receives (directly, or one
    assignment back: `params = model.parameters(); opt = AdamW8bit(params)`)."""
    found: set[str] = set()
    for call in scope.calls():
        callee = dotted_name(call.func) or ""
        if not _OPTIMIZER_NAME.search(callee.rsplit(".", 1)[-1]):
            continue
        for arg in call.args:
            found |= parameter_owners(arg.value)
            name = dotted_name(arg.value)
            if name in assigned:
                found |= parameter_owners(assigned[name])
    return found


def _lightning_fits(
    scope: Scope, names: ModuleNames, assigned: dict[str, cst.Call]
) -> list[ScaledTraining]:
    found = []
    for call in scope.calls():
        func = call.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "fit":
            continue
        receiver = func.value
        trainer = (
            assigned.get(dotted_name(receiver) or "")
            if isinstance(receiver, (cst.Name, cst.Attribute))
            else receiver
        )
        if not isinstance(trainer, cst.Call):
            continue
        setting = _lightning_precision(trainer, names, _LIGHTNING_FLOAT16_MIXED)
        model = dotted_name(call_argument(call, 0, "model") or cst.Name("_"))
        if setting is not None and model is not None:
            found.append(ScaledTraining(call, "lightning", setting, model))
    return found


def _lightning_precision(call: cst.Call, names: ModuleNames, wanted: frozenset[str]) -> str | None:
    """`Trainer(precision=...)` as written, when the Trainer is Lightning's and the precision
    a literal in `wanted`."""
    if _package(names.qualified_name(call.func)) not in _LIGHTNING_PACKAGES:
        return None
    if _last(names.qualified_name(call.func)) != "Trainer":
        return None
    precision = call_argument(call, 99, "precision")
    if precision is None:
        return None
    text = precision.value if isinstance(precision, cst.Integer) else string_literal(precision)
    if text not in wanted:
        return None
    return f"Trainer(precision={cst.Module([]).code_for_node(precision)})"


def lightning_true_trainers(setup: TrainingSetup, names: ModuleNames) -> list[tuple[cst.Call, str]]:
    """Lightning Trainers with `precision="bf16-true"` anywhere in the module."""
    found = []
    for scope in setup.scopes:
        for call in scope.calls():
            setting = _lightning_precision(call, names, _LIGHTNING_BF16_TRUE)
            if setting is not None:
                found.append((call, setting))
    return found
