"""Models whose parameters are float16 or bfloat16, per scope: cast (`model.half()`,
`model.to(torch.bfloat16)`) or loaded so (`AutoModel.from_pretrained(..., torch_dtype=
torch.float16)`), and the code that makes their trained parameters float32 again or freezes
them (PEFT adapters, `prepare_model_for_kbit_training`, `p.data = p.data.float()`,
`model.requires_grad_(False)`).

Syntactic facts for AMP305 and AMP308, on top of training_setup's scopes and casts.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from amp_lint.analysis.regions.finder import call_argument
from amp_lint.analysis.syntax.names import ModuleNames, dotted_name
from amp_lint.analysis.syntax.outline import subtree_nodes
from amp_lint.analysis.training.training_setup import Scope, cast_precision, half_casts
from amp_lint.analysis.values.dtypes import BFLOAT16, FLOAT16, dtype_from_torch_name
from amp_lint.analysis.values.literals import string_literal

# Module methods that return the module itself (`from_pretrained(...).to(device).train()`).
_MODULE_CHAIN = frozenset(["cuda", "cpu", "to", "half", "bfloat16", "float", "train", "eval"])
# `torch_dtype="float16"`: transformers and diffusers also take the dtype's name.
_DTYPE_NAMES = {"float16": FLOAT16, "half": FLOAT16, "bfloat16": BFLOAT16}
# Loaders of things that have no trainable half parameters of their own (tokenizers,
# configs), load for inference (pipelines) or load adapters (PEFT, float32 since 0.11).
_NOT_A_MODEL = ("Tokenizer", "Processor", "Config", "FeatureExtractor", "Pipeline", "Peft")
# Keywords of a quantized load: its weights cannot be trained without adapters.
_QUANTIZED = frozenset(["quantization_config", "load_in_8bit", "load_in_4bit"])
# Calls that give a model float32 trainable parameters or freeze it, by the model they take
# (argument or receiver): PEFT's adapters are float32 since PEFT 0.11
# (`autocast_adapter_dtype=True`), `prepare_model_for_kbit_training` casts the
# non-quantized parameters to float32, diffusers' `cast_training_params` casts the trainable
# ones, DeepSpeed keeps float32 master weights.
_FLOAT32_TRAINABLES = frozenset(
    [
        "get_peft_model",
        "PeftModel",
        "PeftModelForCausalLM",
        "LoraModel",
        "inject_adapter_in_model",
        "add_adapter",
        "prepare_model_for_kbit_training",
        "prepare_model_for_int8_training",
        "cast_training_params",
        "requires_grad_",
        # loralib's and litgpt's: freezes all but the LoRA factors, whose small magnitudes
        # keep AdamW's steps above bfloat16's rounding (repository triage, litgpt examples).
        "mark_only_lora_as_trainable",
        "initialize",  # deepspeed.initialize(model=...)
    ]
)


@dataclass(frozen=True)
class HalfParameters:
    """A model made float16/bfloat16: `model.half()` or `AutoModel.from_pretrained(...,
    torch_dtype=torch.float16)`."""

    call: cst.Call  # the call that decides the dtype (the cast, or the loader)
    precision: str  # FLOAT16 or BFLOAT16
    # The names that hold the model: the receiver's, and an assignment's target.
    holders: frozenset[str]
    loaded: bool  # loaded in the half dtype, rather than converted
    order: int  # where it is in its scope (an index of `Scope.nodes()`, source order)


def half_parameters(scope: Scope, names: ModuleNames) -> list[HalfParameters]:
    """The scope's models with half parameters, cast or loaded so, in source order."""
    order = node_order(scope)
    found = [
        HalfParameters(cast.call, cast.precision, cast.holders, False, order.get(id(cast.call), 0))
        for cast in half_casts(scope, names)
    ]
    for node in scope.nodes():
        value = _statement_value(node)
        if value is None:
            continue
        load = _load_in_chain(value, names)
        if load is None:
            continue
        call, precision, loaded = load
        if any(existing.call is call for existing in found):
            continue
        found.append(
            HalfParameters(call, precision, _holders(node), loaded, order.get(id(call), 0))
        )
    return sorted(found, key=lambda source: source.order)


def node_order(scope: Scope) -> dict[int, int]:
    return {id(node): index for index, node in enumerate(scope.nodes())}


def _statement_value(node: cst.CSTNode) -> cst.Call | None:
    if isinstance(node, (cst.Expr, cst.Assign)) and isinstance(node.value, cst.Call):
        return node.value
    return None


def _holders(node: cst.CSTNode) -> frozenset[str]:
    if not isinstance(node, cst.Assign):
        return frozenset()
    return frozenset(
        name for target in node.targets if (name := dotted_name(target.target)) is not None
    )


def _load_in_chain(call: cst.Call, names: ModuleNames) -> tuple[cst.Call, str, bool] | None:
    """`X.from_pretrained(..., torch_dtype=torch.float16).to(device)` and
    `X.from_pretrained(...).half()`: the call deciding the final dtype, that dtype, and
    whether it is the loader's. None when the chain does not start at a loader or ends
    float32 (`.float()`)."""
    chain: list[cst.Call] = []
    node: cst.BaseExpression = call
    while (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value in _MODULE_CHAIN
    ):
        chain.append(node)
        node = node.func.value
    if not isinstance(node, cst.Call) or not _is_model_loader(node):
        return None
    precision = loader_precision(node, names)
    decided: cst.Call = node
    for method in reversed(chain):  # innermost first
        if _casts_to_float32(method, names):
            precision, decided = None, method
            continue
        cast = cast_precision(method, names)
        if cast is not None:
            precision, decided = cast, method
    if precision is None:
        return None
    return decided, precision, decided is node


def _is_model_loader(call: cst.Call) -> bool:
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value != "from_pretrained":
        return False
    receiver = dotted_name(func.value) or ""
    if any(word in receiver for word in _NOT_A_MODEL):
        return False
    return not any(arg.keyword is not None and arg.keyword.value in _QUANTIZED for arg in call.args)


def loader_precision(call: cst.Call, names: ModuleNames) -> str | None:
    """FLOAT16/BFLOAT16 for `torch_dtype=`/`dtype=` (transformers 5's spelling) written as
    `torch.float16`, `torch.half`, `torch.bfloat16` or their names as strings."""
    for keyword in ("torch_dtype", "dtype"):
        node = call_argument(call, 99, keyword)
        if node is None:
            continue
        text = string_literal(node)
        if text is not None:
            return _DTYPE_NAMES.get(text)
        dtype = dtype_from_torch_name(names.qualified_name(node))
        if dtype is not None and dtype.is_half:
            return dtype.precision
        return None
    return None


def _casts_to_float32(call: cst.Call, names: ModuleNames) -> bool:
    """`.float()` or `.to(torch.float32)` (any argument naming float32)."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return False
    if func.attr.value == "float" and not call.args:
        return True
    if func.attr.value != "to":
        return False
    for arg in call.args:
        dtype = dtype_from_torch_name(names.qualified_name(arg.value))
        if dtype is not None and not dtype.is_half and dtype.is_floating_tensor:
            return True
    return False


@dataclass(frozen=True)
class Float32Trainables:
    """What a scope does that gives models float32 trainable parameters, or none."""

    # A loop over parameters assigning `p.data = ...` or `p.requires_grad = ...`: which model
    # it treats is not told, so every model of the scope counts as treated.
    every_model: bool
    # Models passed to (or receiving) a call that adds float32 adapters, upcasts or freezes.
    models: frozenset[str]

    def cover(self, holders: frozenset[str]) -> bool:
        if self.every_model:
            return True
        return any(
            model == holder or model.startswith(holder + ".") or holder.startswith(model + ".")
            for model in self.models
            for holder in holders
        )


def float32_trainables(scope: Scope, names: ModuleNames) -> Float32Trainables:
    every_model = False
    models: set[str] = set()
    for node in scope.nodes():
        if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
            targets = node.targets if isinstance(node, cst.Assign) else [node]
            for target in targets:
                if isinstance(target.target, cst.Attribute) and target.target.attr.value in (
                    "data",
                    "requires_grad",
                ):
                    every_model = True
        elif isinstance(node, cst.Call):
            models |= _treated_models(node, names)
    return Float32Trainables(every_model, frozenset(models))


def _treated_models(call: cst.Call, names: ModuleNames) -> set[str]:
    func = call.func
    last = func.attr.value if isinstance(func, cst.Attribute) else dotted_name(func) or ""
    last = last.rsplit(".", 1)[-1]
    receiver = dotted_name(func.value) if isinstance(func, cst.Attribute) else None
    if last == "from_pretrained" and receiver and "Peft" in receiver:
        last = "PeftModel"
    if last not in _FLOAT32_TRAINABLES:
        if last in ("float",) and receiver and not call.args:
            return {receiver}  # model.float()
        if last == "to" and receiver and _casts_to_float32(call, names):
            return {receiver}
        return set()
    found = {receiver} if receiver and last in ("add_adapter", "requires_grad_") else set()
    for arg in call.args:
        name = dotted_name(arg.value)
        if name:
            found.add(name)
    return found


def float32_copies(expression: cst.BaseExpression, names: ModuleNames) -> bool:
    """Whether an optimizer's argument makes float32 copies of the parameters it names
    (`[p.detach().float() for p in model.parameters()]`): master weights."""
    for node in subtree_nodes(expression):
        if isinstance(node, cst.Call) and (
            _casts_to_float32(node, names)
            or (isinstance(node.func, cst.Attribute) and node.func.attr.value == "float")
        ):
            return True
    return False
