"""AMP308 half-params-plain-optimizer: bfloat16 (or float16) parameters updated in place by a
plain `torch.optim` optimizer, with no float32 copy: small updates round away."""

from __future__ import annotations

from collections.abc import Iterator

from amp_lint.analysis.syntax.module import ModuleFacts
from amp_lint.analysis.training.half_training import HalfTraining, half_trainings
from amp_lint.analysis.training.training_setup import snippet
from amp_lint.analysis.values.dtypes import BFLOAT16, FLOAT16
from amp_lint.rules.base import Report, Rule
from amp_lint.rules.common import brief

# Half the spacing of each dtype just below 1.0: a smaller update leaves a weight of 1.0
# where it is (bfloat16 keeps 8 significant bits: 2**-9; float16 11: 2**-12).
_LOST_BELOW = {BFLOAT16: "about 0.002", FLOAT16: "about 0.0002"}


class HalfParamsPlainOptimizer(Rule):
    reported_in_tests = False
    code = "AMP308"
    name = "half-params-plain-optimizer"
    vocabulary = (b"bfloat16", b"half", b"float16", b"bf16-true")
    summary = (
        "Checks for models converted or loaded to bfloat16 (or float16) whose parameters a "
        "plain `torch.optim` optimizer updates in place, with no float32 copy of the weights."
    )
    why = """\
Mixed precision keeps the **parameters in float32**: autocast runs the matmuls in
bfloat16/float16, and the optimizer adds each small update to a float32 weight. A model
converted to bfloat16 (`model.to(torch.bfloat16)`, `.bfloat16()`,
`from_pretrained(..., torch_dtype=torch.bfloat16)`, Lightning's `precision="bf16-true"`)
and handed to `torch.optim.AdamW(model.parameters())` has no float32 copy anywhere: the
optimizer computes `w - lr * update` and rounds it back to bfloat16, whose 8 significant bits
put the neighbours of 1.0 at 1 - 2**-8 and 1 + 2**-7. An update smaller than half that
spacing is **rounded away**, silently: no error, no NaN, the loss just stops improving.
bfloat16's float32-sized exponent range does not help: range is not precision. `torch.optim`
also keeps the state of such parameters (AdamW's `exp_avg`, `exp_avg_sq`) in bfloat16.

Measured on CPU with torch 2.13: a weight of 1.0 with gradient 1.0 and lr 1e-4 stays exactly
1.0 after 1000 steps of SGD, Adam or AdamW (AdamW with the for-loop and the foreach
implementation alike) in bfloat16 and in float16, where float32 moves it to 0.90. Training a
16x4 linear layer with weights near 1.0 by SGD (lr 1e-4, 1000 steps) leaves its bfloat16 and
float16 weights where the cast put them, 0.15 away from the float32 run's; the same model
kept float32 under bfloat16 autocast ends within 0.0005 of it. `torch.optim` has no
master-weight option in 2.13 (AdamW's arguments are lr, betas, eps, weight_decay, amsgrad,
maximize, foreach, capturable, differentiable, fused). `Tensor.grad_dtype` (present in 2.13;
added in pytorch/pytorch#164751, October 2025) changes the dtype of the *gradient*, not of
the weight: with `p.grad_dtype = torch.float32` on a bfloat16 weight of 1.0, 1000 SGD steps
of lr 1e-4 still leave it at 1.0.

Real reports: areal-project/AReaL#1292 (`torch.optim.AdamW(self.model.parameters())` on a
bfloat16 model: its state was bfloat16 and the final loss plateaued about 3x higher than
DeepSpeed ZeRO-3's and Megatron's, which keep float32 master weights; fixed by loading the
model in float32, AReaL#1369), NVIDIA-NeMo/Automodel#2419 (documents `torch.optim.AdamW`
with bfloat16 resident parameters as the risky pattern) and Automodel#3444 ("directly
updating BF16-resident parameters causes many optimizer steps to round back to the same BF16
value", fixed with float32 master weights)."""
    example = """\
import torch

model = Net().cuda().to(torch.bfloat16)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)

for x, y in loader:
    loss = loss_fn(model(x.bfloat16()), y)
    loss.backward()
    optimizer.step()  # updates below 2**-9 of a weight round away
    optimizer.zero_grad()
"""
    fixed_example = """\
import torch

model = Net().cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)

for x, y in loader:
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
"""
    fix_safety = """\
There is no fix (lint only). The usual cure keeps the parameters float32 and runs the forward
pass under `torch.autocast(..., dtype=torch.bfloat16)` (with Lightning, `"bf16-mixed"`
instead of `"bf16-true"`), which doubles the memory of the weights and of the optimizer
state. Where memory rules that out, use an optimizer that keeps float32 master weights
(DeepSpeed ZeRO, Transformer Engine's `FusedAdam(master_weights=True)`, Megatron's
distributed optimizer, FSDP2 with float32 parameters and a bfloat16 `MixedPrecisionPolicy`)
or rounds stochastically (torchao's `_AdamW(..., bf16_stochastic_round=True)` and its
low-bit optimizers' `bf16_stochastic_round=True`); deliberate pure-bfloat16 training can
silence the finding with `# noqa: AMP308`."""
    known_limitations = """\
The cast or load and the optimizer are matched by name, as for AMP305: the optimizer must
receive `model.parameters()` (or `named_parameters()`) of the name the cast was written on
or assigned to, in the same function, or in the same class for `self.` attributes, and the
function or class must call `backward()` or `step()`. Only `torch.optim` optimizers are
checked: DeepSpeed's, Transformer Engine's, apex's and torchao's are not flagged (some keep
float32 master weights), and neither are bitsandbytes' (which do not). A module that
mentions DeepSpeed anywhere is not checked: DeepSpeed wraps the `torch.optim` optimizers
given to it (also through accelerate's and Lightning's plugins) and keeps float32 master
weights. An optimizer given
float32 copies (`[p.float() for p in model.parameters()]`) is not flagged. Models trained by
the Hugging Face `Trainer` are not flagged (its optimizer is chosen by `optim=` and may run
under DeepSpeed). A scope that wraps the model in PEFT adapters, freezes it
(`requires_grad_(False)`), upcasts it (`.float()`, `cast_training_params`) or assigns
`p.data`/`p.requires_grad` in a loop is not flagged. Float16 parameters that AMP305 reports
(a GradScaler, a framework's float16 mixed precision, an Adam eps that float16 rounds to 0)
are left to it. Lightning's `precision="bf16-true"` is flagged when the same module defines
a `configure_optimizers` that builds a `torch.optim` optimizer on `self`'s parameters;
`"16-true"` is not. A dtype held in a variable is not seen.

Not reported in test files (under a `tests` or `test` folder, `test_*.py`, `*_test.py`,
`conftest.py`): the hazard needs a long training run to show, and tests use half precision
on purpose for a few steps (a litgpt test fitting two batches with `precision="bf16-true"`).
Training scripts, examples and tutorials are reported."""

    def check_module(self, facts: ModuleFacts) -> Iterator[Report]:
        if facts.source is not None and b"optim" not in facts.source:
            return  # every report names a `torch.optim` optimizer
        if facts.source is not None and b"deepspeed" in facts.source.lower():
            # DeepSpeed (directly, or through accelerate's or Lightning's plugins) wraps the
            # optimizer and keeps float32 master weights of bfloat16 models.
            return
        for training in half_trainings(facts.module, facts.names):
            if training.kind == "plain":
                yield _report(training, facts)
            elif training.kind == "lightning-true":
                yield _lightning_report(training, facts)


def _report(training: HalfTraining, facts: ModuleFacts) -> Report:
    source = training.source
    optimizer = training.optimizers[0]
    precision = source.precision
    verb = "loads" if source.loaded else "makes"
    message = (
        f"`{snippet(source.call)}` {verb} the parameters that `{optimizer.class_name}` (line "
        f"{facts.line_of(optimizer.call)}) updates {precision}, with no float32 copy: each "
        f"step rounds the updated weight back to {precision}, so an update smaller than half "
        f"its spacing ({_LOST_BELOW[precision]} for a weight of 1.0) is silently lost and "
        "training stalls (`torch.optim` also keeps such parameters' state in "
        f"{precision}); keep the parameters float32 and run the forward pass under "
        f"`torch.autocast(..., dtype=torch.{precision})`, or use an optimizer that keeps "
        "float32 master weights or rounds stochastically"
    )
    summary = (
        f"`{brief(source.call, 18)}`: {precision} params in `{optimizer.class_name}`: small "
        "updates round away; keep float32 + autocast"
    )
    return Report(source.call, message, summary=summary)


def _lightning_report(training: HalfTraining, facts: ModuleFacts) -> Report:
    optimizer = training.optimizers[0]
    setting = training.extra.get("setting", 'Trainer(precision="bf16-true")')
    message = (
        f"`{setting}` converts the LightningModule's parameters to bfloat16 before "
        f"`configure_optimizers` builds `{optimizer.class_name}` (line "
        f"{facts.line_of(optimizer.call)}), which updates them with no float32 copy: an "
        "update smaller than half a weight's bfloat16 spacing (about 0.002 for a weight of 1.0) "
        'is silently lost and training stalls; use `precision="bf16-mixed"`, which keeps '
        "float32 weights and runs the steps under bfloat16 autocast"
    )
    summary = (
        f'`precision="bf16-true"`: bfloat16 params in `{optimizer.class_name}`: small updates '
        'round away; use "bf16-mixed"'
    )
    return Report(training.source.call, message, summary=summary)
