"""Common mixed-precision advice, checked by running it.

Advice about ``torch.autocast`` is often half right: "boolean masks crash in fp16", "``x ** 2``
overflows", "LPIPS gives NaN". Each :class:`Claim` here states one such piece of advice and
carries small deterministic programs (:class:`Experiment`) that do what it warns about. Each
program runs under ``torch.autocast(device, dtype)`` and is classified against its own float32
run (autocast off) on the same device, exactly as the rule cases are (see ``suite.run_case``):
raised, nonfinite, wrong or clean. What a claim gets right and wrong is then a measurement on a
named torch version and device, not an opinion.

A program is ``(device, dtype) -> {name: tensor}``; ``dtype`` None is the float32 reference.
The harness seeds torch before each run. Programs draw weights and inputs on the CPU and move
them to the device, so that every device sees the same numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from amp_lint.verify.claim_extension import extension_missing
from amp_lint.verify.claim_programs import (
    boolean_and_integer_indexing,
    divide_by_1e_3,
    extension_custom_fwd,
    extension_under_autocast,
    lpips_program,
    mask_write_float32,
    mask_write_zero,
    mul_sum,
    pow_sum,
    pow_sum_half_model,
    ssim_program,
    std_normalise_dead_unit,
    torchmetrics_missing,
    torchmetrics_ssim_program,
    two_losses,
)
from amp_lint.verify.claim_sets import casts, fsdp, scaler, statistics, training
from amp_lint.verify.claim_types import Claim, Experiment
from amp_lint.verify.outcomes import Outcome, ReferenceFailed, classify, run_reference
from amp_lint.verify.suite import _seeded, float32_means_float32

NOT_RUN = "not run"
INVALID = "invalid"


def run_claims(devices: Sequence[str], dtypes: Sequence[str]) -> list[dict[str, Any]]:
    """Run every experiment on each device and autocast dtype ("float16", "bfloat16")."""
    rows = []
    for device in devices:
        for claim in CLAIMS:
            for experiment in claim.experiments:
                if device not in experiment.devices:
                    continue
                outcomes = run_experiment(experiment, device, dtypes)
                rows += [
                    {
                        "claim": claim.key,
                        "experiment": experiment.name,
                        "device": device,
                        "dtype": dtype,
                        "outcome": outcome,
                    }
                    for dtype, outcome in zip(dtypes, outcomes)
                ]
    return rows


def run_experiment(
    experiment: Experiment, device: str, dtypes: Sequence[str]
) -> list[dict[str, Any]]:
    """One JSON outcome per dtype, each against one float32 run on ``device``."""
    import torch

    why = experiment.missing(device)
    if why:
        return [{"kind": NOT_RUN, "detail": why, "error": None} for _ in dtypes]
    synchronize = torch.cuda.synchronize if device == "cuda" else _no_sync
    with float32_means_float32(torch):
        try:
            reference = run_reference(_seeded(torch, experiment.program, device, None))
        except ReferenceFailed as failure:
            return [Outcome(INVALID, str(failure)).as_json() for _ in dtypes]
        return [
            classify(
                _seeded(torch, experiment.program, device, getattr(torch, dtype)),
                reference,
                synchronize=synchronize,
            ).as_json()
            for dtype in dtypes
        ]


def _no_sync() -> None:
    pass


_DOCS_AMP = "https://pytorch.org/docs/stable/amp.html"
_DOCS_AMP_EXAMPLES = "https://pytorch.org/docs/stable/notes/amp_examples.html"
_COMPILER = "a C++/CUDA compiler and ninja"

_CORE_CLAIMS: tuple[Claim, ...] = (
    Claim(
        "mask-write-illegal-memory",
        'A boolean-mask write `x[m] = 0` on a half tensor "causes an illegal memory access"',
        "https://github.com/pytorch/pytorch/issues/13909",
        (
            Experiment(
                "mask-write-zero",
                "x[m] = 0 on a linear layer's output under autocast, m a random boolean mask",
                mask_write_zero,
            ),
            Experiment(
                "mask-write-float32-source",
                "x[m] = y[m] on a linear layer's output under autocast, y a float32 tensor",
                mask_write_float32,
            ),
        ),
        verdict=(
            "False as stated: `x[m] = 0` ran clean on CPU and CUDA, in float16 and "
            "bfloat16. What does break is writing a float32 value through the mask, which "
            'raises "Index put requires the source and destination dtypes match" on every '
            "device and dtype (AMP001)."
        ),
    ),
    Claim(
        "boolean-indexing-crash",
        "Boolean indexing `x[m]` (or `x[idx]`) of a float16 tensor is a crash risk",
        "",
        (
            Experiment(
                "index-half-output",
                "x[m], x[idx] and x.index_select(0, idx) on a 4096x256 linear output under "
                "autocast, m a random boolean mask and idx 8192 random row indices",
                boolean_and_integer_indexing,
            ),
        ),
        verdict=(
            "False: `x[m]`, `x[idx]` and `index_select` on half tensors ran clean on every "
            "device and dtype we ran."
        ),
    ),
    Claim(
        "square-sum-overflow",
        '`(x ** 2).sum()` "overflows in fp16"',
        _DOCS_AMP,
        (
            Experiment(
                "pow-sum-autocast",
                "(x ** 2).sum() under autocast, x a linear layer's output of about ±300",
                pow_sum,
            ),
            Experiment(
                "mul-sum-autocast",
                "(x * x).sum() under autocast, x a linear layer's output of about ±300",
                mul_sum,
            ),
            Experiment(
                "pow-sum-converted-model",
                "(x ** 2).sum() without autocast, on the output of a linear layer converted "
                "with .to(dtype) (values of about ±300)",
                pow_sum_half_model,
            ),
        ),
        verdict=(
            "It depends on the device. Under CUDA autocast `pow` and `sum` run in float32 "
            "and `(x ** 2).sum()` is clean; under CPU autocast in float16 it is inf. `(x * "
            "x).sum()` is inf on both devices, because `mul` is not upcast, and so is `(x "
            "** 2).sum()` in a model converted with `.to(torch.float16)`. bfloat16 never "
            "overflowed (AMP003)."
        ),
    ),
    Claim(
        "small-divisor-underflow",
        '"Division by small values underflows" in fp16',
        "https://github.com/google-deepmind/optax/issues/1754",
        (
            Experiment(
                "std-eps-dead-unit",
                "h / (h.std(0) + 1e-8) under autocast, h = relu(linear(x)) with one feature "
                "0 for every sample",
                std_normalise_dead_unit,
            ),
            Experiment(
                "divide-by-1e-3",
                "x / 1e-3 under autocast, x a linear layer's output of about ±100",
                divide_by_1e_3,
            ),
        ),
        verdict=(
            "Misnamed: the epsilon underflows and the quotient overflows. `h / (h.std(0) + "
            "1e-8)` is NaN in float16 on both devices because 1e-8 rounds to 0 (AMP004), "
            "and `x / 1e-3` with x around 100 is inf, past float16's 65504. bfloat16 was "
            "clean in both."
        ),
    ),
    Claim(
        "perceptual-metrics-nan",
        'LPIPS and SSIM "crash or give NaN in fp16"',
        "https://github.com/richzhang/PerceptualSimilarity/issues/69",
        (
            Experiment(
                "lpips-8bit",
                "LPIPS (lpips's arithmetic) under autocast on 8-bit images with values 0..255",
                lpips_program("8bit"),
            ),
            Experiment(
                "lpips-unit",
                "LPIPS (lpips's arithmetic) under autocast on random images in [0, 1]",
                lpips_program("unit"),
            ),
            Experiment(
                "lpips-unit-black-region",
                "LPIPS (lpips's arithmetic) under autocast on images in [0, 1] whose top "
                "half is black in both",
                lpips_program("unit-black"),
            ),
            Experiment(
                "ssim-8bit",
                "SSIM (pytorch_msssim's arithmetic) under autocast on 8-bit images with values "
                "0..255, data_range=255",
                ssim_program("8bit"),
            ),
            Experiment(
                "ssim-8bit-bright",
                "SSIM (pytorch_msssim's arithmetic) under autocast on smooth bright 8-bit images "
                "(integers 198..202), data_range=255",
                ssim_program("8bit-bright"),
            ),
            Experiment(
                "ssim-unit",
                "SSIM (pytorch_msssim's arithmetic) under autocast on images in [0, 1], "
                "data_range=1",
                ssim_program("unit"),
            ),
            Experiment(
                "torchmetrics-ssim-8bit",
                "torchmetrics.functional.structural_similarity_index_measure under autocast "
                "on 8-bit images with values 0..255, data_range=255",
                torchmetrics_ssim_program("8bit"),
                needs="torchmetrics",
                missing=torchmetrics_missing,
            ),
            Experiment(
                "torchmetrics-ssim-8bit-bright",
                "torchmetrics.functional.structural_similarity_index_measure under autocast "
                "on smooth bright 8-bit images (integers 198..202), data_range=255",
                torchmetrics_ssim_program("8bit-bright"),
                needs="torchmetrics",
                missing=torchmetrics_missing,
            ),
        ),
        verdict=(
            "Partly true, for reasons other than the usual ones, and nothing crashed. In "
            "float16, LPIPS gave NaN under CPU autocast where a region is black (its 1e-10 "
            "eps rounds to 0) and wrong values on 0..255 inputs, but ran clean under CUDA "
            "autocast, which computes its `pow` and `sum` in float32. SSIM on smooth, "
            "bright 8-bit images was NaN in float16 (`mu_x² + mu_y²` passes 65504) and "
            "wrong in bfloat16 on both devices, for the stand-in and for the real "
            "torchmetrics; on random 8-bit images and on [0, 1] images it was clean "
            "(AMP005)."
        ),
    ),
    Claim(
        "custom-kernel-crash",
        'Custom CUDA kernels without fp16 support "crash" under autocast',
        "https://github.com/NVIDIA/apex/issues/849",
        (
            Experiment(
                "extension-float-only",
                "a compiled op dispatching with AT_DISPATCH_FLOATING_TYPES (float and double) "
                "called on a linear layer's output under autocast",
                extension_under_autocast,
                needs=_COMPILER,
                missing=extension_missing,
            ),
            Experiment(
                "extension-custom-fwd",
                "the same op inside a torch.autograd.Function whose forward is decorated "
                "@torch.amp.custom_fwd(device_type=device, cast_inputs=torch.float32)",
                extension_custom_fwd,
                needs=_COMPILER,
                missing=extension_missing,
            ),
        ),
        verdict=(
            "True whenever the kernel receives half inputs: an op compiled with "
            "`AT_DISPATCH_FLOATING_TYPES` raised `not implemented for 'Half'` (and "
            "`'BFloat16'`) on CPU and CUDA when fed a linear layer's output under autocast. "
            "The same op inside an `autograd.Function` whose forward carries "
            "`@torch.amp.custom_fwd(cast_inputs=torch.float32)` ran clean."
        ),
    ),
    Claim(
        "mixed-loss-scaler-crash",
        "Adding an AMP-safe loss to an unsafe one crashes `scaler.scale(total).backward()`",
        _DOCS_AMP_EXAMPLES,
        (
            Experiment(
                "cross-entropy-plus-bce",
                "cross_entropy + F.binary_cross_entropy(sigmoid(out), flags) under autocast, "
                "then GradScaler scale(total).backward(), unscale_, step and update",
                two_losses("bce"),
            ),
            Experiment(
                "cross-entropy-plus-bce-with-logits",
                "cross_entropy + F.binary_cross_entropy_with_logits(out, flags) under autocast, "
                "then GradScaler scale(total).backward(), unscale_, step and update",
                two_losses("bce-with-logits"),
            ),
            Experiment(
                "cross-entropy-plus-mse-loss",
                "cross_entropy + F.mse_loss on a linear layer's output under autocast, then "
                "GradScaler scale(total).backward(), unscale_, step and update",
                two_losses("mse"),
            ),
            Experiment(
                "cross-entropy-plus-hand-written-mse",
                "cross_entropy + a hand-written ((out - target) * (out - target)).mean() with a "
                "float32 target, then GradScaler scale(total).backward(), unscale_, step and "
                "update",
                two_losses("hand-written"),
            ),
            Experiment(
                "cross-entropy-plus-half-penalty",
                "cross_entropy + (out * out).mean(), a penalty that stays in the autocast dtype, "
                "then GradScaler scale(total).backward(), unscale_, step and update",
                two_losses("penalty"),
            ),
        ),
        verdict=(
            "False as stated: the backward never crashed, since adding a float32 and a half "
            "loss gives float32. Two things did fail. `F.binary_cross_entropy` is refused "
            'in the forward pass under CUDA autocast ("unsafe to autocast"), in float16 and '
            "bfloat16. A penalty left in float16 (`(out * out).mean()`) gave inf weight "
            "gradients at GradScaler's initial scale of 65536, on both devices; GradScaler "
            "then skips the step and halves the scale."
        ),
    ),
)

# Claims grouped by topic live in claim_sets/, one module each, so that a topic's programs,
# claims and verdicts stay together.
CLAIMS: tuple[Claim, ...] = (
    *_CORE_CLAIMS,
    *training.CLAIMS,
    *fsdp.CLAIMS,
    *casts.CLAIMS,
    *statistics.CLAIMS,
    *scaler.CLAIMS,
)
