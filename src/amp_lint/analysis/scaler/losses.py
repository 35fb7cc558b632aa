"""Which names in a function hold losses: what it passes to `.backward()`, `scaler.scale()`,
`accelerator.backward()` or `torch.autograd.backward()`. Such values are never activations,
whatever an assumption about the call that produced them says."""

from __future__ import annotations

import libcst as cst

from amp_lint.analysis.syntax.names import dotted_name
from amp_lint.analysis.syntax.outline import (
    calls_in,
    positional_arguments,
    walk_function_statements,
)

_BACKWARD_FUNCTIONS = frozenset(["scale", "backward"])


def backpropagated_names(function: cst.FunctionDef) -> frozenset[str]:
    """`loss` for `loss.backward()`, `scaler.scale(loss).backward()`,
    `accelerator.backward(loss)`, `torch.autograd.backward(loss)`."""
    found: set[str] = set()
    for statement in walk_function_statements(function):
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for call in calls_in(statement):
            func = call.func
            if not isinstance(func, cst.Attribute):
                continue
            positional = positional_arguments(call)
            if func.attr.value == "backward" and not positional:
                name = dotted_name(func.value)  # loss.backward(retain_graph=True)
            elif func.attr.value in _BACKWARD_FUNCTIONS and positional:
                name = dotted_name(positional[0])  # scaler.scale(loss), acc.backward(loss)
            else:
                continue
            if name is not None:
                found.add(name)
    return frozenset(found)
