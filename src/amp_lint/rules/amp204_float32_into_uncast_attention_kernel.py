"""AMP204 float32-into-uncast-attention-kernel: a float32 tensor reaching flash-attn or xformers
attention inside an autocast region, which does not cast their inputs."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from amp_lint.analysis.interpreter.frames import ExecutionContext
from amp_lint.analysis.syntax.outline import positional_arguments, source_text
from amp_lint.analysis.values.dtypes import DType, DTypeKind
from amp_lint.rules.base import Report, Rule
from amp_lint.rules.common import brief


@dataclass(frozen=True)
class Kernel:
    """An attention kernel outside autocast's op lists and how it checks its inputs' dtypes."""

    tensors: tuple[str, ...]  # the tensor parameters whose dtypes it checks, in order
    # The error for a float32 first tensor; None: float32 is accepted when all agree.
    float32_error: str | None
    # The error for a later tensor whose dtype differs from the first one's, by parameter.
    mismatch_errors: dict[str, str]


_FLASH_DTYPE = '"FlashAttention only support fp16 and bf16 data type"'
_FLASH_KEY = '"query and key must have the same dtype"'
_FLASH_VALUE = '"query and value must have the same dtype"'
_XFORMERS_DTYPE = '"Query/Key/Value should all have the same dtype"'


def _flash(*tensors: str) -> Kernel:
    """flash-attn checks `q.dtype` in (float16, bfloat16), then k and v against q
    (csrc/flash_attn/flash_api.cpp); packed kv is split into k and v first."""
    mismatch = {name: _FLASH_VALUE if name.startswith("v") else _FLASH_KEY for name in tensors[1:]}
    return Kernel(tensors, _FLASH_DTYPE, mismatch)


# Function name -> kernel. flash-attn 2 exports them from `flash_attn` (and
# `flash_attn.flash_attn_interface`); flash-attn 3 from `flash_attn_interface`.
_FLASH_KERNELS = {
    "flash_attn_func": _flash("q", "k", "v"),
    "flash_attn_varlen_func": _flash("q", "k", "v"),
    "flash_attn_qkvpacked_func": _flash("qkv"),
    "flash_attn_varlen_qkvpacked_func": _flash("qkv"),
    "flash_attn_kvpacked_func": _flash("q", "kv"),
    "flash_attn_varlen_kvpacked_func": _flash("q", "kv"),
    "flash_attn_with_kvcache": _flash("q", "k_cache", "v_cache"),
}
_FLASH_MODULES = ("flash_attn", "flash_attn.flash_attn_interface", "flash_attn_interface")
# xformers runs float32 too (slower), but refuses a mix (xformers/ops/fmha/common.py).
_XFORMERS_KERNEL = Kernel(
    ("query", "key", "value"), None, {"key": _XFORMERS_DTYPE, "value": _XFORMERS_DTYPE}
)
_XFORMERS_NAMES = frozenset(
    [
        "xformers.ops.memory_efficient_attention",
        "xformers.ops.fmha.memory_efficient_attention",
        "xformers.ops.memory_efficient_attention_forward",
        "xformers.ops.fmha.memory_efficient_attention_forward",
    ]
)


# torch's own varlen attention (2.10+) is a custom op (torch_attn::_varlen_attn) with no
# autocast registration, whose implementation calls aten::_flash_attention_forward, which no
# autocast list has: the same checks and messages as flash-attn's
# (pytorch/torchtitan#2542: "FlashAttention only support fp16 and bf16 data type").
_VARLEN_NAMES = frozenset(["torch.nn.attention.varlen.varlen_attn"])
_VARLEN_KERNEL = Kernel(
    ("query", "key", "value"), _FLASH_DTYPE, {"key": _FLASH_KEY, "value": _FLASH_VALUE}
)


def kernel_for(qualified: str | None) -> Kernel | None:
    if qualified is None:
        return None
    if qualified in _XFORMERS_NAMES:
        return _XFORMERS_KERNEL
    if qualified in _VARLEN_NAMES:
        return _VARLEN_KERNEL
    module, _, name = qualified.rpartition(".")
    return _FLASH_KERNELS.get(name) if module in _FLASH_MODULES else None


class Float32IntoUncastAttentionKernel(Rule):
    code = "AMP204"
    name = "float32-into-uncast-attention-kernel"
    summary = (
        "Checks for float32 tensors passed to flash-attn, xformers or `varlen_attn` attention "
        "inside an autocast region: autocast casts only the ops it lists, not their inputs."
    )
    why = """\
Autocast casts the inputs of the aten ops on its lists; a kernel from another library
(`flash_attn_func` and its varlen/packed/kv-cache siblings, xformers'
`memory_efficient_attention`) gets its arguments as they are, and so does torch's own
`torch.nn.attention.varlen.varlen_attn` (torch 2.10+), a custom op without an autocast
registration that calls the flash kernel directly (pytorch/torchtitan#2542). Inside a float16
or bfloat16 region most activations are half, but not all of them:

* outputs of ops autocast runs in **float32**: `layer_norm`, `group_norm`, `softmax`, `norm`,
  and, on CUDA from torch 2.12, `rms_norm` (pytorch/pytorch#174824: `nn.RMSNorm` used as
  QK-norm now returns float32 under autocast; huggingface/diffusers#14160);
* results promoted by a float32 tensor that no autocast op touched: rotary embeddings
  (`q * cos + rotate_half(q) * sin` with float32 `cos`/`sin` buffers), a float32 bias or scale.

flash-attn refuses anything but float16 and bfloat16 (csrc/flash_attn/flash_api.cpp):

```
RuntimeError: FlashAttention only support fp16 and bf16 data type
RuntimeError: query and key must have the same dtype
```

and xformers refuses a mix (`ValueError: Query/Key/Value should all have the same dtype`). The
same model runs with `F.scaled_dot_product_attention`, which autocast casts (it is on the
lower-precision list), so the failure appears when a faster backend is switched on, or when
torch is upgraded past the release that moved an op to float32. The rule reads the op tables
of the project's `torch-version`, and its message names the release when the float32 comes
from an op whose policy changed."""
    example = """\
import torch
from flash_attn import flash_attn_func

proj = torch.nn.Linear(64, 192).cuda()
q_norm = torch.nn.RMSNorm(64).cuda()
k_norm = torch.nn.RMSNorm(64).cuda()


def attend(x):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        q, k, v = proj(x).chunk(3, dim=-1)
        q, k = q_norm(q), k_norm(k)
        return flash_attn_func(q, k, v, causal=True)
"""
    fixed_example = """\
import torch
from flash_attn import flash_attn_func

proj = torch.nn.Linear(64, 192).cuda()
q_norm = torch.nn.RMSNorm(64).cuda()
k_norm = torch.nn.RMSNorm(64).cuda()


def attend(x):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        q, k, v = proj(x).chunk(3, dim=-1)
        q, k = q_norm(q).to(v.dtype), k_norm(k).to(v.dtype)
        return flash_attn_func(q, k, v, causal=True)
"""
    fix_safety = """\
There is no automatic fix. Casting the float32 inputs to the others' dtype (`.to(v.dtype)`, as
in the fixed example) is what `F.scaled_dot_product_attention` gets from autocast; where the
float32 comes from a normalisation, casting its output keeps the normalisation itself in
float32."""
    known_limitations = """\
A tensor is reported only when the analysis knows it is float32 inside the region: the output
of a float32-policy op or of a promotion with a known float32 tensor. Values from calls it
cannot see into (a norm module from another library, a model) are unknown and not reported.
`torch.nn.attention.flex_attention` and other `torch.library.custom_op` kernels are not
checked: run on torch 2.13 under CPU autocast, flex_attention accepted mixed bfloat16/float32
inputs (eager and compiled) and a custom op's Python implementation ran its own aten ops under
autocast, so neither raised (`varlen_attn` calls a kernel on no autocast list). flash-attn 1's
`flash_attn_unpadded_*` names are not recognised. Regions known to run on the CPU are skipped
(these kernels are CUDA-only). In library mode (`--assume-autocast`) pass `--device cuda`:
ops whose policy differs between CUDA and CPU (layer_norm, rms_norm) have no known dtype
while the device is unknown. Norms reached through a parameter annotated with a string
(`attn: "Attention"`), or computed in a class whose output dtype follows its weight's, are
unknown too (bghira/SimpleTuner#3002, kohya-ss/musubi-tuner 092dd1a: both missed)."""
    node_types = (cst.Call,)

    def check_node(self, node: cst.CSTNode, ctx: ExecutionContext) -> Iterator[Report]:
        assert isinstance(node, cst.Call)
        region = ctx.active_region
        if region is None or not region.is_active or region.device == "cpu":
            return
        kernel = kernel_for(ctx.qualified_name(node.func))
        if kernel is None:
            return
        tensors = _tensor_arguments(node, kernel)
        dtypes = {name: ctx.dtype(argument) for name, argument in tensors.items()}
        float32 = [name for name, dtype in dtypes.items() if dtype.kind is DTypeKind.FLOAT32]
        error = _error(kernel, dtypes, float32)
        if error is None:
            return
        called = source_text(node.func)
        named = ", ".join(f"`{source_text(tensors[name])}`" for name in float32)
        verb = "is" if len(float32) == 1 else "are"
        message = (
            f"{named} {verb} float32 at `{called}` under {region.describe()}"
            f"{_others(dtypes, float32)}: autocast does not cast this kernel's inputs, and it "
            f"raises {error}; cast them to the autocast dtype before the call "
            "(`.to(v.dtype)`) or use `F.scaled_dot_product_attention`, which autocast casts"
        )
        first = brief(tensors[float32[0]], 12) + (" ..." if len(float32) > 1 else "")
        quoted = brief(error.strip('"'), 44)
        summary = f'`{brief(called, 26)}` gets float32 `{first}`: raises "{quoted}"; cast to half'

        yield Report(node, message, None, summary=summary)


def _error(kernel: Kernel, dtypes: dict[str, DType], float32: list[str]) -> str | None:
    """The error the kernel raises for these dtypes; None when it may run."""
    if not float32:
        return None
    first = dtypes.get(kernel.tensors[0])
    if kernel.float32_error is not None and kernel.tensors[0] in float32:
        return kernel.float32_error
    if first is not None and first.is_half:
        return kernel.mismatch_errors.get(float32[0])
    if kernel.float32_error is not None:
        # The first tensor is float32 (the dtype error) or half (the mismatch one).
        mismatch = kernel.mismatch_errors.get(float32[0])
        return f"{kernel.float32_error} or {mismatch}" if mismatch else kernel.float32_error
    # A kernel that accepts float32 raises only when an input is half too.
    half = [name for name, dtype in dtypes.items() if dtype.is_half]
    later = [name for name in (*half, *float32) if name != kernel.tensors[0]]
    return kernel.mismatch_errors.get(later[0]) if half and later else None


def _tensor_arguments(node: cst.Call, kernel: Kernel) -> dict[str, cst.BaseExpression]:
    found: dict[str, cst.BaseExpression] = dict(
        zip(kernel.tensors, positional_arguments(node)[: len(kernel.tensors)])
    )
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value in kernel.tensors:
            found[arg.keyword.value] = arg.value
    return found


def _others(dtypes: dict[str, DType], float32: list[str]) -> str:
    half = [name for name, dtype in dtypes.items() if dtype.is_half and name not in float32]
    if not half:
        return ""
    return (
        f" while {', '.join(half)} {'is' if len(half) == 1 else 'are'} {dtypes[half[0]].describe()}"
    )
