"""Which branches of an `if` the GradScaler order walk leaves unchecked: the non-AMP
alternative, which runs when the scaler does not. That is the branch of `if not use_amp:` /
`if scaler is None:`, or an `else` whose sibling calls `scaler.step` or `scaler.unscale_`.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from amp_lint.analysis.scaler.names import AMP_WORDS, ScalerNames, all_calls
from amp_lint.analysis.syntax.names import dotted_name
from amp_lint.analysis.syntax.outline import child_nodes


def amp_test(test: cst.BaseExpression) -> bool | None:
    """True for `if use_amp:` / `if scaler is not None:`, False for their negations,
    None for a test that does not read an AMP switch."""
    negated = False
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        negated = not negated
        test = test.expression
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        right = target.comparator
        if isinstance(right, cst.Name) and right.value in ("None", "False"):
            if isinstance(target.operator, (cst.Is, cst.Equal)):
                negated = not negated
            elif not isinstance(target.operator, (cst.IsNot, cst.NotEqual)):
                return None
            test = test.left
        else:
            return None
    if not _mentions_amp(test):
        return None
    return not negated


def updates_with_scaler(body: cst.BaseSuite, names: ScalerNames) -> bool:
    for call in all_calls(body):
        func = call.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value in ("step", "unscale_")
            and names.is_scaler(func.value)
        ):
            return True
    return False


def names_in(node: cst.CSTNode) -> Iterator[cst.Name]:
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            yield current
        stack.extend(child_nodes(current))


def _mentions_amp(test: cst.BaseExpression) -> bool:
    """`use_amp`, `args.fp16`, `self.scaler`: a plain name chain naming an AMP switch."""
    if dotted_name(test) is None:
        return False
    for name in names_in(test):
        words = name.value.lower().split("_")
        if any(word in AMP_WORDS for word in words):
            return True
    return False
