"""AMP203 custom-function-without-custom-fwd: a torch.autograd.Function applied under autocast
whose forward lacks `custom_fwd` (or whose backward lacks `custom_bwd`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import libcst as cst

from amp_lint.analysis.autograd.applied_functions import AppliedFunctions, FunctionClass
from amp_lint.analysis.autograd.dtype_handling import (
    Decorated,
    decorators_of,
    half_argument,
    handles_dtypes,
    mixed_inputs,
    passes_objects,
    restores_forward_autocast,
)
from amp_lint.analysis.autograd.functions import (
    calls_kernel,
    computes_indices,
    converts_dtypes,
    takes_only_tensors,
    too_few_arguments,
)
from amp_lint.analysis.interpreter.frames import ExecutionContext
from amp_lint.analysis.regions.finder import CUSTOM_BWD, CUSTOM_FWD, AutocastRegion
from amp_lint.analysis.syntax.calls import build_index
from amp_lint.analysis.syntax.module import ModuleFacts
from amp_lint.fixes.custom_function import custom_fwd_fix
from amp_lint.rules.base import Report, Rule
from amp_lint.rules.custom_function_messages import (
    decorated_setup_context,
    message_for,
    remedy_for,
    summary_for,
)

# Written when the region's device is not known: one decorator per device, so that the
# Function is right under CUDA and CPU autocast alike.
_UNKNOWN_DEVICE_TARGETS = ("cuda", "cpu")


class CustomFunctionWithoutCustomFwd(Rule):
    code = "AMP203"
    name = "custom-function-without-custom-fwd"
    summary = (
        "Checks for `torch.autograd.Function` subclasses applied under autocast whose "
        "`forward` lacks `@torch.amp.custom_fwd` or whose `backward` lacks "
        "`@torch.amp.custom_bwd`."
    )
    why = """\
Autocast does not stop at a custom `torch.autograd.Function`. Its `forward` receives whatever
dtypes autocast produced (float16/bfloat16 from matmuls and convolutions, float32 from
others) and runs **with autocast still on**, so the matmuls inside it run in half precision
too. Its `backward`, though, runs when `loss.backward()` is called, normally **outside** the
autocast block: there autocast is off, and the half tensors saved by `forward` meet the
float32 tensors (weights, buffers, float32 gradients) they were mixed with under autocast.
A matmul in `backward` then fails:

```
RuntimeError: expected m1 and m2 to have the same dtype, but got: c10::Half != float
```

(`c10::BFloat16 != float` under bfloat16 autocast; CUDA says `expected mat1 and mat2 to have
the same dtype`), and a C++/CUDA extension kernel fails on the half input itself with
`expected scalar type Float but found Half` or `"..." not implemented for 'Half'`.

`@torch.amp.custom_fwd(device_type=..., cast_inputs=torch.float32)` casts the floating-point
inputs to float32 and runs `forward` with autocast off; `@torch.amp.custom_bwd(device_type=...)`
runs `backward` with the same autocast state as `forward`. This is the recipe of PyTorch's
AMP examples ("Autocast and Custom Autograd Functions"). Both decorators only act under an
autocast of *their* `device_type`: a `custom_fwd(device_type="cuda")` does nothing under
`torch.autocast("cpu")`."""
    example = """\
import torch


class ScaledMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad @ w.t(), x.t() @ grad


with torch.autocast("cuda", dtype=torch.bfloat16):
    h = encoder(x)  # bfloat16
    y = ScaledMatmul.apply(h, w)
y.sum().backward()  # RuntimeError: expected mat1 and mat2 to have the same dtype
"""
    fixed_example = """\
import torch


class ScaledMatmul(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad @ w.t(), x.t() @ grad


with torch.autocast("cuda", dtype=torch.bfloat16):
    h = encoder(x)  # bfloat16
    y = ScaledMatmul.apply(h, w)
y.sum().backward()
"""
    fix_safety = """\
The fix is **unsafe**: `forward` then computes in float32 (its inputs are cast and autocast
is off inside it), so its results, their dtype and the speed change. It adds
`@torch.amp.custom_fwd(device_type=..., cast_inputs=torch.float32)` under `@staticmethod` on
`forward` and `@torch.amp.custom_bwd(device_type=...)` on `backward`, each only where it is
missing, and `import torch` when the module has none (no fix when the name `torch` is bound
to something else).

The decorators act only under an autocast of their `device_type`. The fix writes the device of
the autocast region the Function is applied in when it is a literal (`"cuda"`, `"cpu"`).
When it is not (`torch.autocast(device.type)`, `torch.autocast(args.device)`), the fix writes
**two** of each, `device_type="cuda"` and `device_type="cpu"`: decorators of a device whose
autocast is off pass the call through, so the pair is right on either device; delete the one
your code never runs on. A Function applied under regions of several literal devices gets one
decorator per device, added one region at a time.

A Function in the style torch 2.0 added (forward without `ctx`, a `setup_context`
staticmethod) gets **no fix**: `custom_fwd` keeps its state on forward's first argument, an
input tensor there, so `custom_bwd` raises `AttributeError: ... '_fwd_used_autocast'`, and
setup_context saves the inputs before `custom_fwd` casts them, so backward still mixes dtypes
(both measured on CPU torch, `tests/test_fix_runtime.py`). The message says what works:
compute forward in float32 under `torch.autocast(..., enabled=False)` and save float32 copies
in setup_context. Such a Function that already carries `custom_bwd` is reported for that
AttributeError. A Function whose backward enters autocast in the state forward saved on `ctx`
(`with torch.autocast(device, enabled=ctx._fwd_used_autocast, dtype=ctx._dtype):`, DeepSpeed's
ZeRO-3 linear) is what `custom_bwd` makes, written by hand: it has no finding (decorating its
forward would compute every such linear in float32 under autocast).

`cast_inputs` rebuilds every argument: a list the Function appends to or a dict its backward
writes into stays empty for the caller, a layer list or a callable comes back copied or broken
(reformer's reversible layers, DeepSpeed's Domino linear). Where the call passes such objects
(a list or dict, an `nn.ModuleList`, a lambda) or forward uses a parameter as one (calls it,
loops over it, appends to it), the fix writes `custom_fwd` **without** `cast_inputs`, which
only records the autocast state and passes the arguments through, when forward runs torch
code alone (the caller's layers included): backward then runs in forward's autocast state,
which is what its matmuls need (measured on CPU torch, `tests/test_fix_runtime.py`). That form
is written for one device only: stacked, the inner `custom_fwd` overwrites the outer one's
record of the autocast state, so under a region of unknown device it is not offered. When
forward also calls a kernel of fixed dtype or receives inputs of two dtypes, neither form is
right and no fix is offered; the message says to cast the tensor inputs at the call and apply
the Function with autocast disabled.

A forward that calls a compiled kernel (an extension module's function, a loaded library)
gets no fix for its forward: the kernel's dtypes are not visible from Python, and
`cast_inputs=torch.float32` is right for kernels that take float32 only (most of mmcv's and
detectron2's ops) and breaks kernels that take half only (DeepSpeed's Evoformer attention:
"Only fp16 and bf16 supported"; second fix reading). The message gives the decorator to add
if the kernel takes float32; a missing `custom_bwd` alone is still fixed."""
    known_limitations = """\
Function classes of the module and of the other linted files are checked, applied as
`Cls.apply(...)` (`Cls` defined here, imported, or reached through a module, `ops.Cls.apply`)
or through an alias: `fn = Cls.apply` or `self.fn = Cls.apply` at module level or in a
function, or a name imported from a linted file that binds it at module level
(`from ops import scaled_matmul`, where ops.py has `scaled_matmul = ScaledMatmul.apply`,
re-exports followed). The finding stays at the call, where the region is, and names the
class's `path:line`; a Function of another file gets no fix at the call (decorate it there).
A Function of a package that is not linted (performer's `CausalDotProduct` from
`fast_transformers`) is out of reach: lint that package too. A Function that computes
indices (forward calls `ctx.mark_non_differentiable`, backward returns only None) is flagged
only when the call passes it a tensor known to be half: mmcv's `ball_query` and
`furthest_point_sample` take point coordinates from the data pipeline. A Function whose
forward calls only torch functions and tensor methods is flagged only when its backward
reads saved tensors *and* combines tensors where dtypes must match: a matmul (`@`, `mm`,
`linear`, `conv*`, `einsum`...), a scatter or index write, or a call to code that is neither
torch's nor this module's (an extension kernel). Module functions that forward or backward
call are looked into one level deep. Elementwise backwards (`GradReverse`, GeLU, sqrt,
dropout masks) promote mixed dtypes and run (measured under CPU autocast, float16 and
bfloat16), so they are not flagged: in library mode on transformers
this removed 8 of 18 reports. A backward that calls methods of other objects
(`layer.backward_pass(...)`) is not looked into, and one that recomputes a layer with
autocast off is flagged only through its other calls. A `custom_fwd` whose
`device_type` is not a literal counts as covering every device. A backward that converts
tensors itself (`.to(...)`, `.float()`, `type_as`) is taken to handle the dtypes, and a call
that passes fewer arguments than forward needs (a TypeError in any precision) is not
reported. The message names backward; with extension kernels that require every input to
share the features' dtype (mmcv's ops), the failure usually comes in forward already.

A forward that deals with half inputs itself is not flagged at all: one that upcasts an input
(`x.float()`, `x.contiguous().to(torch.float32)`, anywhere in forward), launches a Triton
kernel (`kernel[grid](...)` of a `@triton.jit` function of the module, or any such launch in a
module that imports triton, or re-exports it as DeepSpeed does; also inside a function of the
module that forward calls, or in a function forward imports from a linted file that launches
Triton kernels, as mamba's Functions call `mamba3_siso_fwd`) or calls a registered custom op
(`torch.ops.<namespace>.<op>`). Such kernels take inputs of several dtypes by design (the
fixed mamba3 applies bfloat16 Q/K/V with float32 dt), so a real mismatch there (mamba's
Q/K/V of two dtypes) is not this rule's to find. They load half inputs and compute in
float32 inside; `custom_fwd(cast_inputs=torch.float32)` would materialise the
float32 copies they are written to avoid. A compiled extension called without an upcast
(`ext_module.deform_conv_forward(x, ...)`) is still flagged: most have no Half kernel (mmcv's
and detectron2's ops did not), and which do cannot be told from the Python code."""
    node_types = (cst.Call,)

    def __init__(self) -> None:
        self._applied = AppliedFunctions()

    def check_module(self, facts: ModuleFacts) -> Iterator[Report]:
        self._applied.read(facts, build_index(facts.module, facts.names))
        return iter(())

    def check_node(self, node: cst.CSTNode, ctx: ExecutionContext) -> Iterator[Report]:
        if not isinstance(node, cst.Call):
            return
        region = ctx.active_region
        if region is None:
            return
        function = self._applied.applied(node, ctx)
        if function is None:
            return
        forward = function.method("forward")
        backward = function.method("backward")
        if forward is None or too_few_arguments(forward, node):
            return  # a call that raises TypeError in any precision is not an AMP finding
        if backward is not None and restores_forward_autocast(backward, function.names):
            return  # what custom_bwd does, by hand: backward runs in forward's autocast state
        bwd = decorators_of(backward, function.names, CUSTOM_BWD) if backward is not None else None
        if function.uses_setup_context and bwd is not None and bwd.present:
            yield decorated_setup_context(node, function)
            return
        if function.handles_half(forward, _kernel_modules(function, ctx)):
            return  # custom_fwd(cast_inputs=float32) would add a float32 copy it exists to avoid
        if computes_indices(forward, backward) and not half_argument(forward, node, ctx):
            # Indices of point coordinates from the data (mmcv's `ball_query`,
            # `furthest_point_sample`): nothing autocast made goes in, no gradient comes out.
            return
        mixed = mixed_inputs(forward, node, ctx)
        if mixed is None and (
            handles_dtypes(forward, node, ctx)
            or not function.mixes_dtypes(forward, backward)
            or (backward is not None and converts_dtypes(backward))
        ):
            return
        fwd = decorators_of(forward, function.names, CUSTOM_FWD)
        # On a setup_context-style Function custom_fwd does not help (uses_setup_context).
        fwd_missing = function.uses_setup_context or not fwd.covers(region.device)
        bwd_missing = bwd is not None and not bwd.covers(region.device)
        if not fwd_missing and not bwd_missing:
            return
        targets = _target_devices(region, fwd)
        # cast_inputs rebuilds every argument: lists, dicts, layers and callables are copied
        # or broken (reformer, DeepSpeed's Domino). Without it, custom_fwd only records the
        # autocast state, which is all a Function needs whose forward runs torch code alone.
        rebuilt = not takes_only_tensors(forward, node) or passes_objects(forward, node, ctx)
        # A compiled kernel's dtypes cannot be seen from Python: most of mmcv's take float32
        # only, DeepSpeed's Evoformer attention half only, so cast_inputs is no fix to write.
        kernel = calls_kernel(forward, function.names, function.index)
        needs_cast = mixed is not None or kernel
        remedy = remedy_for(
            function, fwd_missing, bwd_missing, targets, rebuilt, needs_cast, kernel
        )
        message = message_for(node, function, region, fwd_missing, bwd_missing, mixed, remedy)
        # A Function defined in another file is fixed there: no edit is offered here. The
        # decorators do not work on a setup_context-style Function (uses_setup_context).
        fix = (
            custom_fwd_fix(forward, backward, fwd, bwd, targets, ctx.facts, cast_inputs=not rebuilt)
            if function.path is None
            and not function.uses_setup_context
            and not (kernel and fwd_missing)
            and not (rebuilt and needs_cast)
            # Without cast_inputs, stacked custom_fwd decorators (one per device) overwrite
            # each other's record of the autocast state: on CUDA the inner CPU one says
            # "off", and backward runs without autocast (third fix reading).
            and not (rebuilt and fwd_missing and len(targets) > 1)
            else None
        )
        summary = summary_for(function, fwd_missing, bwd_missing, rebuilt, needs_cast, kernel)
        yield Report(node, message, fix, summary=summary)


def _kernel_modules(function: FunctionClass, ctx: ExecutionContext) -> Callable[[str], bool]:
    """Whether a name forward imports is a function of a linted file that launches kernels.
    A relative import of a Function of another file is relative to that file, which the
    project index would resolve from this one: not looked up."""
    if function.path is None:
        return ctx.launches_kernels
    return lambda qualified: not qualified.startswith(".") and ctx.launches_kernels(qualified)


def _target_devices(region: AutocastRegion, fwd: Decorated) -> tuple[str, ...]:
    """The devices the decorators are written for."""
    if region.device is not None:
        return (region.device,)
    literal = sorted(d for d in fwd.devices if d is not None)
    return tuple(literal) if literal else _UNKNOWN_DEVICE_TARGETS
