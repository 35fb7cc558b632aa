"""AMP006 variance-by-cancellation: local variances and covariances written as
E[x·x] - E[x]·E[x] (SSIM by hand) and computed in half precision."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from amp_lint.analysis.interpreter.frames import ExecutionContext
from amp_lint.analysis.syntax.moment_shapes import Moment, MomentShapes
from amp_lint.analysis.values.dtypes import DType, half
from amp_lint.rules.base import Report, Rule
from amp_lint.rules.common import brief, code


class VarianceByCancellation(Rule):
    code = "AMP006"
    name = "variance-by-cancellation"
    summary = (
        "Checks for local variances and covariances written as `E[x·x] - E[x]·E[x]` over "
        "convolutions or pools (SSIM by hand) whose two terms are computed in half precision."
    )
    why = """\
SSIM and similar image statistics are often written by hand as
`sigma1_sq = F.conv2d(img1 * img1, window, groups=c) - mu1.pow(2)`: the local mean of the
square minus the square of the local mean. Under autocast `conv1d/2d/3d` run in the autocast
dtype on CPU and CUDA alike, even for float32 images. Where an image is smooth and bright, both
terms are near `mean²` and the variance is a tiny difference of them: float16 keeps 11
significant bits and bfloat16 8, so the difference is rounding noise. Variances come out
negative or zero, `sqrt` of them is NaN, and SSIM is wrong.

Measured with torch 2.13 on the CPU (the runtime case below): on [0, 1] images of 0.8 ± 0.01
with an 11x11 Gaussian window, the float32 variances are all positive (smallest 2.9e-5);
under float16 autocast 52% of them are ≤ 0 (smallest -4.9e-4), `sqrt` is NaN at 11% of
the pixels and SSIM is 0.962 instead of 0.984; under bfloat16 67% are ≤ 0 (smallest -3.9e-3)
and SSIM is 1.09, above its maximum of 1. On 8-bit images of 200 ± 2 `E[x²]` is about 40 000,
where float16's spacing is 32 and bfloat16's 256, so a variance of 2 is lost entirely
(AMP005's runtime case measures pytorch_msssim's formula there: wrong in bfloat16, and NaN in
float16, where the luminance term's `mu_x² + mu_y²` also passes 65504).

`avg_pool1d/2d` are on no autocast list: over float32 images they stay float32 (measured
clean), and they are only flagged over half inputs (a model's output). `torch.var` and
`torch.var_mean` are on no autocast list either: float32 inputs stay float32, and on half
inputs they accumulate in float32 (measured on the CPU: float16 `var` of the same data is
9.88e-5 against 9.87e-5 in float32, while `(h * h).mean() - h.mean() ** 2` gives 4.9e-4 in
float16 and 0 in bfloat16); use them where a global variance is meant.

`.float()` on the images is not enough inside an autocast region: the convolution casts them
back to half. Turn autocast off for the statistics and give them float32 inputs."""
    example = """\
import torch
import torch.nn.functional as F

def ssim(img1, img2, window, channels):
    mu1 = F.conv2d(img1, window, padding=5, groups=channels)
    mu2 = F.conv2d(img2, window, padding=5, groups=channels)
    mu1_sq, mu2_sq, mu1_mu2 = mu1.pow(2), mu2.pow(2), mu1 * mu2
    sigma1_sq = F.conv2d(img1 * img1, window, padding=5, groups=channels) - mu1_sq
    sigma2_sq = F.conv2d(img2 * img2, window, padding=5, groups=channels) - mu2_sq
    sigma12 = F.conv2d(img1 * img2, window, padding=5, groups=channels) - mu1_mu2
    c1, c2 = 0.01**2, 0.03**2
    ssim_map = ((2 * mu1_mu2 + c1) * (2 * sigma12 + c2)) / (
        (mu1_sq + mu2_sq + c1) * (sigma1_sq + sigma2_sq + c2)
    )
    return ssim_map.mean()

with torch.autocast("cuda"):
    fake = generator(z)
    loss = 1 - ssim(fake, real, window, 3)
"""
    fixed_example = """\
import torch
import torch.nn.functional as F

def ssim(img1, img2, window, channels):
    with torch.autocast(img1.device.type, enabled=False):
        img1, img2, window = img1.float(), img2.float(), window.float()
        mu1 = F.conv2d(img1, window, padding=5, groups=channels)
        mu2 = F.conv2d(img2, window, padding=5, groups=channels)
        mu1_sq, mu2_sq, mu1_mu2 = mu1.pow(2), mu2.pow(2), mu1 * mu2
        sigma1_sq = F.conv2d(img1 * img1, window, padding=5, groups=channels) - mu1_sq
        sigma2_sq = F.conv2d(img2 * img2, window, padding=5, groups=channels) - mu2_sq
        sigma12 = F.conv2d(img1 * img2, window, padding=5, groups=channels) - mu1_mu2
        c1, c2 = 0.01**2, 0.03**2
        ssim_map = ((2 * mu1_mu2 + c1) * (2 * sigma12 + c2)) / (
            (mu1_sq + mu2_sq + c1) * (sigma1_sq + sigma2_sq + c2)
        )
        return ssim_map.mean()

with torch.autocast("cuda"):
    fake = generator(z)
    loss = 1 - ssim(fake, real, window, 3)
"""
    fix_safety = """\
There is no autofix. The statistics must be computed with autocast off and float32 inputs,
which means wrapping every line from the local means to the ratio in one
`torch.autocast(..., enabled=False)` block and casting each input the convolutions read (the
images and the window): lines that may be far apart, inside a function called from
elsewhere. An edit of the subtraction alone (`.float()` on its terms) would not help, since
the terms were already rounded."""
    known_limitations = """\
The shape is recognised through names assigned once in the same function (`mu1 =
F.conv2d(img1, ...)`, `mu1_sq = mu1.pow(2)`), with squares written `x * x`, `x ** 2`,
`x.pow(2)`, `torch.pow(x, 2)`, `x.square()` or `torch.square(x)`. The local mean is a
convolution, an average pool (functional, or an `nn.Conv*d` / `nn.AvgPool*d` instance), or
the same helper called on both sides (`gaussian_filter(X * X, win) - gaussian_filter(X,
win) ** 2`). Statistics batched through one convolution of `torch.cat([x, y, x * x, ...])`
(torchmetrics' way) and global variances `(x * x).mean() - x.mean() ** 2` are not
recognised. `E[x·x]` and the means `E[x]`, `E[y]` must all be known to be half precision (or
assumed so, which the message then says); their product may be float32 (CUDA autocast runs
`mu.pow(2)` in float32, from an already rounded `mu`). Where only one side is half it is not
reported, though one rounded term already spoils the difference: under CUDA autocast
`pool(x ** 2) - pool(x) ** 2` over a half `x` squares in float32 and is missed.

Only code seen to run under autocast is reported: inside a region the code enters, or
reached from one through calls amp-lint follows. Code it only assumes to run there (an
opaque `loss_fn(...)` dispatched to every loss and module of the project, library mode, the
`forward` of a module in a file that enters autocast) is not: an SSIM module is often called
by a wrapper that turns autocast off, which a dispatch skips.

A call of a known SSIM implementation (pytorch_msssim, kornia, torchmetrics, piq) under
autocast is AMP005's; AMP006 reports the formula in the linted code itself. Where a project's
own SSIM function is listed in `fp32-only-callables`, AMP005 reports its calls under autocast
and AMP006 leaves the formula inside it alone."""
    node_types = (cst.BinaryOperation,)
    accepts_assumptions = True

    def __init__(self) -> None:
        self._shapes = MomentShapes()

    def check_node(self, node: cst.CSTNode, ctx: ExecutionContext) -> Iterator[Report]:
        assert isinstance(node, cst.BinaryOperation)
        if not isinstance(node.operator, cst.Subtract) or ctx.frame.assumption is not None:
            # Only code seen to run under autocast: a dispatch of an opaque `loss_fn(...)`
            # lands on every loss and module of the project, and so on an SSIM module its
            # own caller runs with autocast off (OIDN's `SSIMLoss`).
            return
        moment = self._shapes.central_moment(node, ctx)
        if moment is None or self._shapes.inside_fp32_only_callable(ctx):
            return
        dtype = _half_terms(node, moment, ctx)
        if dtype is None:
            return
        yield _report(node, moment, dtype)


def _half_terms(node: cst.BinaryOperation, moment: Moment, ctx: ExecutionContext) -> DType | None:
    """The half dtype E[x·y] and the means E[x], E[y] are computed in; None unless all are.
    The means count, not their product: CUDA autocast runs `mu.pow(2)` in float32, but `mu`
    was already rounded to half, and so is its square's precision."""
    means = [_mean_dtype(mean, node, moment, ctx) for mean in moment.means]
    dtypes = [ctx.dtype(node.left), *means]
    if not all(dtype.is_half for dtype in dtypes):
        return None
    precisions = {dtype.precision for dtype in dtypes}
    return dtypes[0] if len(precisions) == 1 else half(None)


def _mean_dtype(
    mean: cst.BaseExpression, node: cst.BinaryOperation, moment: Moment, ctx: ExecutionContext
) -> DType:
    """A mean's dtype where the subtraction runs: a name's value there, or an expression of
    the subtraction itself. Other code is not evaluated out of place (it may call things);
    the right term's own dtype stands in for it."""
    if moment.means_written_here or isinstance(mean, (cst.Name, cst.Attribute)):
        return ctx.dtype(mean)
    return ctx.dtype(node.right)


def _report(node: cst.BinaryOperation, moment: Moment, dtype: DType) -> Report:
    precision = dtype.describe()
    if moment.is_variance:
        what, shape = "variance", "E[x²]-E[x]²"
        outcome = "comes out ≤ 0 or wrong (`sqrt` of it is NaN)"
        brief_outcome = "variance ≤0, sqrt NaN"
    else:
        what, shape = "covariance", "E[xy]-E[x]E[y]"
        outcome = "comes out wrong"
        brief_outcome = "covariance wrong"
    message = (
        f"`{code(node)}` computes a local {what} as {moment.formula} with the means in "
        f"{precision}: where the image is smooth the two nearly equal terms cancel, so the "
        f"{what} {outcome} and SSIM is wrong; compute the local means and their products in "
        "float32 with autocast off (`with torch.autocast(..., enabled=False):` and `.float()` "
        "inputs: `.float()` alone is not enough, autocast runs the convolution in half again)"
    )
    summary = (
        f"`{brief(node, 18)}`: {shape} cancels in {precision}: {brief_outcome}; float32, "
        "autocast off"
    )
    return Report(node, message, summary=summary)
