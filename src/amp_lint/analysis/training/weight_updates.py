"""What updates a model's weights in place and what runs its forward, read from the syntax
and from names (AMP307): `optimizer.step()`, `scaler.step(opt)`, `model.load_state_dict(...)`,
in-place tensor methods on parameters, `torch._foreach_*_` over them; `model(x)`,
`self.encoder(x)`, `model.forward(x)`.
"""

from __future__ import annotations

import builtins

import libcst as cst

from amp_lint.analysis.syntax.calls import ModuleIndex
from amp_lint.analysis.syntax.names import ModuleNames, dotted_name
from amp_lint.analysis.syntax.outline import positional_arguments
from amp_lint.analysis.training.parameter_collections import ParameterScope

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


def is_step_call(call: cst.Call, scope: ParameterScope, names: ModuleNames) -> bool:
    """A call that updates weights in place: an optimizer's (or a scaler's) `step`, a
    model's `load_state_dict`, an in-place method of a parameter, `torch._foreach_*_`."""
    func = call.func
    qualified = names.qualified_name(func)
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
            receiver is not None and not _is_optimizer_word(receiver) and ("sched" not in receiver)
        )
    if method in _IN_PLACE:
        return scope.is_parameter(func.value)
    return False


def is_forward_call(call: cst.Call, names: ModuleNames, index: ModuleIndex) -> bool:
    """A call that runs a model's forward: a model-like name or attribute called, or its
    `forward` method."""
    func = call.func
    if names.qualified_name(func) is not None:
        return False
    if isinstance(func, cst.Name):
        name = func.value
        if name in _BUILTINS or name in index.classes or name in names.bindings:
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


def is_data(node: cst.BaseAssignTargetExpression) -> bool:
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
