"""AMP202 no-half-kernel: linear algebra and FFTs given half-precision input under autocast."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from amp_lint.analysis.interpreter.frames import ExecutionContext
from amp_lint.analysis.regions.finder import AutocastRegion
from amp_lint.analysis.syntax.outline import positional_arguments
from amp_lint.analysis.values import semantics
from amp_lint.analysis.values.dtypes import BFLOAT16, DType
from amp_lint.analysis.values.optables import OpCategory, load_op_tables
from amp_lint.findings import Edit, Fix, FixSafety
from amp_lint.fixes.builders import device_code_for_island, fp32_island, torch_name
from amp_lint.fixes.upcasts import upcast, upcast_fix
from amp_lint.rules.base import Report, Rule
from amp_lint.rules.common import UPCAST_FIX_SAFETY, brief, code
from amp_lint.rules.island_safety import island_changes_only_the_call


@dataclass(frozen=True)
class _Op:
    # Positions of the tensor arguments whose dtype reaches the kernel (0 = first argument,
    # the receiver for a Tensor method).
    data: tuple[int, ...] = (0,)
    # The aten op whose autocast category decides whether autocast upcasts the call, when it
    # is not the op's own name (composites that run a listed op).
    table_op: str | None = None
    # A composite that multiplies matrices inside: `.float()` on its input is not enough
    # (autocast casts the inner matmul back to half), it needs an fp32 island.
    needs_island: bool = False


_LINALG: dict[str, _Op] = {
    "linalg_inv": _Op(),
    "linalg_inv_ex": _Op(),
    "linalg_solve": _Op((0, 1)),
    "linalg_solve_ex": _Op((0, 1)),
    "linalg_det": _Op(),
    "linalg_slogdet": _Op(),
    "linalg_cholesky": _Op(),
    "linalg_cholesky_ex": _Op(),
    "linalg_eigh": _Op(),
    "linalg_eigvalsh": _Op(),
    "linalg_eig": _Op(),
    "linalg_eigvals": _Op(),
    "linalg_svd": _Op(),
    "linalg_svdvals": _Op(),
    "linalg_qr": _Op(),
    "linalg_lstsq": _Op((0, 1)),
    "linalg_pinv": _Op(needs_island=True),
    "linalg_matrix_rank": _Op(),
    "linalg_cond": _Op(),
    "linalg_lu": _Op(),
    "linalg_lu_factor": _Op(),
    "linalg_lu_factor_ex": _Op(),
    "linalg_lu_solve": _Op((0, 2)),
    "linalg_ldl_factor": _Op(),
    "linalg_ldl_factor_ex": _Op(),
    "linalg_solve_triangular": _Op((0, 1)),
    "linalg_householder_product": _Op((0, 1)),
    "linalg_tensorinv": _Op(),
    "linalg_tensorsolve": _Op((0, 1)),
    "inverse": _Op(),
    "det": _Op(),
    "logdet": _Op(),
    "slogdet": _Op(),
    "pinverse": _Op(needs_island=True),
    "svd": _Op(),
    "qr": _Op(),
    "lu": _Op(table_op="_lu_with_info"),
    "lu_solve": _Op((0, 1)),
    "cholesky": _Op(),
    "cholesky_solve": _Op((0, 1)),
    "cholesky_inverse": _Op(),
    "triangular_solve": _Op((0, 1)),
    "geqrf": _Op(),
    "orgqr": _Op((0, 1)),
    "ormqr": _Op((0, 1, 2)),
    # Random-projection SVD/PCA: matmuls (half under autocast) then QR and SVD.
    "svd_lowrank": _Op(table_op="linalg_qr", needs_island=True),
    "pca_lowrank": _Op(table_op="linalg_qr", needs_island=True),
}
_FFT_NAMES = [
    "fft",
    "ifft",
    "rfft",
    "irfft",
    "hfft",
    "ihfft",
    "fft2",
    "ifft2",
    "rfft2",
    "irfft2",
    "hfft2",
    "ihfft2",
    "fftn",
    "ifftn",
    "rfftn",
    "irfftn",
    "hfftn",
    "ihfftn",
]
_FFT: dict[str, _Op] = {"fft_" + name: _Op() for name in _FFT_NAMES}
_FFT["stft"] = _Op()
_OPS: dict[str, _Op] = {**_LINALG, **_FFT}
# Tensor methods with the same kernels (`a.inverse()`, `x.stft(...)`).
_METHODS = frozenset(
    [
        "inverse",
        "det",
        "logdet",
        "slogdet",
        "pinverse",
        "svd",
        "qr",
        "lu",
        "lu_solve",
        "cholesky",
        "cholesky_solve",
        "cholesky_inverse",
        "triangular_solve",
        "geqrf",
        "orgqr",
        "ormqr",
        "stft",
    ]
)
# The devices whose autocast lists amp-lint has, in the order they are named in messages.
_DEVICES = ("cuda", "cpu")


class NoHalfKernel(Rule):
    code = "AMP202"
    name = "no-half-kernel"
    summary = (
        "Checks for linear-algebra decompositions, inverses, solves, determinants and FFTs "
        "given a float16/bfloat16 tensor inside an autocast region that does not upcast them."
    )
    why = """\
cuSOLVER, MAGMA, LAPACK and MKL have no half-precision kernels. Autocast runs some of these ops
in float32, but which ones depends on the device:

* **CUDA** upcasts none of the decompositions: `torch.linalg.inv`, `solve`, `det`, `cholesky`,
  `eigh`, `svd`, `qr`, `lstsq`, `pinv`, `torch.inverse`, `torch.svd`, ... run in the dtype of
  their input. Given the float16 or bfloat16 output of a matmul, conv or linear layer they
  raise, for example `linalg.inv: Low precision dtypes not supported. Got Half` (a check
  shared with CPU) or a kernel's `"..." not implemented for 'Half'` (bfloat16 alike). Only the
  norms (`linalg.norm`, `matrix_norm`, `vector_norm`) are on CUDA's float32 list.
* **CUDA FFTs** (`torch.fft.*`, `torch.stft` without a float32 window) run in float16 only when
  every transformed size is a power of two ("cuFFT only supports dimensions whose sizes are
  powers of two when computing in half precision") and return experimental `complex32`; in
  bfloat16 they raise "Unsupported dtype BFloat16".
* **CPU** autocast runs most of them in float32 (`linalg.inv`, `solve`, `cholesky`, `eigh`,
  `svd`, `qr`, all `torch.fft` transforms but the 2-D/n-D Hermitian ones, `stft`), but not
  `linalg.det`, `linalg.slogdet`, `torch.det`, `logdet`, `linalg.pinv`, `linalg.lu`,
  `lu_factor`, `solve_triangular`, `ldl_factor`, `linalg.lu_solve` and the `fft.hfft2`,
  `ihfft2`, `hfftn`, `ihfftn` transforms, which raise there too (`"lu_cpu" not implemented for
  'Half'`, `linalg.slogdet: Low precision dtypes not supported`, measured on torch 2.13).

The rule reads the per-device autocast lists and fires only where the op is not upcast on the
region's device (both CUDA's and CPU's are checked when the device is not known statically) and
the input is known to be half precision. Casting the input with `.float()` is enough: autocast
does not cast an op it does not list back to half."""
    example = """\
import torch

with torch.autocast("cuda"):
    features = encoder(x)  # float16
    gram = features.mT @ features  # float16
    whitening = torch.linalg.inv(gram)
"""
    fixed_example = """\
import torch

with torch.autocast("cuda"):
    features = encoder(x)  # float16
    gram = features.mT @ features  # float16
    whitening = torch.linalg.inv(gram.float())
"""
    fix_safety = (
        """\
The fix calls `.float()` on the op's half-precision tensor arguments. It is **safe** for the
linear-algebra ops: wherever the original ran (on CPU, autocast casts their input to float32
itself) the result is the same, and where it raised it now runs in float32. It is **unsafe**
for FFTs under a region that may be CUDA float16: the original ran when every size was a
power of two, in float16 with a `complex32` result, and the fix changes the dtype and the
values.

`linalg.pinv`, `torch.pinverse`, `torch.svd_lowrank` and `torch.pca_lowrank` multiply matrices
inside, which autocast would cast back to half, so their fix wraps the statement in an fp32
island (`with torch.autocast(<device>, enabled=False):`) as well. That is **safe** when the
statement makes no other call and no `@` product (the island then changes only this call, and
CPU autocast runs these ops entirely in float32 too), otherwise **unsafe**. There is no island
fix when the call is not the only statement on its line or sits in a compound statement's
header."""
        + UPCAST_FIX_SAFETY
    )
    known_limitations = """\
Only inputs known to be half precision are flagged (the outputs of matmuls, convolutions and
linear layers under autocast, `.half()` tensors, ...); a parameter of unknown dtype is not.
FFTs under CUDA float16 are flagged even when every size is a power of two (they run then,
with an experimental `complex32` result). `torch.stft` is flagged only without a `window`
or with a half-precision one: a float32 window promotes the framed signal to float32.
`linalg.matrix_norm` / `linalg.norm` with `ord=2`, `-2` or `"nuc"` (an SVD inside) under CPU
autocast are not flagged. Complex tensors are never cast by autocast: a value that is
conjugated (`.conj()`) or built by `torch.view_as_complex`/`torch.complex`/`torch.polar`
is complex, and what it meets stays complex."""
    node_types = (cst.Call,)
    accepts_assumptions = True

    def check_node(self, node: cst.CSTNode, ctx: ExecutionContext) -> Iterator[Report]:
        assert isinstance(node, cst.Call)
        region = ctx.active_region
        if region is None:
            return
        found = _op_call(node, ctx)
        if found is None:
            return
        name, op, data, is_method = found
        half = [arg for arg in data if ctx.dtype(arg).is_half]
        if not half:
            return
        if name == "stft" and not _stft_window_is_half(node, ctx, is_method=is_method):
            return
        devices = _failing_devices(name, op, region)
        if not devices:
            return
        dtype = ctx.dtype(half[0])
        display = f"Tensor.{name}" if is_method else _display_name(name)
        message = (
            f"`{display}` gets {dtype.describe()} input `{code(half[0])}` under "
            f"{region.describe()}: {_what_goes_wrong(name, devices, region, dtype)}; call it on "
            "`.float()` input"
        )
        summary = (
            f"`{brief(display, 25)}` {_what_goes_wrong_briefly(name, devices, region, dtype)}; "
            "use `.float()` input"
        )
        yield Report(node, message, _fix(node, name, op, half, region, ctx), summary=summary)


def _op_call(
    node: cst.Call, ctx: ExecutionContext
) -> tuple[str, _Op, list[cst.BaseExpression], bool] | None:
    """(op name, its entry, its data arguments, whether it is a Tensor method call) for a call
    of one of the ops."""
    positional = positional_arguments(node)
    qualified = ctx.qualified_name(node.func)
    if qualified is not None:
        name = semantics.op_name_for_function(qualified)
        if name is None or name not in _OPS:
            return None
        op = _OPS[name]
        return name, op, [positional[i] for i in op.data if i < len(positional)], False
    func = node.func
    if not isinstance(func, cst.Attribute) or func.attr.value not in _METHODS:
        return None
    name = func.attr.value
    op = _OPS[name]
    arguments = [func.value, *positional]
    return name, op, [arguments[i] for i in op.data if i < len(arguments)], True


def _stft_window_is_half(node: cst.Call, ctx: ExecutionContext, *, is_method: bool) -> bool:
    """stft multiplies the frames by the window: a float32 window makes the FFT float32."""
    window: cst.BaseExpression | None = None
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value == "window":
            window = arg.value
    positional = positional_arguments(node)
    index = 3 if is_method else 4  # stft(input, n_fft, hop_length, win_length, window, ...)
    if window is None and len(positional) > index:
        window = positional[index]
    if window is None or (isinstance(window, cst.Name) and window.value == "None"):
        return True
    return ctx.dtype(window).is_half


def _failing_devices(name: str, op: _Op, region: AutocastRegion) -> list[str]:
    """The devices the region may run on where autocast leaves the op in half precision."""
    tables = load_op_tables()
    devices = [region.device] if region.device is not None else list(_DEVICES)
    table_op = op.table_op or name
    return [
        device
        for device in devices
        if tables.category(device, table_op) is not OpCategory.FLOAT32
        and (device in ("cpu", "cuda", "xpu"))
    ]


def _is_fft(name: str) -> bool:
    return name in _FFT


def _display_name(name: str) -> str:
    if name.startswith("linalg_"):
        return "torch.linalg." + name[len("linalg_") :]
    if name.startswith("fft_"):
        return "torch.fft." + name[len("fft_") :]
    return "torch." + name


def _what_goes_wrong(name: str, devices: list[str], region: AutocastRegion, dtype: DType) -> str:
    unknown = region.device is None
    where = " and ".join(d.upper() if d != "xpu" else "XPU" for d in devices)
    suffix = " (the device is not known here)" if unknown else ""
    if _is_fft(name) and devices != ["cpu"]:
        if region.dtype == BFLOAT16:
            return (
                f"autocast does not upcast it on {where}{suffix} and FFTs have no bfloat16 "
                'kernels ("Unsupported dtype BFloat16")'
            )
        return (
            f"autocast does not upcast it on {where}{suffix}: cuFFT computes half precision "
            'only for power-of-two sizes ("cuFFT only supports dimensions whose sizes are '
            'powers of two when computing in half precision") and bfloat16 not at all'
        )
    return (
        f"autocast does not upcast it on {where}{suffix} and there is no half-precision kernel "
        'for it, so it raises ("Low precision dtypes not supported" / "not implemented for '
        f"'{dtype.torch_name()}'\")"
    )


def _what_goes_wrong_briefly(
    name: str, devices: list[str], region: AutocastRegion, dtype: DType
) -> str:
    """`_what_goes_wrong` in a summary's words: the error, and where it is raised."""
    where = "/".join(d.upper() for d in devices)
    if _is_fft(name) and devices != ["cpu"]:
        if region.dtype == BFLOAT16:
            return f'raises "Unsupported dtype BFloat16" on {where}'
        return f"in {dtype.describe()} needs power-of-two sizes on {where} (cuFFT)"
    return f"raises \"not implemented for '{dtype.torch_name()}'\" on {where}"


def _fix(
    node: cst.Call,
    name: str,
    op: _Op,
    half: list[cst.BaseExpression],
    region: AutocastRegion,
    ctx: ExecutionContext,
) -> Fix | None:
    if not op.needs_island:
        ran_before = _is_fft(name) and region.may_be_float16 and region.device != "cpu"
        return upcast_fix(
            "Call it on float32 input",
            [(arg, ctx.dtype(arg)) for arg in half],
            ctx.facts.names,
            ctx.dtype,
            FixSafety.UNSAFE if ran_before else FixSafety.SAFE,
            shared=bool(ctx.frame.chain),
        )
    line = ctx.statement
    if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
        return None
    device = device_code_for_island(region.device, region.device_expr, half[0])
    if device is None:
        return None
    torch, needs_import = torch_name(ctx.facts.names)
    upcasts: dict[int, cst.BaseExpression] = {}
    for arg in half:
        upcasted = upcast(
            arg, ctx.dtype(arg), ctx.facts.names, ctx.dtype, shared=bool(ctx.frame.chain)
        )
        if upcasted is None:
            return None
        upcasts[id(arg)] = upcasted
    new_call = _replace_arguments(node, upcasts)
    new_line = line.deep_replace(node, new_call)
    assert isinstance(new_line, cst.SimpleStatementLine)
    return Fix(
        FixSafety.SAFE if island_changes_only_the_call(line) else FixSafety.UNSAFE,
        "Run it in an fp32 island",
        edits=(
            Edit(line, fp32_island(new_line, device, torch, scripted=ctx.facts.may_be_scripted)),
        ),
        imports=("torch",) if needs_import else (),
    )


def _replace_arguments(node: cst.Call, upcasts: dict[int, cst.BaseExpression]) -> cst.Call:
    func = node.func
    if isinstance(func, cst.Attribute) and id(func.value) in upcasts:
        node = node.with_changes(func=func.with_changes(value=upcasts[id(func.value)]))
    return node.with_changes(
        args=[
            arg.with_changes(value=upcasts[id(arg.value)]) if id(arg.value) in upcasts else arg
            for arg in node.args
        ]
    )
