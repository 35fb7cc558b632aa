"""AMP005 fp32-only-callable: perceptual and metric models called under autocast."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from amp_lint.analysis.interpreter.frames import ExecutionContext
from amp_lint.analysis.regions.finder import AutocastRegion
from amp_lint.analysis.values.dtypes import DType
from amp_lint.findings import Edit, Fix, FixSafety
from amp_lint.fixes.builders import call_in_fp32_island
from amp_lint.rules.base import Report, Rule
from amp_lint.rules.common import UPCAST_FIX_SAFETY, brief

# Classes whose instances, and functions which, compute image metrics or perceptual losses.
FP32_ONLY_CLASSES = frozenset(
    [
        "lpips.LPIPS",
        "pytorch_msssim.SSIM",
        "pytorch_msssim.MS_SSIM",
        "kornia.losses.SSIMLoss",
        "kornia.losses.MS_SSIMLoss",
        "kornia.losses.SSIM3DLoss",
    ]
)
FP32_ONLY_FUNCTIONS = frozenset(
    [
        "pytorch_msssim.ssim",
        "pytorch_msssim.ms_ssim",
        "kornia.losses.ssim_loss",
        "kornia.losses.ssim3d_loss",
        "kornia.metrics.ssim",
        "kornia.metrics.ssim3d",
        "kornia.losses.psnr_loss",
        "kornia.metrics.psnr",
    ]
)
# Whole packages of metrics: anything called from them.
FP32_ONLY_PACKAGES = ("piq.",)
# torchmetrics image metrics, matched by name wherever torchmetrics exports them.
TORCHMETRICS_IMAGE = frozenset(
    [
        "StructuralSimilarityIndexMeasure",
        "MultiScaleStructuralSimilarityIndexMeasure",
        "LearnedPerceptualImagePatchSimilarity",
        "PeakSignalNoiseRatio",
        "structural_similarity_index_measure",
        "multiscale_structural_similarity_index_measure",
        "learned_perceptual_image_patch_similarity",
        "peak_signal_noise_ratio",
    ]
)
_METRIC_METHODS = frozenset(["update", "forward"])


class Fp32OnlyCallable(Rule):
    code = "AMP005"
    name = "fp32-only-callable"
    summary = (
        "Checks for perceptual models, image metrics and similar losses (LPIPS, SSIM/MS-SSIM, "
        "piq, torchmetrics image metrics, kornia SSIM) called inside an autocast region."
    )
    why = """\
These callables are written for float32 inputs and arithmetic, and autocast changes both:

* **LPIPS** normalises features with `x / (sqrt(sum(x**2)) + 1e-10)`; in float16 the eps
  is 0, so a zero feature vector gives `0/0 = NaN` in the forward pass. That happens under CPU
  float16 autocast (and in `.half()` models); under CUDA autocast `pow` and `sum` run in
  float32, the eps survives and the forward pass is clean (measured, see the evidence below),
  so LPIPS is flagged only where the autocast device may be the CPU, in float16.
* **SSIM / MS-SSIM** compute `E[x²] - E[x]²` with convolutions that autocast runs in half
  precision: the cancellation returns wrong values (1.32 instead of 1 for identical images,
  Lightning-AI/torchmetrics#1290). On 8-bit images (`data_range=255`) float16 is worse: the
  luminance term's `mu_x² + mu_y²` passes 65504 for bright regions and SSIM is NaN, on CUDA
  and CPU alike (measured). Several implementations reject mixed dtypes outright
  ("Expected preds and target to have the same data type", "Input images should have the
  same dtype.").

Metrics and perceptual losses are cheap next to the model: run them in float32."""
    example = """\
import torch
from pytorch_msssim import ssim

with torch.autocast("cuda"):
    fake = generator(z)
    loss = 1 - ssim(fake, real, data_range=255.0)
"""
    fixed_example = """\
import torch
from pytorch_msssim import ssim

with torch.autocast("cuda"):
    fake = generator(z)
    with torch.autocast("cuda", enabled=False):
        loss = 1 - ssim(fake.float(), real, data_range=255.0)
"""
    fix_safety = (
        """\
The fix wraps the statement in an fp32 island (`with torch.autocast(<device>, enabled=False):`)
and calls `.float()` on the positional arguments the analysis knows are floating-point tensors
(computed under the region, like `fake` above, or made by torch). Numbers, strings, flags and
arguments of unknown type (`real` above) are left as they are: `.float()` on a
window size raises `AttributeError`. It is **unsafe**: the metric is then computed in float32
and returns float32, which changes numerics (that is the point); an argument of unknown type
that is in fact a half tensor still needs its own `.float()`. The island uses the region's
device when it is a literal, otherwise `<first tensor argument>.device.type`. There is no fix
when no argument is known to be a tensor, when the call is not the only statement on its line,
or when it sits in a compound statement's header."""
        + UPCAST_FIX_SAFETY
    )
    known_limitations = """\
Objects are recognised when they are created in the same module (`self.lpips =
lpips.LPIPS()` in `__init__`, or a module-level or local variable). Add your own classes and
functions with `fp32-only-callables` in `[tool.amp-lint]`.

The runtime cases reproduce LPIPS's and SSIM's arithmetic with small stand-ins (random feature
weights instead of pretrained AlexNet); other metrics (piq, torchmetrics, kornia PSNR) are
flagged for the same float32-only design but have no runtime case of their own yet."""
    node_types = (cst.Call,)

    def check_node(self, node: cst.CSTNode, ctx: ExecutionContext) -> Iterator[Report]:
        assert isinstance(node, cst.Call)
        region = ctx.active_region
        if region is None:
            return
        callee = self._fp32_only_callee(node, ctx)
        if callee is None:
            return
        if _is_lpips(callee) and not (region.may_be_float16 and region.device not in _UPCASTS_POW):
            # bfloat16 keeps LPIPS's eps; CUDA autocast runs its pow/sum in float32, which
            # keeps it too (measured: the runtime case is clean under CUDA float16).
            return
        message = (
            f"`{callee}` is called under {region.describe()}: {_what_goes_wrong(callee)}; run "
            "it with `torch.autocast(..., enabled=False)` and `.float()` inputs"
        )
        summary = (
            f"`{brief(callee.rsplit('.', 1)[-1], 25)}`: {_what_goes_wrong_briefly(callee)}; run "
            "it in float32, autocast off"
        )
        yield Report(node, message, self._fix(node, region, ctx), summary=summary)

    def _fp32_only_callee(self, node: cst.Call, ctx: ExecutionContext) -> str | None:
        func = node.func
        qualified = ctx.qualified_name(func)
        if qualified is not None:
            if qualified.rsplit(".", 1)[-1][:1].isupper():
                return None  # constructing the model is harmless; calling it is not
            return qualified if _is_fp32_only(qualified, ctx, is_class=False) else None
        if isinstance(func, cst.Attribute) and func.attr.value in _METRIC_METHODS:
            func = func.value
        instance = ctx.value(func).instance_of
        if instance is not None and _is_fp32_only(instance, ctx, is_class=True):
            return instance
        return None

    def _fix(self, node: cst.Call, region: AutocastRegion, ctx: ExecutionContext) -> Fix | None:
        line = ctx.statement
        if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
            return None
        tensors = [
            (arg.value, dtype)
            for arg in node.args
            if arg.keyword is None
            and not arg.star
            and (dtype := _known_tensor_dtype(arg.value, ctx)) is not None
        ]
        if not tensors:
            # `.float()` on a window size, a flag or a parameter of unknown type raises
            # AttributeError; without a tensor to cast the island alone would leave half inputs
            # meeting float32 weights. The finding stands, without a fix.
            return None
        uncast = [(t, dtype) for t, dtype in tensors if not _is_float_call(t)]
        island = call_in_fp32_island(
            line,
            node,
            uncast,
            region.device,
            region.device_expr,
            ctx.facts.names,
            ctx.dtype,
            scripted=ctx.facts.may_be_scripted,
            shared=bool(ctx.frame.chain),
        )
        if island is None:
            return None
        island_line, needs_import = island
        return Fix(
            FixSafety.UNSAFE,
            "Run it in an fp32 island",
            edits=(Edit(line, island_line),),
            imports=("torch",) if needs_import else (),
        )


# Devices whose autocast runs pow and sum in float32 (XPU registers CUDA's lists).
_UPCASTS_POW = frozenset({"cuda", "xpu"})


def _is_lpips(callee: str) -> bool:
    name = callee.lower()
    return "lpips" in name or "perceptual" in name


def _what_goes_wrong(callee: str) -> str:
    name = callee.lower()
    if _is_lpips(callee):
        return (
            "LPIPS normalises features with eps=1e-10, which is 0 in float16, so a zero "
            "feature gives NaN"
        )
    if "ssim" in name or "structural" in name:
        return "SSIM's E[x²]-E[x]² cancels in half precision and returns wrong values"
    return (
        "metrics and perceptual losses are float32 code and return wrong values in half precision"
    )


def _what_goes_wrong_briefly(callee: str) -> str:
    """`_what_goes_wrong` in a summary's words."""
    name = callee.lower()
    if _is_lpips(callee):
        return "its eps=1e-10 is 0 in float16, so a zero feature gives NaN"
    if "ssim" in name or "structural" in name:
        return "E[x²]-E[x]² cancels in half precision: wrong values"
    return "float32 metric code returns wrong values in half precision"


def _is_fp32_only(qualified: str, ctx: ExecutionContext, *, is_class: bool) -> bool:
    configured = ctx.facts.config.fp32_only_callables
    if qualified in configured or any(qualified.startswith(c + ".") for c in configured):
        return True
    if qualified.startswith(FP32_ONLY_PACKAGES):
        return True
    if qualified.startswith("torchmetrics.") and qualified.rsplit(".", 1)[-1] in TORCHMETRICS_IMAGE:
        return True
    return qualified in (FP32_ONLY_CLASSES if is_class else FP32_ONLY_FUNCTIONS)


def _known_tensor_dtype(node: cst.BaseExpression, ctx: ExecutionContext) -> DType | None:
    """The analysis knows the argument is a floating-point tensor: `.float()` applies to it.
    Python numbers, strings, None and values of unknown type (a parameter nobody is seen
    passing) are left alone. A half dtype resting on an assumption (`generator(z)` taken to
    return float16 under autocast) counts: the assumption is that it is a half tensor. It is
    read without being recorded, so the finding's message does not claim to rest on it."""
    if isinstance(node, (cst.Integer, cst.Float, cst.Imaginary, cst.BaseString)):
        return None
    accepts, used = ctx.accepts_assumptions, ctx.assumptions_used
    ctx.accepts_assumptions, ctx.assumptions_used = True, []
    try:
        value = ctx.value(node)
    finally:
        ctx.accepts_assumptions, ctx.assumptions_used = accepts, used
    return value.dtype if value.dtype.is_floating_tensor and not value.maybe_none else None


def _is_float_call(node: cst.BaseExpression) -> bool:
    """`x.float()`: already float32, another `.float()` would only repeat it."""
    return (
        isinstance(node, cst.Call)
        and not node.args
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == "float"
    )
