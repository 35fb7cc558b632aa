"""AMP201 autocast-refused-op: binary_cross_entropy / nn.BCELoss under CUDA autocast."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from amp_lint.analysis.interpreter.frames import ExecutionContext
from amp_lint.analysis.regions.finder import AutocastRegion
from amp_lint.analysis.syntax.outline import positional_arguments
from amp_lint.analysis.values.dtypes import DType, DTypeKind
from amp_lint.analysis.values.optables import OpCategory, load_op_tables
from amp_lint.findings import Edit, Fix, FixSafety
from amp_lint.fixes.builders import call_in_fp32_island, torch_name
from amp_lint.rules.base import Report, Rule
from amp_lint.rules.common import UPCAST_FIX_SAFETY
from amp_lint.rules.island_safety import island_changes_only_the_call

_OP = "binary_cross_entropy"
_FUNCTIONS = frozenset(["torch.nn.functional.binary_cross_entropy"])
_MODULES = frozenset(
    ["torch.nn.BCELoss", "torch.nn.modules.BCELoss", "torch.nn.modules.loss.BCELoss"]
)
_SIGMOIDS = frozenset(["torch.sigmoid", "torch.nn.functional.sigmoid", "torch.special.expit"])
# The tensors binary_cross_entropy(input, target, weight, ...) reads, by position and keyword.
_TENSOR_PARAMETERS = ("input", "target", "weight")
_REFUSAL = '"torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast"'


class AutocastRefusedOp(Rule):
    code = "AMP201"
    name = "autocast-refused-op"
    summary = (
        "Checks for `F.binary_cross_entropy` and `nn.BCELoss` called inside an autocast region "
        "that may run on CUDA, where autocast refuses to run them."
    )
    why = """\
CUDA autocast registers `binary_cross_entropy` as a banned op: calling it inside an enabled
CUDA (or XPU) autocast region raises, whatever the dtype of its inputs and whatever the region's
dtype (float16 and bfloat16 alike):

```
RuntimeError: torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to
autocast. Many models use a sigmoid layer right before the binary cross entropy layer. In this
case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits or
torch.nn.BCEWithLogitsLoss. binary_cross_entropy_with_logits and BCEWithLogits are safe to
autocast.
```

The reason is numerical: `log(p)` and `log(1 - p)` of a probability that was rounded to float16
lose everything near 0 and 1, and the gradient `1 / (p (1 - p))` overflows. CPU autocast
instead runs `binary_cross_entropy` in float32 (it is on the CPU float32 list), so code that
was tested on a CPU runs there and fails on the first GPU run. The rule therefore fires only
where the region's device may be CUDA: a literal `"cuda"` / `"xpu"` device, or a device that
is not known statically."""
    example = """\
import torch
import torch.nn.functional as F

with torch.autocast("cuda"):
    logits = model(x)
    loss = F.binary_cross_entropy(torch.sigmoid(logits), target)
"""
    fixed_example = """\
import torch
import torch.nn.functional as F

with torch.autocast("cuda"):
    logits = model(x)
    loss = F.binary_cross_entropy_with_logits(logits, target)
"""
    fix_safety = (
        """\
One fix per finding, the best that applies:

* When the input is literally a sigmoid (`torch.sigmoid(z)`, `z.sigmoid()`, `F.sigmoid(z)`,
  `torch.special.expit(z)`) of a functional `F.binary_cross_entropy` call, the fix calls
  `F.binary_cross_entropy_with_logits(z, ...)` instead (same positional and keyword
  arguments). This is what PyTorch's error message recommends: it is numerically stable and
  autocast runs it in float32. It is **unsafe**: the loss is computed differently (log-sum-exp
  instead of `log` of a rounded probability), so values and gradients change slightly, and more
  where the probability saturates.
* Otherwise (an `nn.BCELoss` instance, or an input that is not a literal sigmoid) the fix runs
  the statement in an fp32 island, `with torch.autocast(<device>, enabled=False):`, with
  `.float()` on the input and target, and on the weight when it is known to be a tensor (it
  may be None, and the op multiplies the loss by it, which promotes). This is exactly what CPU
  autocast does for `binary_cross_entropy` (it is on CPU's float32 list), so wherever the
  original ran the result is the same, and on CUDA it runs where the original raised. It is
  **safe** when nothing else in the statement calls a function or multiplies matrices (the
  island would run those in float32 too); otherwise it is **unsafe**. The island's device is
  the region's literal device, else `<input>.device.type`. There is no fix when the call is
  not the only statement on its line or sits in a compound statement's header."""
        + UPCAST_FIX_SAFETY
    )
    known_limitations = """\
`nn.BCELoss` objects are recognised when they are created in the same module (a module-level
or local variable, or `self.x = nn.BCELoss()` in `__init__`). Regions whose device is known
to be the CPU are not flagged (CPU autocast computes BCE in float32); regions on other devices
(`"mps"`) are not flagged either. `torch.autocast("cuda", enabled=flag)` is flagged: it raises
whenever the flag is true."""
    node_types = (cst.Call,)

    def check_node(self, node: cst.CSTNode, ctx: ExecutionContext) -> Iterator[Report]:
        assert isinstance(node, cst.Call)
        region = ctx.active_region
        if region is None or not _refuses(region):
            return
        form = _bce_form(node, ctx)
        if form is None:
            return
        where = (
            f"under {region.describe()}"
            if region.device is not None
            else f"under {region.describe()} (the device is not known here: it raises if it is "
            "CUDA)"
        )
        sigmoid_input = _sigmoid_argument(node, ctx) if form == "function" else None
        advice = (
            "use `F.binary_cross_entropy_with_logits` on the logits"
            if sigmoid_input is not None
            else "use `binary_cross_entropy_with_logits` / `BCEWithLogitsLoss` on logits, or "
            "run it with `torch.autocast(..., enabled=False)` and `.float()` inputs"
        )
        message = (
            f"`{'nn.BCELoss' if form == 'module' else 'binary_cross_entropy'}` is called {where}: "
            f"CUDA autocast refuses it with {_REFUSAL}; {advice}"
        )
        fix: Fix | None
        if sigmoid_input is not None:
            fix = _logits_fix(node, sigmoid_input, ctx)
        else:
            fix = _island_fix(node, form, region, ctx)
        called = "nn.BCELoss" if form == "module" else "binary_cross_entropy"
        if sigmoid_input is not None:
            instead = "`F.binary_cross_entropy_with_logits`"
        else:
            instead = f"`{'BCEWithLogitsLoss' if form == 'module' else '*_with_logits'}` or float32"
        summary = f'`{called}` raises "...unsafe to autocast" on CUDA; use {instead}'
        yield Report(node, message, fix, summary=summary)


def _refuses(region: AutocastRegion) -> bool:
    tables = load_op_tables()
    if region.device is not None:
        return tables.category(region.device, _OP) is OpCategory.BANNED
    return OpCategory.BANNED in tables.categories_for_unknown_device(_OP)


def _bce_form(node: cst.Call, ctx: ExecutionContext) -> str | None:
    """ "function" for F.binary_cross_entropy(...), "module" for a BCELoss object's call."""
    qualified = ctx.qualified_name(node.func)
    if qualified is not None:
        return "function" if qualified in _FUNCTIONS else None
    func: cst.BaseExpression = node.func
    if isinstance(func, cst.Attribute) and func.attr.value == "forward":
        func = func.value
    instance = ctx.value(func).instance_of
    return "module" if instance in _MODULES else None


def _sigmoid_argument(node: cst.Call, ctx: ExecutionContext) -> cst.BaseExpression | None:
    """`z` when the input argument is literally `torch.sigmoid(z)`, `z.sigmoid()`, ..."""
    argument = _input_argument(node)
    if not isinstance(argument, cst.Call):
        return None
    positional = positional_arguments(argument)
    if len(argument.args) != len(positional):
        return None  # out= or other keywords: leave it alone
    qualified = ctx.qualified_name(argument.func)
    if qualified in _SIGMOIDS and len(positional) == 1:
        return positional[0]
    if (
        qualified is None
        and isinstance(argument.func, cst.Attribute)
        and argument.func.attr.value == "sigmoid"
        and not positional
        and ctx.dtype(argument.func.value).kind is not DTypeKind.OTHER
    ):
        return argument.func.value
    return None


def _input_argument(node: cst.Call) -> cst.BaseExpression | None:
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value == "input":
            return arg.value
    positional = positional_arguments(node)
    return positional[0] if positional else None


def _logits_fix(node: cst.Call, logits: cst.BaseExpression, ctx: ExecutionContext) -> Fix:
    argument = _input_argument(node)
    func = node.func
    if isinstance(func, cst.Attribute):
        new_func: cst.BaseExpression = func.with_changes(
            attr=cst.Name("binary_cross_entropy_with_logits")
        )
        imports: tuple[str, ...] = ()
        unused: tuple[tuple[str, str | None, str | None], ...] = ()
    else:
        # A from-import (`from torch.nn.functional import binary_cross_entropy as bce`):
        # spell the replacement through torch.
        torch, needs_import = torch_name(ctx.facts.names)
        new_func = cst.parse_expression(f"{torch}.nn.functional.binary_cross_entropy_with_logits")
        imports = ("torch",) if needs_import else ()
        # The from-import the call used may now be unused; the fixer removes it if so.
        alias = func.value if isinstance(func, cst.Name) and func.value != _OP else None
        unused = (("torch.nn.functional", _OP, alias),)
    new_call = node.with_changes(
        func=new_func,
        args=[
            arg.with_changes(value=logits) if arg.value is argument else arg for arg in node.args
        ],
    )
    return Fix(
        FixSafety.UNSAFE,
        "Use binary_cross_entropy_with_logits on the logits",
        edits=(Edit(node, new_call),),
        imports=imports,
        unused_imports=unused,
    )


def _island_fix(
    node: cst.Call, form: str, region: AutocastRegion, ctx: ExecutionContext
) -> Fix | None:
    line = ctx.statement
    if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
        return None
    tensors = _tensor_arguments(node, ctx)
    island = call_in_fp32_island(
        line,
        node,
        tensors,
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
    safe = island_changes_only_the_call(line)
    return Fix(
        FixSafety.SAFE if safe else FixSafety.UNSAFE,
        "Run it in an fp32 island",
        edits=(Edit(line, island_line),),
        imports=("torch",) if needs_import else (),
    )


def _tensor_arguments(
    node: cst.Call, ctx: ExecutionContext
) -> list[tuple[cst.BaseExpression, DType]]:
    """The input, target and weight arguments that may be tensors, with their dtypes."""
    found: list[tuple[cst.BaseExpression, DType]] = []
    position = 0
    for arg in node.args:
        if arg.star:
            continue
        if arg.keyword is None:
            name = _TENSOR_PARAMETERS[position] if position < len(_TENSOR_PARAMETERS) else ""
            position += 1
        else:
            name = arg.keyword.value
        if name in _TENSOR_PARAMETERS and _tensor_like(arg.value, ctx, optional=name == "weight"):
            found.append((arg.value, ctx.dtype(arg.value)))
    return found


def _tensor_like(node: cst.BaseExpression, ctx: ExecutionContext, *, optional: bool) -> bool:
    """`input` and `target` are tensors whatever the analysis knows (the op raises for
    anything else); `weight` may be None, so it gets `.float()` only when it is known to be a
    tensor (and needs none: the op multiplies the loss by it, which promotes)."""
    if isinstance(node, (cst.Integer, cst.Float, cst.SimpleString)):
        return False
    if isinstance(node, cst.Name) and node.value == "None":
        return False
    value = ctx.value(node)
    if optional:
        return value.dtype.is_floating_tensor and not value.maybe_none
    return value.dtype.is_floating_tensor or value.dtype.kind is DTypeKind.UNKNOWN
