"""AMP103 mixed-dtype-inplace-write: index/scatter/lerp writes and `out=` buffers that mix a
half tensor with a float32 one, which autocast never reconciles."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from amp_lint.analysis.interpreter.frames import ExecutionContext
from amp_lint.analysis.values.dtype_mismatch import argument, c10_name, mismatched
from amp_lint.analysis.values.dtypes import DType, promote
from amp_lint.analysis.values.optables import OpCategory, load_op_tables
from amp_lint.findings import Edit, Fix, FixSafety
from amp_lint.fixes.builders import to_dtype_of
from amp_lint.rules.base import Report, Rule
from amp_lint.rules.common import brief, code, quoted_error, repeatable, written_tensor


@dataclass(frozen=True)
class _Write:
    """An op that writes a source tensor into a destination and refuses another dtype."""

    source_position: int  # of the source among the method's arguments (after the receiver)
    source_keyword: str
    error: str  # the RuntimeError text; {dest}/{src} are torch names, {dest_c10}/{src_c10}


_INDEX_ADD = _Write(
    2, "source", "index_add_(): self ({dest}) and source ({src}) must have the same scalar type"
)
_INDEX_REDUCE = _Write(
    2, "source", "index_reduce_(): self ({dest}) and source ({src}) must have the same scalar type"
)
_INDEX_COPY = _Write(
    2,
    "source",
    "index_copy_(): self and source expected to have the same dtype, but got (self) {dest} and "
    "(source) {src}",
)
_SCATTER = "scatter(): Expected self.dtype to be equal to src.dtype"
_MASKED_SCATTER = _Write(
    1,
    "source",
    # sic: PyTorch's message has no space after "got".
    "masked_scatter: expected self and source to have same dtypes but got{dest} and {src}",
)
_PUT = _Write(
    1,
    "source",
    "put_(): self and source expected to have the same dtype, but got self.dtype = {dest} and "
    "source.dtype = {src}",
)
_INDEX_PUT = _Write(
    1,
    "values",
    "Index put requires the source and destination dtypes match, got {dest} for the destination "
    "and {src} for the source.",
)
_LERP = _Write(0, "end", "expected dtype {dest_c10} for `end` but got dtype {src_c10}")

# Measured on torch 2.13 CPU: every one raises for float32/float16 and float32/bfloat16 in
# both directions, outside and inside autocast (the out-of-place ones unless autocast lists
# them as widest-input ops on that device, see _autocast_reconciles).
_WRITES: dict[str, _Write] = {
    "index_add_": _INDEX_ADD,
    "index_add": _INDEX_ADD,
    "index_reduce_": _INDEX_REDUCE,
    "index_reduce": _INDEX_REDUCE,
    "index_copy_": _INDEX_COPY,
    "index_copy": _INDEX_COPY,
    "scatter_": _Write(2, "src", _SCATTER),
    "scatter": _Write(2, "src", _SCATTER),
    "scatter_add_": _Write(2, "src", _SCATTER),
    "scatter_add": _Write(2, "src", _SCATTER),
    "scatter_reduce_": _Write(2, "src", _SCATTER),
    "scatter_reduce": _Write(2, "src", _SCATTER),
    "masked_scatter_": _MASKED_SCATTER,
    "masked_scatter": _MASKED_SCATTER,
    "put_": _PUT,
    "index_put_": _INDEX_PUT,
    "index_put": _INDEX_PUT,
    "lerp_": _LERP,
    "lerp": _LERP,
}

# Ops whose `out=` must already have the result's dtype (measured: "Expected out tensor to
# have dtype c10::Half, but got float instead"), with the positions of their data inputs.
# Elementwise ops (add, mul, exp, sum, cat...) cast into `out` and are not listed.
_STRICT_OUT: dict[str, tuple[int, ...]] = {
    "torch.mm": (0, 1),
    "torch.bmm": (0, 1),
    "torch.matmul": (0, 1),
    "torch.addmm": (0, 1, 2),
    "torch.baddbmm": (0, 1, 2),
    "torch.softmax": (0,),
    "torch.log_softmax": (0,),
}


class MixedDtypeInplaceWrite(Rule):
    code = "AMP103"
    name = "mixed-dtype-inplace-write"
    summary = (
        "Checks for `index_add_`, `index_copy_`, `scatter_`/`scatter_add_`/`scatter_reduce_`, "
        "`masked_scatter_`, `put_`, `index_put_`, `lerp` and strict `out=` calls that mix a "
        "half-precision tensor with a float32 one."
    )
    why = """\
Autocast casts the inputs of the out-of-place ops it lists; it never touches in-place ops,
`out=` calls or ops it does not list. These ops then refuse operands of different floating
dtypes instead of promoting them, so a float32 buffer (`torch.zeros(n)` without `dtype=` is
float32) receiving an autocast output, or a half tensor receiving a float32 one, raises
(float16 and bfloat16 alike, measured on torch 2.13):

* `buf.index_add_(0, idx, h)`: `index_add_(): self (Float) and source (Half) must have the
  same scalar type` (also `index_reduce_`);
* `index_copy_`: `index_copy_(): self and source expected to have the same dtype, but got
  (self) Float and (source) Half`;
* `scatter_`, `scatter_add_`, `scatter_reduce_`: `scatter(): Expected self.dtype to be equal
  to src.dtype`;
* `masked_scatter_`: `masked_scatter: expected self and source to have same dtypes but
  gotFloat and Half`;
* `put_`: `put_(): self and source expected to have the same dtype, but got self.dtype =
  Float and source.dtype = Half`; `index_put_`: `Index put requires the source and
  destination dtypes match, got Float for the destination and Half for the source.`;
* `torch.lerp(ema, h, w)` / `ema.lerp_(h, w)`: ``expected dtype float for `end` but got dtype
  c10::Half`` (lerp is on no autocast list, so the out-of-place form fails too);
* `torch.mm(a, b, out=buf)` (also `bmm`, `matmul`, `addmm`, `baddbmm`, `softmax`,
  `log_softmax`): `Expected out tensor to have dtype c10::Half, but got float instead`.

The out-of-place `index_add`, `scatter`, `scatter_add`, `masked_scatter` and `index_put` fail
the same way, except where autocast lists them as widest-input ops (`index_copy` on CPU;
`index_put` and `scatter_add` on CUDA), which are not flagged inside such a region.
`copy_`, `add_`, `mul_`, `masked_fill_` and elementwise `out=` calls cast silently and are
not flagged; an index assignment `x[m] = y` is AMP001."""
    example = """\
import torch

counts = torch.zeros(num_classes, dim)
with torch.autocast("cuda"):
    feats = backbone(images) @ proj  # float16
    counts.index_add_(0, labels, feats)
"""
    fixed_example = """\
import torch

counts = torch.zeros(num_classes, dim)
with torch.autocast("cuda"):
    feats = backbone(images) @ proj  # float16
    counts.index_add_(0, labels, feats.to(counts.dtype))
"""
    fix_safety = """\
Casting the source (or, for `out=`, the inputs) with `.to(dest.dtype)` is **safe**: every
flagged op raises whenever the two floating dtypes differ, so the fix changes only programs
that crashed, and `.to` returns its tensor unchanged when the dtypes already match (for
example when autocast turns out to be disabled at run time). Only the write is fixed: a
float16 value cast into a float32 buffer keeps the precision it was computed in, and a
float32 value cast into a float16 buffer saturates beyond ±65504. No fix is offered when the
destination is not a plain name (`buf`, `self.buf`) that can be repeated."""
    known_limitations = """\
Both dtypes must be known: a buffer passed in as a parameter, or one whose factory takes its
dtype from a variable, is not flagged. A 0-dimensional source and `scatter_(..., value=)` with
a Python number are accepted by PyTorch and not flagged. Only `lerp`'s `end` is checked, not
a tensor `weight`. `torch.set_default_dtype` is not followed: factories without `dtype=` are
taken to be float32."""
    node_types = (cst.Call,)
    accepts_assumptions = True

    def check_node(self, node: cst.CSTNode, ctx: ExecutionContext) -> Iterator[Report]:
        assert isinstance(node, cst.Call)
        qualified = ctx.qualified_name(node.func)
        if qualified in _STRICT_OUT:
            report = self._check_out(node, qualified, ctx)
        else:
            report = self._check_write(node, qualified, ctx)
        if report is not None:
            yield report

    def _check_write(
        self, node: cst.Call, qualified: str | None, ctx: ExecutionContext
    ) -> Report | None:
        if qualified is not None:
            if not qualified.startswith("torch.") or qualified.count(".") != 1:
                return None
            op = qualified.split(".", 1)[1]
            write = _WRITES.get(op)
            if write is None or op.endswith("_"):
                return None
            destination = argument(node, 0, "input")
            source = argument(node, write.source_position + 1, write.source_keyword)
        elif isinstance(node.func, cst.Attribute):
            op = node.func.attr.value
            write = _WRITES.get(op)
            if write is None:
                return None
            destination = node.func.value
            source = argument(node, write.source_position, write.source_keyword)
        else:
            return None
        if destination is None or source is None:
            return None
        dest_dtype, src_dtype = ctx.dtype(destination), ctx.dtype(source)
        if not mismatched(dest_dtype, src_dtype) or _autocast_reconciles(op, ctx):
            return None
        error = write.error.format(
            dest=dest_dtype.torch_name(),
            src=src_dtype.torch_name(),
            dest_c10=c10_name(dest_dtype),
            src_c10=c10_name(src_dtype),
        )
        if op.endswith("_"):
            reason = "in-place ops are never autocast"
        elif op == "lerp":
            reason = "lerp does not promote and autocast does not cast it"
        else:
            reason = "it does not promote and autocast does not cast it here"
        tensor = written_tensor(destination)
        message = (
            f'`{code(node)}` raises "{error}" ({reason}): the destination is '
            f"{dest_dtype.describe()} and the source {src_dtype.describe()}; cast the source "
            f"with `.to({code(tensor)}.dtype)`"
        )
        fix = None
        if repeatable(tensor):
            fix = Fix(
                FixSafety.SAFE,
                "Cast the source to the destination's dtype",
                edits=(Edit(source, to_dtype_of(source, tensor)),),
            )
        summary = (
            f"`{brief(node, 16)}` raises {quoted_error(error, 38)}; cast the source to "
            f"`{brief(tensor, 12)}.dtype`"
        )
        return Report(node, message, fix, summary=summary)

    def _check_out(self, node: cst.Call, qualified: str, ctx: ExecutionContext) -> Report | None:
        out = argument(node, 99, "out")
        if out is None:
            return None
        positional = [arg.value for arg in node.args if arg.keyword is None and not arg.star]
        positions = _STRICT_OUT[qualified]
        if len(positional) < len(positions) or len(positional) != sum(
            1 for arg in node.args if arg.keyword is None
        ):
            return None
        inputs = [positional[i] for i in positions]
        input_dtypes = [ctx.dtype(i) for i in inputs]
        if not all(d.is_floating_tensor for d in input_dtypes):
            return None
        if any(mismatched(a, b) for a in input_dtypes for b in input_dtypes):
            return None  # the inputs disagree among themselves: another error (AMP104)
        result: DType = promote(input_dtypes)
        out_dtype = ctx.dtype(out)
        if not mismatched(result, out_dtype):
            return None
        message = (
            f'`{code(node)}` raises "Expected out tensor to have dtype {c10_name(result)}, '
            f'but got {c10_name(out_dtype)} instead": calls with `out=` are never autocast and '
            f"this op does not cast its result into `out`; cast the inputs with "
            f"`.to({code(out)}.dtype)`"
        )
        fix = None
        if repeatable(out):
            edits = tuple(
                Edit(expr, to_dtype_of(expr, out))
                for expr, dtype in zip(inputs, input_dtypes)
                if mismatched(dtype, out_dtype)
            )
            fix = Fix(FixSafety.SAFE, "Cast the inputs to the dtype of `out`", edits=edits)
        error = f'"Expected out tensor to have dtype {c10_name(result)}..."'
        out_code = brief(out, 12)
        summary = f"`out={out_code}` raises {error}; cast the inputs to `{out_code}.dtype`"
        return Report(node, message, fix, summary=summary)


def _autocast_reconciles(op: str, ctx: ExecutionContext) -> bool:
    """An out-of-place op that the active autocast runs in its widest input dtype (CPU
    `index_copy`; CUDA `index_put`, `scatter_add`). With the device unknown, either counts."""
    region = ctx.active_region
    if region is None or op.endswith("_"):
        return False
    tables = load_op_tables()
    if region.device is not None:
        return tables.category(region.device, op) is OpCategory.PROMOTE
    return OpCategory.PROMOTE in tables.categories_for_unknown_device(op)
