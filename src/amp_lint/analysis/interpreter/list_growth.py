"""Lists grown in place: `layers.append(m)`, `layers.extend([...])`, `layers += [...]`.

The grown list keeps its elements in order, so a model assembled the usual way (pix2pix and
CycleGAN generators, most U-Nets: a list of layers grown in loops, then
`nn.Sequential(*layers)`) runs its layers in turn and its output dtype is known. A loop's body
is read once, so a list grown in a loop holds that iteration's additions once, as alike layers
of unknown number are applied once elsewhere (`calling.LocalCalls._run_layers`): after the loop the
list is the grown one, not a join of the empty and the grown list (which forgot the order)."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from amp_lint.analysis.interpreter.frames import Frame
from amp_lint.analysis.syntax.names import dotted_name
from amp_lint.analysis.values.dtypes import OTHER
from amp_lint.analysis.values.value import Env, Value, join_all

_GROWING_METHODS = frozenset(["append", "extend"])


def _is_list(value: Value) -> bool:
    return value.keys is None and value.is_container and value.instance_of is None


def grown(container: Value, added: Value) -> Value:
    """`container + added` for a list: the elements in order when both are known, else a
    list of alike elements."""
    if container.elements is not None and added.elements is not None and added.keys is None:
        return Value(OTHER, elements=container.elements + added.elements)
    alike = [v for v in (container.iterated(), added.iterated()) if v is not None]
    return Value(OTHER, each=join_all(alike)) if alike else Value(OTHER)


def list_growth(
    small: cst.BaseSmallStatement,
    frame: Frame,
    evaluate: Callable[[cst.BaseExpression, Frame], Value],
) -> tuple[str, Value] | None:
    """The list variable a statement grows and its value after it; None for any other
    statement (a tensor's `x += y` included: only variables holding lists grow)."""
    target: cst.BaseExpression
    if isinstance(small, cst.AugAssign) and isinstance(small.operator, cst.AddAssign):
        target, added_node, method = small.target, small.value, "extend"
    elif (
        isinstance(small, cst.Expr)
        and isinstance(small.value, cst.Call)
        and isinstance(small.value.func, cst.Attribute)
        and small.value.func.attr.value in _GROWING_METHODS
        and len(small.value.args) == 1
        and small.value.args[0].keyword is None
        and not small.value.args[0].star
    ):
        target, added_node = small.value.func.value, small.value.args[0].value
        method = small.value.func.attr.value
    else:
        return None
    name = dotted_name(target)
    current = frame.env.get(name) if name is not None else None
    if name is None or current is None or not _is_list(current):
        return None
    added = evaluate(added_node, frame)
    if method == "append":
        added = Value(OTHER, elements=(added,))
    return name, grown(current, added)


def keep_lists_grown_in_loop(before: Env, after_body: Env, merged: Env) -> None:
    """After a loop, a list the body only added to is the grown list (see the module
    docstring), where the merge of the two paths lost its order."""
    for name, old in before.values.items():
        new = after_body.get(name)
        if new is None or new is old or old.elements is None or new.elements is None:
            continue
        if not _is_list(old) or not _is_list(new) or len(new.elements) <= len(old.elements):
            continue
        if new.elements[: len(old.elements)] == old.elements:
            merged.values[name] = new
