"""Frameworks that enter autocast for the user: Lightning's `Trainer(precision="16-mixed")`,
Hugging Face's `TrainingArguments(fp16=True)` and accelerate's `accelerator.prepare(model)`.

Each becomes a ClassAssumption: methods of certain classes (anywhere in the project) that the
framework runs under autocast. The Trainer is usually built in `train.py` and the module it
trains defined in `models.py`, so assumptions found in one file apply to every linted file.
The same assumptions can be set in `[tool.amp-lint]` for code whose trainer is not linted.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from amp_lint.analysis.project.index import ClassAssumption, ProjectIndex
from amp_lint.analysis.regions.finder import AccelerateSettings, AutocastRegion
from amp_lint.analysis.syntax.module import ModuleFacts
from amp_lint.analysis.syntax.names import dotted_name
from amp_lint.analysis.syntax.outline import calls_in, small_statements
from amp_lint.analysis.values.dtypes import BFLOAT16, FLOAT16
from amp_lint.analysis.values.literals import string_literal
from amp_lint.settings.config import Config

LIGHTNING_METHODS = ("training_step", "validation_step", "test_step", "predict_step", "forward")
_LIGHTNING_PACKAGES = ("lightning", "pytorch_lightning")
# Lightning precision settings that run the step under autocast, and its dtype.
_LIGHTNING_AUTOCAST = {
    "16": FLOAT16,
    "16-mixed": FLOAT16,
    "bf16": BFLOAT16,
    "bf16-mixed": BFLOAT16,
}
_HF_ARGUMENTS = ("TrainingArguments", "Seq2SeqTrainingArguments")
_HF_FLAGS = {"fp16": FLOAT16, "bf16": BFLOAT16}
# What the code of a file making a framework assumption spells: a Lightning `Trainer`, the
# `TrainingArguments` classes, an accelerator's `prepare`. Checked on the bytes first, as a
# walk over every call of a large model file costs more than its analysis.
_FRAMEWORK_WORDS = (b"Trainer", b"TrainingArguments", b"prepare")


def lightning_assumption(
    precision: str, spelling: str, *, configured: bool = False
) -> ClassAssumption | None:
    dtype = _LIGHTNING_AUTOCAST.get(precision)
    if dtype is None:
        return None
    region = AutocastRegion(None, dtype, True, spelling)
    where = f"`{spelling}` in [tool.amp-lint]" if configured else f"Lightning's `{spelling}`"
    return _lightning(region, f"a LightningModule step, run under {dtype} autocast by {where}")


def _lightning(region: AutocastRegion, why: str) -> ClassAssumption:
    return ClassAssumption(("LightningModule",), LIGHTNING_METHODS, region, why)


def hf_trainer_assumptions(region: AutocastRegion) -> list[ClassAssumption]:
    why = f"run under {region.dtype} autocast by the Hugging Face Trainer's `{region.spelling}`"
    return [
        ClassAssumption(("Trainer", "Seq2SeqTrainer"), ("compute_loss",), region, why),
        ClassAssumption(("PreTrainedModel",), ("forward",), region, why),
    ]


def configured_assumptions(config: Config) -> list[ClassAssumption]:
    """`lightning-precision`, `transformers-trainer-precision` from `[tool.amp-lint]`."""
    found: list[ClassAssumption] = []
    if config.lightning_precision is not None:
        spelling = f'lightning-precision = "{config.lightning_precision}"'
        assumption = lightning_assumption(config.lightning_precision, spelling, configured=True)
        if assumption is not None:
            found.append(assumption)
    dtype = _HF_FLAGS.get(config.transformers_trainer_precision or "")
    if dtype is not None:
        spelling = f'transformers-trainer-precision = "{config.transformers_trainer_precision}"'
        found.extend(hf_trainer_assumptions(AutocastRegion(None, dtype, True, spelling)))
    return found


def framework_assumptions(
    facts: ModuleFacts, accelerate: AccelerateSettings, project: ProjectIndex | None
) -> list[ClassAssumption]:
    """The assumptions this module's own code makes: trainers built with mixed precision,
    models handed to `accelerator.prepare`."""
    found: list[ClassAssumption] = []
    if facts.source is not None and not any(word in facts.source for word in _FRAMEWORK_WORDS):
        return found
    for call in _all_calls(facts.module):
        qualified = facts.names.qualified_name(call.func) or ""
        package = qualified.partition(".")[0]
        last = qualified.rsplit(".", 1)[-1]
        if package in _LIGHTNING_PACKAGES and last == "Trainer":
            found.extend(_lightning_trainer(call, facts))
        elif package == "transformers" and last in _HF_ARGUMENTS:
            found.extend(_hf_arguments(call, last))
        elif _is_prepare(call, accelerate):
            found.extend(_prepared_models(call, facts, accelerate, project))
    return found


def _lightning_trainer(call: cst.Call, facts: ModuleFacts) -> list[ClassAssumption]:
    argument = _keyword(call, "precision") or _unpacked_keyword(call, "precision", facts)
    if argument is None:
        return []
    literal = _literal_text(argument)
    spelling = f"Trainer(precision={_source(argument)})"
    if literal is not None:
        assumption = lightning_assumption(literal, spelling)
        return [assumption] if assumption is not None else []
    # `precision=args.precision`: decided at run time, so a region that may be on.
    region = AutocastRegion(None, None, None, spelling)
    why = f"a LightningModule step, run under autocast by Lightning's `{spelling}` when mixed"
    return [_lightning(region, why)]


def _hf_arguments(call: cst.Call, class_name: str) -> list[ClassAssumption]:
    found = []
    for flag, dtype in _HF_FLAGS.items():
        argument = _keyword(call, flag)
        if argument is None or (isinstance(argument, cst.Name) and argument.value == "False"):
            continue
        enabled = True if isinstance(argument, cst.Name) and argument.value == "True" else None
        spelling = f"{class_name}({flag}={_source(argument)})"
        found.extend(hf_trainer_assumptions(AutocastRegion(None, dtype, enabled, spelling)))
    return found


def _is_prepare(call: cst.Call, accelerate: AccelerateSettings) -> bool:
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value != "prepare":
        return False
    receiver = dotted_name(func.value)
    return receiver is not None and receiver in accelerate.instance_names


def _prepared_models(
    call: cst.Call,
    facts: ModuleFacts,
    accelerate: AccelerateSettings,
    project: ProjectIndex | None,
) -> list[ClassAssumption]:
    """`model = accelerator.prepare(model)`: accelerate wraps the model's forward in
    autocast when the Accelerator has mixed precision."""
    if accelerate.enabled is False or accelerate.dtype not in (FLOAT16, BFLOAT16, None):
        return []
    constructors = _constructors(facts)
    region = AutocastRegion(None, accelerate.dtype, accelerate.enabled, "accelerator.prepare")
    found = []
    for arg in call.args:
        name = dotted_name(arg.value)
        constructor = constructors.get(name or "")
        if constructor is None:
            continue
        class_name, path = _class_of(constructor, facts, project)
        if class_name is None:
            continue
        dtype = accelerate.dtype or "float16/bfloat16"
        why = (
            f"`{class_name}.forward` runs under {dtype} autocast: "
            f"the model goes through `{_source(call)}`"
        )
        found.append(ClassAssumption((class_name,), ("forward",), region, why, path))
    return found


def _constructors(facts: ModuleFacts) -> dict[str, cst.Call]:
    """`model = Net(...)` (or `Net(...).to(device)`) anywhere in the module, by target."""
    found: dict[str, cst.Call] = {}
    for small in small_statements(facts.module):
        if not isinstance(small, cst.Assign) or not isinstance(small.value, cst.Call):
            continue
        call = small.value
        while isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Call):
            call = call.func.value  # Net(...).to(device).train()
        for target in small.targets:
            name = dotted_name(target.target)
            if name:
                found.setdefault(name, call)
    return found


def _class_of(
    call: cst.Call, facts: ModuleFacts, project: ProjectIndex | None
) -> tuple[str | None, str | None]:
    """The class a constructor call builds and the linted file defining it."""
    if isinstance(call.func, cst.Name) and call.func.value not in facts.names.bindings:
        name = call.func.value
        return (name, facts.path) if name[:1].isupper() else (None, None)
    qualified = facts.names.qualified_name(call.func)
    if qualified is None or project is None:
        return None, None
    target = project.resolve(qualified, facts.path)
    if target is None or not target.looks_like_class:
        return None, None
    return target.attribute, target.path


def _all_calls(module: cst.Module) -> Iterator[cst.Call]:
    for small in small_statements(module):
        yield from calls_in(small)


def _keyword(call: cst.Call, name: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return None


def _unpacked_keyword(call: cst.Call, name: str, facts: ModuleFacts) -> cst.BaseExpression | None:
    """`Trainer(**cfg)` where the module builds `cfg = dict(precision="16-mixed", ...)`,
    `cfg = {"precision": ...}` or sets `cfg["precision"] = ...`."""
    unpacked = {dotted_name(a.value) for a in call.args if a.star == "**"}
    unpacked.discard(None)
    if not unpacked:
        return None
    for small in small_statements(facts.module):
        if not isinstance(small, cst.Assign):
            continue
        for target in small.targets:
            if dotted_name(target.target) in unpacked:
                found = _dict_entry(small.value, name)
                if found is not None:
                    return found
            if (
                isinstance(target.target, cst.Subscript)
                and dotted_name(target.target.value) in unpacked
                and _subscript_key(target.target) == name
            ):
                return small.value
    return None


def _dict_entry(node: cst.BaseExpression, name: str) -> cst.BaseExpression | None:
    if isinstance(node, cst.Dict):
        for element in node.elements:
            if isinstance(element, cst.DictElement) and _literal_text(element.key) == name:
                return element.value
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "dict":
        return _keyword(node, name)
    return None


def _subscript_key(node: cst.Subscript) -> str | None:
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return None
    return _literal_text(node.slice[0].slice.value)


def _literal_text(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.Integer):
        return node.value
    return string_literal(node)


def _source(node: cst.CSTNode) -> str:
    """The node's code on one line: it is quoted in messages (`Trainer(precision=...)`)."""
    return " ".join(cst.Module([]).code_for_node(node).split())
