"""Recognising a central moment written by hand: `E[x·x] - E[x]·E[x]` and `E[x·y] -
E[x]·E[y]`, where E is a local mean (a convolution, an average pool, or one helper called
on both sides), followed through names assigned once in the function (AMP006)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import libcst as cst

from amp_lint.analysis.interpreter.frames import ExecutionContext
from amp_lint.analysis.syntax.local_definitions import LocalDefinitions, Scope
from amp_lint.analysis.syntax.outline import positional_arguments, source_text

# Local means torch provides: functions, and classes whose instances compute one.
LOCAL_MEAN_FUNCTIONS = frozenset(
    f"{namespace}.{op}"
    for namespace in ("torch", "torch.nn.functional")
    for op in ("conv1d", "conv2d", "conv3d", "avg_pool1d", "avg_pool2d", "avg_pool3d")
)
LOCAL_MEAN_CLASSES = frozenset(
    f"torch.nn.{cls}"
    for cls in ("Conv1d", "Conv2d", "Conv3d", "AvgPool1d", "AvgPool2d", "AvgPool3d")
)
# Names followed from the subtraction to the convolution: `sigma - mu_sq`, `mu_sq =
# mu.pow(2)`, `mu = conv(x)` is three; a few more allow `x2 = x * x; e = conv(x2)`.
MAX_STEPS = 6
_TORCH_LOCAL_MEAN = "torch local mean"
_NO_TEXT_LIMIT = 10_000


@dataclass(frozen=True)
class Moment:
    """What a subtraction computes: E[a·b] - E[a]·E[b]."""

    first: str  # a, as written
    second: str  # b, as written
    # E[a] and E[b] as the subtraction's right term multiplies them (`mu1`, `mu2` of `mu1 *
    # mu2`), and whether they are written in the subtraction itself rather than reached
    # through a name (`mu1_mu2 = mu1 * mu2`): only then may they be evaluated where it runs.
    means: tuple[cst.BaseExpression, cst.BaseExpression]
    means_written_here: bool

    @property
    def is_variance(self) -> bool:
        return self.first == self.second

    @property
    def formula(self) -> str:
        if self.is_variance:
            return f"E[{self.first}²] - E[{self.first}]²"
        return f"E[{self.first}·{self.second}] - E[{self.first}]·E[{self.second}]"


@dataclass(frozen=True)
class _LocalMean:
    operand: cst.BaseExpression  # what is averaged, as written
    averager: str  # which local mean: torch's, or the helper's code


class MomentShapes:
    """Recognises moments in the functions of one analysed module (one per rule instance)."""

    def __init__(self) -> None:
        self._definitions = LocalDefinitions()

    def central_moment(self, node: cst.BinaryOperation, ctx: ExecutionContext) -> Moment | None:
        """The moment `left - right` computes, if it has the shape E[a·b] - E[a]·E[b]."""
        scope: Scope = ctx.frame.function or ctx.facts.module
        mean_of_product = self._local_mean(node.left, scope, ctx)
        if mean_of_product is None:
            return None
        factors = self._product(mean_of_product.operand, scope, ctx)
        right = self._resolve(node.right, scope)
        means = self._product(right, scope, ctx)
        if factors is None or means is None:
            return None
        local_means = [self._local_mean(mean, scope, ctx) for mean in means]
        if any(m is None or m.averager != mean_of_product.averager for m in local_means):
            return None
        averaged = sorted(_text(m.operand) for m in local_means if m is not None)
        first, second = (_text(factor) for factor in factors)
        if averaged != sorted([first, second]):
            return None
        return Moment(first, second, means, right is node.right)

    def inside_fp32_only_callable(self, ctx: ExecutionContext) -> bool:
        """The function being analysed is one the configuration lists in
        `fp32-only-callables`: AMP005 reports its calls under autocast, so the formula inside
        is not reported again."""
        configured = ctx.facts.config.fp32_only_callables
        function = ctx.frame.function
        if not configured or function is None:
            return False
        owner = ctx.frame.self_class
        local = [function.name.value]
        if owner is not None:
            local = [owner.name, f"{owner.name}.{function.name.value}"]
        for module in _module_names(ctx):
            for name in local:
                qualified = f"{module}.{name}"
                if any(qualified == c or qualified.startswith(c + ".") for c in configured):
                    return True
        return False

    def _resolve(self, node: cst.BaseExpression, scope: Scope) -> cst.BaseExpression:
        """What a name holds, through names assigned once in the scope."""
        for _ in range(MAX_STEPS):
            if not isinstance(node, cst.Name):
                return node
            assigned = self._definitions.assigned(scope, node.value)
            if assigned is None:
                return node
            node = assigned
        return node

    def _product(
        self, node: cst.BaseExpression, scope: Scope, ctx: ExecutionContext
    ) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
        """(a, b) of `a * b`, `torch.mul(a, b)`, `a.mul(b)`; (a, a) of the squares `a ** 2`,
        `a.pow(2)`, `torch.pow(a, 2)`, `a.square()`, `torch.square(a)`."""
        node = self._resolve(node, scope)
        if isinstance(node, cst.BinaryOperation):
            if isinstance(node.operator, cst.Multiply):
                return node.left, node.right
            if isinstance(node.operator, cst.Power) and _is_two(node.right):
                return node.left, node.left
            return None
        if not isinstance(node, cst.Call) or any(arg.keyword is not None for arg in node.args):
            return None
        positional = positional_arguments(node)
        qualified = ctx.qualified_name(node.func)
        if qualified is not None:
            namespace, _, name = qualified.rpartition(".")
            return _function_product(name, positional) if namespace == "torch" else None
        if isinstance(node.func, cst.Attribute):
            return _method_product(node.func.value, node.func.attr.value, positional)
        return None

    def _local_mean(
        self, node: cst.BaseExpression, scope: Scope, ctx: ExecutionContext
    ) -> _LocalMean | None:
        node = self._resolve(node, scope)
        if not isinstance(node, cst.Call):
            return None
        positional = positional_arguments(node)
        if not positional:
            return None
        return _LocalMean(positional[0], _averager(node.func, ctx))


def _averager(func: cst.BaseExpression, ctx: ExecutionContext) -> str:
    """Which local mean a call computes: torch's (any convolution or average pool, since
    windows and pools differ between terms in real code), or a helper known by its code."""
    if ctx.qualified_name(func) in LOCAL_MEAN_FUNCTIONS:
        return _TORCH_LOCAL_MEAN
    # `self.mu_x_pool(x)`: an nn.AvgPool2d built in __init__. Only names and attributes are
    # evaluated here: they call nothing.
    named = isinstance(func, (cst.Name, cst.Attribute))
    if named and ctx.value(func).instance_of in LOCAL_MEAN_CLASSES:
        return _TORCH_LOCAL_MEAN
    return "helper " + _text(func)


def _function_product(
    name: str, positional: list[cst.BaseExpression]
) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    if name == "mul" and len(positional) == 2:
        return positional[0], positional[1]
    if name == "pow" and len(positional) == 2 and _is_two(positional[1]):
        return positional[0], positional[0]
    if name == "square" and len(positional) == 1:
        return positional[0], positional[0]
    return None


def _method_product(
    receiver: cst.BaseExpression, name: str, positional: list[cst.BaseExpression]
) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    if name == "mul" and len(positional) == 1:
        return receiver, positional[0]
    if name == "pow" and len(positional) == 1 and _is_two(positional[0]):
        return receiver, receiver
    if name == "square" and not positional:
        return receiver, receiver
    return None


def _is_two(node: cst.BaseExpression) -> bool:
    return isinstance(node, (cst.Integer, cst.Float)) and float(node.value) == 2.0


def _text(node: cst.BaseExpression) -> str:
    return source_text(node, _NO_TEXT_LIMIT)


def _module_names(ctx: ExecutionContext) -> list[str]:
    """The dotted names the analysed file is imported by (its own stem when linted alone)."""
    path = ctx.facts.path
    project = ctx.facts.project
    names = [name for name, paths in project.by_name.items() if path in paths] if project else []
    return names or [os.path.splitext(os.path.basename(path))[0]]
