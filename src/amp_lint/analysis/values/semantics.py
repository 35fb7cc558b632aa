"""What PyTorch does to dtypes, op by op: conversions, factories, shape ops, and autocast's
per-device casting policy (read from the op tables)."""

from __future__ import annotations

from dataclasses import replace

import libcst as cst

from amp_lint.analysis.regions.finder import AutocastRegion
from amp_lint.analysis.syntax.names import dotted_name
from amp_lint.analysis.values.dtypes import (
    BFLOAT16,
    BOOL,
    FLOAT16,
    FLOAT32,
    FLOAT64,
    INTEGER,
    NON_TENSOR_KINDS,
    UNKNOWN,
    DType,
    DTypeKind,
    half,
    join,
    promote,
)
from amp_lint.analysis.values.optables import OpCategory, load_op_tables, release_note

CONVERSION_METHODS: dict[str, DType] = {
    "float": FLOAT32,
    "half": half(FLOAT16),
    "bfloat16": half(BFLOAT16),
    "double": FLOAT64,
    "long": INTEGER,
    "int": INTEGER,
    "short": INTEGER,
    "byte": INTEGER,
    "char": INTEGER,
    "bool": BOOL,
}

BOOL_METHODS = frozenset(
    [
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "isnan",
        "isinf",
        "isfinite",
        "isneginf",
        "isposinf",
        "logical_and",
        "logical_or",
        "logical_not",
        "logical_xor",
        "isclose",
        "signbit",
    ]
)
INTEGER_METHODS = frozenset(["argmax", "argmin", "argsort", "nonzero", "bincount", "count_nonzero"])
SCALAR_METHODS = frozenset(
    [
        "item",
        "tolist",
        "size",
        "dim",
        "numel",
        "nelement",
        "element_size",
        "stride",
        "data_ptr",
        "ndimension",
    ]
)
SHAPE_ATTRIBUTES = frozenset(["T", "mT", "H", "mH", "data", "real", "imag", "grad"])
NON_TENSOR_ATTRIBUTES = frozenset(
    ["dtype", "device", "ndim", "is_cuda", "requires_grad", "layout", "is_leaf", "names"]
)
# Binary ops whose second operand is data that takes part in type promotion.
BINARY_OPS = frozenset(
    [
        "add",
        "sub",
        "subtract",
        "rsub",
        "mul",
        "multiply",
        "div",
        "divide",
        "true_divide",
        "floor_divide",
        "matmul",
        "mm",
        "bmm",
        "mv",
        "dot",
        "vdot",
        "outer",
        "ger",
        "maximum",
        "minimum",
        "fmax",
        "fmin",
        "atan2",
        "hypot",
        "fmod",
        "remainder",
        "pow",
        "lerp",
        "copysign",
        "xlogy",
        "mse_loss",
        "l1_loss",
        "smooth_l1_loss",
        "huber_loss",
        "binary_cross_entropy",
        "binary_cross_entropy_with_logits",
        "kl_div",
        "cosine_similarity",
        "pairwise_distance",
        "cdist",
        "linear",
        "bilinear",
        "baddbmm",
        "addmm",
        "addbmm",
        "einsum",
    ]
)

FLOAT32_FACTORIES = frozenset(
    [
        "zeros",
        "ones",
        "empty",
        "rand",
        "randn",
        "eye",
        "linspace",
        "logspace",
        "normal",
        "hann_window",
        "hamming_window",
        "blackman_window",
        "bartlett_window",
        "kaiser_window",
    ]
)
LIKE_FACTORIES = frozenset(
    ["zeros_like", "ones_like", "empty_like", "rand_like", "randn_like", "full_like"]
)
NEW_FACTORIES = frozenset(["new_zeros", "new_ones", "new_empty", "new_full", "new_tensor"])

# nn.Module classes whose call runs one op that autocast knows about.
NN_MODULE_OPS: dict[str, str] = {
    "Linear": "linear",
    "LazyLinear": "linear",
    "Bilinear": "bilinear",
    "Conv1d": "conv1d",
    "Conv2d": "conv2d",
    "Conv3d": "conv3d",
    "ConvTranspose1d": "conv_transpose1d",
    "ConvTranspose2d": "conv_transpose2d",
    "ConvTranspose3d": "conv_transpose3d",
    "LayerNorm": "layer_norm",
    "GroupNorm": "group_norm",
    "RMSNorm": "rms_norm",
    "Softmax": "softmax",
    "LogSoftmax": "log_softmax",
    "MSELoss": "mse_loss",
    "L1Loss": "l1_loss",
    "SmoothL1Loss": "smooth_l1_loss",
    "HuberLoss": "huber_loss",
    "CrossEntropyLoss": "cross_entropy",
    "NLLLoss": "nll_loss",
    "KLDivLoss": "kl_div",
    "BCELoss": "binary_cross_entropy",
    "BCEWithLogitsLoss": "binary_cross_entropy_with_logits",
    "ReLU": "relu",
    "GELU": "gelu",
    "SiLU": "silu",
    "Tanh": "tanh",
    "Sigmoid": "sigmoid",
    "Dropout": "dropout",
    "Identity": "identity",
    # Windows and paddings of hand-written image statistics (SSIM): CPU autocast runs
    # avg_pool3d and the reflection/replication pads in float32, the rest keep their input's.
    "AvgPool1d": "avg_pool1d",
    "AvgPool2d": "avg_pool2d",
    "AvgPool3d": "avg_pool3d",
    "ReflectionPad1d": "reflection_pad1d",
    "ReflectionPad2d": "reflection_pad2d",
    "ReflectionPad3d": "reflection_pad3d",
    "ReplicationPad1d": "replication_pad1d",
    "ReplicationPad2d": "replication_pad2d",
    "ReplicationPad3d": "replication_pad3d",
}
# Modules holding other modules: called in turn (Sequential), indexed and iterated.
CONTAINER_MODULES = frozenset(
    "torch.nn." + name
    for name in ("Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict")
)
# Modules whose output is their float32 weights looked up by index: no autocast list has
# `embedding`, so they give float32 even under autocast (unless the model was cast to half).
FLOAT32_OUTPUT_MODULES = frozenset(["Embedding", "EmbeddingBag"])
# Modules with float32 parameters: outside autocast they need float32 input.
PARAMETRIZED_MODULES = frozenset(
    [
        "Linear",
        "LazyLinear",
        "Bilinear",
        "Conv1d",
        "Conv2d",
        "Conv3d",
        "ConvTranspose1d",
        "ConvTranspose2d",
        "ConvTranspose3d",
        "LayerNorm",
        "GroupNorm",
        "RMSNorm",
    ]
)

_FUNCTION_NAMESPACES = (
    ("torch.nn.functional.", ""),
    ("torch.linalg.", "linalg_"),
    ("torch.fft.", "fft_"),
    ("torch.special.", "special_"),
    ("torch.Tensor.", ""),
    ("torch.", ""),
)

# Calls that are False wherever eager autocast runs: `if torch.jit.is_scripting():` selects
# code that only TorchScript runs, which eager autocast never casts (timm's idiom around
# autocast and checkpointing). `torch.jit.is_tracing()` is not here: tracing runs the eager
# ops, autocast included; nor `torch.compiler.is_compiling()`: compiled code keeps autocast.
FALSE_IN_EAGER_MODE = frozenset({"torch.jit.is_scripting", "torch._jit_internal.is_scripting"})


def op_name_for_function(qualified: str) -> str | None:
    """`torch.nn.functional.softmax` -> "softmax", `torch.linalg.inv` -> "linalg_inv"."""
    for prefix, op_prefix in _FUNCTION_NAMESPACES:
        if qualified.startswith(prefix):
            rest = qualified[len(prefix) :]
            return None if "." in rest else op_prefix + rest
    return None


# Composite ops that PyTorch implements by calling a listed op, which autocast then casts:
# on CPU einsum is not listed but runs bmm/mm, so its output is lower precision there too
# (measured on torch 2.13, tests/test_optables.py). CUDA lists them as lower precision.
_COMPOSITES = {"einsum": "matmul", "chain_matmul": "matmul", "linalg_multi_dot": "matmul"}


def op_result(op: str, inputs: list[DType], region: AutocastRegion | None) -> DType:
    """The dtype an op returns, given its data inputs and the innermost autocast region."""
    op = _COMPOSITES.get(op, op)
    if region is None or not region.is_active:
        return promote(inputs)
    if region.device is not None:
        result = _apply_category(load_op_tables().category(region.device, op), inputs, region)
        return _noting_release(result, (region.device,), op)
    results = [
        _apply_category(load_op_tables().category(device, op), inputs, region)
        for device in ("cuda", "cpu")
    ]
    outcome = join(results[0], results[1])
    # Autocast decided differently per device and the region's device is unknown.
    if outcome.kind is DTypeKind.UNKNOWN and results[0] != results[1]:
        return UNKNOWN
    return _noting_release(outcome, ("cuda", "cpu"), op)


def _noting_release(result: DType, devices: tuple[str, ...], op: str) -> DType:
    """`result`, noting the release when `op`'s policy on these devices changed between torch
    releases: the finding it leads to holds on the targeted release only."""
    if result.kind not in (DTypeKind.HALF, DTypeKind.FLOAT32):
        return result
    notes = [note for note in (release_note(device, op) for device in devices) if note]
    return replace(result, release_note="; ".join(notes)) if notes else result


def _apply_category(category: OpCategory, inputs: list[DType], region: AutocastRegion) -> DType:
    known = [d for d in inputs if d.kind not in NON_TENSOR_KINDS]
    # Autocast casts only floating-point tensors and leaves float64 alone.
    if any(d.kind in (DTypeKind.FLOAT64, DTypeKind.COMPLEX) for d in known):
        return promote(inputs)
    if known and all(d.kind in (DTypeKind.INTEGER, DTypeKind.BOOL) for d in known):
        return promote(inputs)
    if category is OpCategory.LOWER_PRECISION:
        result = region.lower_precision
        # Autocast leaves float64 alone: from an input of unknown dtype (or one half only
        # unless it was float64), the result is half only unless that input was float64.
        if result.is_half and any(d.kind is DTypeKind.UNKNOWN or d.unless_float64 for d in known):
            return replace(result, unless_float64=True)
        return result
    if category is OpCategory.FLOAT32:
        return FLOAT32
    if category is OpCategory.BANNED:
        return UNKNOWN
    return promote(inputs)


def factory_dtype(name: str, fill: float | None) -> DType:
    """dtype of `torch.<name>(...)` called without `dtype=` (fill: full's literal value)."""
    if name in FLOAT32_FACTORIES:
        return FLOAT32
    if name == "full" and fill is not None:
        # torch.full infers its dtype from the fill value: 1.0 -> float32, 1 -> int64.
        return FLOAT32 if isinstance(fill, float) else INTEGER
    if name == "randint":
        return INTEGER
    return UNKNOWN


# nn.Module methods that return the module itself with its parameters' dtype unchanged.
_SAME_MODULE_METHODS = frozenset({"to", "cuda", "cpu", "xpu", "train", "eval", "requires_grad_"})


def returns_same_module(method: str, call: cst.Call) -> bool:
    if method not in _SAME_MODULE_METHODS:
        return False
    # `.to(torch.float16)` / `.to(dtype=...)` / `.to(x)` may change the parameters' dtype.
    return method != "to" or all(
        arg.keyword is None and not _may_carry_dtype(arg.value) for arg in call.args
    )


def _may_carry_dtype(node: cst.BaseExpression) -> bool:
    if isinstance(node, (cst.SimpleString, cst.Integer)):
        return False  # "cuda", "cuda:0", 0
    if isinstance(node, cst.Call):
        return not (dotted_name(node.func) or "").endswith("device")
    dotted = dotted_name(node)
    if dotted is None:
        return True
    last = dotted.rsplit(".", 1)[-1]
    return last not in ("device", "cuda", "cpu") and "device" not in last.lower()
