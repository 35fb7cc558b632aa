"""AMP305 half-params-with-scaler: float16 parameters under a GradScaler or an Adam optimizer."""

from __future__ import annotations

from collections.abc import Iterator

from amp_lint.analysis.scaler.names import SCALER_VOCABULARY
from amp_lint.analysis.syntax.module import ModuleFacts
from amp_lint.analysis.training.half_training import HalfTraining, half_trainings
from amp_lint.analysis.training.training_setup import ADAM_DEFAULT_EPS, snippet
from amp_lint.rules.base import Report, Rule
from amp_lint.rules.common import brief

UNSCALE_ERROR = "ValueError: Attempting to unscale FP16 gradients."


class HalfParamsWithScaler(Rule):
    code = "AMP305"
    name = "half-params-with-scaler"
    vocabulary = (*SCALER_VOCABULARY, b"half", b"float16")
    summary = (
        "Checks for models cast or loaded to float16 (`model.half()`, "
        "`from_pretrained(..., torch_dtype=torch.float16)`) whose parameters are trained through "
        "a GradScaler (directly, or by `TrainingArguments(fp16=True)`, accelerate's "
        '`mixed_precision="fp16"` or Lightning\'s `precision="16-mixed"`), or by an Adam-family '
        "optimizer with an eps that float16 rounds to 0 (the default 1e-8)."
    )
    why = f"""\
Mixed precision keeps the **parameters in float32** and lets autocast run each op in float16.
Casting the model itself to float16 gives float16 parameters, float16 gradients and float16
optimizer state, and two things break:

* **GradScaler refuses float16 gradients.** `scaler.step(optimizer)` (or
  `scaler.unscale_(optimizer)`) raises

  ```
  {UNSCALE_ERROR}
  ```

  (measured with `torch.amp.GradScaler("cpu")` on torch 2.13; the check is in
  `GradScaler._unscale_grads_` and is the same on CUDA). Unscaling in float16 would lose the
  very gradients the scaler exists to protect.
* **Adam's eps rounds to 0.** Adam, AdamW, Adamax, NAdam and RAdam keep their moment
  estimates in the parameters' dtype and divide by `sqrt(v) + eps`. The default eps, 1e-8,
  is 0 in float16, and after the first step `v = 0.001 * grad**2` underflows to 0 for any
  gradient below about 5e-3: the division gives 0/0 = NaN for a zero gradient and ±inf for
  a small one, and the parameter is destroyed at the first step. Measured on CPU (torch
  2.13, both the for-loop and the foreach implementation): gradients [0, 1e-4, 0.1] on
  float16 parameters of 1.0 give parameters [nan, -inf, 0.999] after one Adam step (and
  gradients 1e-3, 3e-3 and 5e-3 all give -inf); eps=1e-4 gives [1.0, 0.999, 0.999].

The most reported form loads the model in float16,
`AutoModelForCausalLM.from_pretrained(..., torch_dtype=torch.float16)` (`dtype=` in
transformers 5, or `torch_dtype="float16"`), and trains it with the framework's float16 mixed
precision: the Hugging Face `Trainer` with `TrainingArguments(fp16=True)` and
`Accelerator(mixed_precision="fp16")` step through accelerate's GradScaler, Lightning's
`precision="16-mixed"` (or `16`) through its own, and each raises the same ValueError at the
first optimizer step (huggingface/transformers#23165, Lightning-AI/pytorch-lightning#5140,
huggingface/diffusers#1246). Measured with a module converted by `from_pretrained(...,
torch_dtype=torch.float16)` on torch 2.13 (the `loaded-half-model` case): the first
`scaler.step` raises it. A LoRA adapter over a frozen float16 model is fine with current
PEFT: since PEFT 0.11 (huggingface/peft#1706) `get_peft_model` and
`PeftModel.from_pretrained` upcast float16/bfloat16 adapter weights to float32
(`autocast_adapter_dtype=True`); older PEFT created them in the base model's float16, which
is how oobabooga/textgen's LoRA training crashed (its fix upcast the trainable parameters
with `param.data = param.data.float()`)."""
    example = """\
import torch

model = Net().cuda().half()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
scaler = torch.amp.GradScaler("cuda")

for x, y in loader:
    loss = loss_fn(model(x.half()), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)  # ValueError: Attempting to unscale FP16 gradients.
    scaler.update()
"""
    fixed_example = """\
import torch

model = Net().cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
scaler = torch.amp.GradScaler("cuda")

for x, y in loader:
    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
"""
    fix_safety = """\
There is no fix (lint only): the cure is to keep the parameters in float32 and run the
forward pass under `torch.autocast(..., dtype=torch.float16)`, which changes memory use,
speed and numerics, and usually the input casts around the model too. For deliberately
pure-float16 training without a GradScaler, an Adam eps that float16 can represent
(1e-4 is common) avoids the NaN, but small gradients still vanish."""
    known_limitations = """\
The cast or load and the training are matched by name: the optimizer must receive
`model.parameters()` (or `named_parameters()`, in any expression, such as parameter groups)
of the name the cast was written on or assigned to, in the same function, or in the same
class for `self.` attributes; a framework must receive that name in the same function
(`Trainer(model=model, args=...)` with literal `fp16=True` in arguments built there or
inline; `accelerator.prepare(model, optimizer)` with a module-level
`Accelerator(mixed_precision="fp16")` and an optimizer built on `model.parameters()`;
`trainer.fit(model)` with `Trainer(precision="16-mixed")`). A model loaded in one module and
trained in another, a dtype or a flag held in a variable or chosen by a condition
(`torch.bfloat16 if bf16 else torch.float16`), and loads that unpack a dict of arguments
(`from_pretrained(path, **params)`) are not seen. Models wrapped in PEFT adapters
(`get_peft_model`, `PeftModel`, `add_adapter`), prepared by `prepare_model_for_kbit_training`,
cast back (`.float()`, diffusers' `cast_training_params`), frozen (`requires_grad_(False)`)
or handed to `deepspeed.initialize` are not flagged, nor is any model in a function that
assigns `p.data` or `p.requires_grad` in a loop. Quantized loads (`quantization_config=`,
`load_in_4bit=`) are not flagged. A cast written after every `backward()`/`step()` of its
function (half precision for export or inference after training) is not flagged. The
GradScaler must be created in the same module (enabled, or enabled by a run-time
condition); Adam-family optimizers are `torch.optim`'s, and an eps held in a variable is
assumed to be fine. Float16 parameters trained with none of these (plain SGD, or Adam with
an eps float16 holds) are AMP308's."""

    def check_module(self, facts: ModuleFacts) -> Iterator[Report]:
        if facts.source is not None and not any(word in facts.source for word in _WORDS):
            # Every report names a `torch.optim.` optimizer (spelled `optim`) or a framework's
            # trainer; the vocabulary alone admits every file saying `half`.
            return
        for training in half_trainings(facts.module, facts.names):
            texts = _message(training, facts)
            if texts is not None:
                message, summary = texts
                yield Report(training.source.call, message, summary=summary)


# What a file reporting AMP305 spells: an optimizer, a framework's trainer or `prepare`.
_WORDS = (b"optim", b"Trainer", b"prepare")
_KEEP = (
    "keep the parameters float32 and run the forward pass under "
    "`torch.autocast(..., dtype=torch.float16)` instead"
)


def _message(training: HalfTraining, facts: ModuleFacts) -> tuple[str, str] | None:
    """The message and its summary, or None when the training is not AMP305's."""
    if training.kind == "scaler":
        return _scaler_message(training, facts)
    if training.kind == "framework":
        return _framework_message(training, facts)
    if training.kind == "adam-eps":
        return _adam_message(training, facts)
    return None


def _made_half(training: HalfTraining) -> str:
    """ "`model.half()` makes the parameters" or "`from_pretrained(...)` loads the parameters"."""
    code = f"`{snippet(training.source.call)}`"
    return f"{code} loads" if training.source.loaded else f"{code} makes"


def _scaler_message(training: HalfTraining, facts: ModuleFacts) -> tuple[str, str]:
    optimizer = training.optimizers[0]
    optimizer_code = f"`{optimizer.class_name}` (line {facts.line_of(optimizer.call)})"
    message = (
        f"{_made_half(training)} the parameters optimised by {optimizer_code} float16, and "
        f'the module\'s GradScaler raises "{UNSCALE_ERROR}" at `scaler.step`/`scaler.unscale_`; '
        f"{_KEEP}"
    )
    summary = (
        f"{_brief(training)}: float16 params: `step` raises "
        f'"{UNSCALE_ERROR.split(": ", 1)[-1]}"; use autocast'
    )
    return message, summary


# Each framework's float16 setting, where its GradScaler raises, and its fixes.
_FRAMEWORK_FIXES = {
    "transformers": (
        "the first optimizer step",
        "load the model in float32 (no `torch_dtype`: `fp16=True` already runs the forward "
        "pass under float16 autocast), or use `bf16=True` with float32 weights where the GPU "
        "supports bfloat16, or train float32 adapters over the frozen float16 model (PEFT's "
        "`get_peft_model` makes them float32 since PEFT 0.11)",
        "load in float32",
    ),
    "accelerate": (
        "the first `optimizer.step()` or `accelerator.clip_grad_norm_`",
        "keep the trained model float32 (cast only frozen models to float16): "
        '`mixed_precision="fp16"` already runs its forward pass under float16 autocast; or '
        'use `mixed_precision="bf16"` with float32 weights where the GPU supports bfloat16, '
        "or train float32 adapters (PEFT's `get_peft_model`, diffusers' "
        "`cast_training_params(model, dtype=torch.float32)`)",
        "keep it float32",
    ),
    "lightning": (
        "the first optimizer step",
        'remove the cast: `"16-mixed"` keeps the weights float32 and runs the steps under '
        'float16 autocast (or use `"bf16-mixed"` where the GPU supports bfloat16)',
        "remove the cast",
    ),
}


def _framework_message(training: HalfTraining, facts: ModuleFacts) -> tuple[str, str]:
    assert training.training is not None
    framework = training.training
    where, fixes, short_fix = _FRAMEWORK_FIXES[framework.framework]
    call = f"`{snippet(framework.call)}` (line {facts.line_of(framework.call)})"
    message = (
        f"{_made_half(training)} the parameters of `{framework.model}` float16, and {call} "
        f"trains them with `{framework.setting}`, whose GradScaler raises "
        f'"{UNSCALE_ERROR}" at {where}; {fixes}'
    )
    setting = brief(framework.setting, 32)
    summary = f'{_brief(training)} + `{setting}`: "Attempting to unscale FP16 ..."; {short_fix}'
    return message, summary


def _adam_message(training: HalfTraining, facts: ModuleFacts) -> tuple[str, str]:
    adam = training.optimizers[0]
    eps = training.eps if training.eps is not None else ADAM_DEFAULT_EPS
    summary = (
        f"{_brief(training)}: eps={eps:g} is 0 in `{adam.class_name}`'s float16 state: steps "
        "divide by 0 (NaN/inf); use autocast"
    )
    message = (
        f"{_made_half(training)} the parameters and the state of `{adam.class_name}` (line "
        f"{facts.line_of(adam.call)}) float16, where {training.eps_text} rounds to 0: a gradient "
        "below about 5e-3 underflows the second moment to 0 and the step divides by zero, "
        f"turning parameters into NaN or inf; {_KEEP}, or pass an eps float16 can hold "
        "(1e-4)"
    )
    return message, summary


def _brief(training: HalfTraining) -> str:
    """The cast, or the load, quoted briefly for a summary."""
    if training.source.loaded:
        return "`from_pretrained(float16)`"
    return f"`{brief(training.source.call, 18)}`"
