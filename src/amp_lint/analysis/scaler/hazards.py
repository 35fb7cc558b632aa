"""What the GradScaler order walk (flow.py) reports, and what it carries from statement to
statement to find it.

The hazards and the ScalerFlow that holds them are what the AMP301-AMP303 and AMP311 rules
read. The state and the context are the walk's own: the "may" facts merged where branches
join, and where the walked statement sits.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import libcst as cst

from amp_lint.analysis.syntax.calls import ClassInfo

# How many calls deep the walk follows the module's own functions.
MAX_DEPTH = 4


@dataclass(frozen=True)
class Backward:
    """`scaler.scale(loss).backward()` (or a name assigned from `scaler.scale(...)`)."""

    call: cst.Call
    scaler: cst.BaseExpression  # as spelled where the backward is (maybe in a callee)
    in_callee: bool  # reached through a call from the walked function


@dataclass(frozen=True)
class ScalerHazard:
    # "clip" (AMP301), "bypass" and "double_step" (AMP302), "no_update" (AMP303),
    # "late_clip" (AMP311)
    kind: str
    node: cst.Call
    via: tuple[cst.Call, ...] = ()
    backwards: tuple[Backward, ...] = ()
    # Whether an unscale_ may have run before (bypass: gradients unscaled, inf still applied).
    unscaled: bool = False
    # Where the node's statement sits, for fixes: the line, and whether it is the only
    # statement on its line inside an indented block (a fix can add a line beside it).
    line: cst.SimpleStatementLine | None = None
    function: cst.FunctionDef | None = None
    path: tuple[cst.CSTNode, ...] = ()
    # no_update: "never" (no update in reach) or "after_loop" (only outside the loop).
    detail: str = ""
    # no_update: the loop over optimizers the step is in, after which an update belongs.
    optimizer_loop: cst.For | None = None
    # double_step, late_clip: the `scaler.step(optimizer)` that already made the update.
    step: cst.Call | None = None


@dataclass(frozen=True)
class WalkState:
    backwards: frozenset[Backward] = frozenset()
    unscaled: bool = False
    stepped: bool = False
    # Clips made with no backward in sight (it ran in the caller): they clipped scaled
    # gradients if a `scaler.step(...)` follows here with no `unscale_` before them.
    clips: tuple[tuple[cst.Call, WalkContext], ...] = ()
    # The `scaler.step(optimizer)` calls of this iteration that may have run, with the
    # optimizer as spelled where the walk is: the gradients they consumed are still there.
    steps: frozenset[tuple[cst.Call, str]] = frozenset()

    def merge(self, other: WalkState) -> WalkState:
        return WalkState(
            self.backwards | other.backwards,
            self.unscaled or other.unscaled,
            self.stepped or other.stepped,
            self.clips + tuple(c for c in other.clips if c not in self.clips),
            self.steps | other.steps,
        )


CLEAN_STATE = WalkState()


@dataclass(frozen=True)
class WalkContext:
    function: cst.FunctionDef | None
    owner: ClassInfo | None
    via: tuple[cst.Call, ...] = ()
    path: tuple[cst.CSTNode, ...] = ()
    line: cst.SimpleStatementLine | None = None
    suppressed: bool = False  # a non-AMP branch
    active: frozenset[int] = frozenset()  # functions being walked (no recursion)
    # The function whose body is walked (a followed callee's), and what its `self` is in
    # the walked function's terms (`self.engine` inside `self.engine.backward_loss()`).
    body_of: cst.FunctionDef | None = None
    self_as: cst.BaseExpression | None = None


@dataclass
class ScalerFlow:
    """Hazards of one module, in the order found."""

    hazards: list[ScalerHazard] = field(default_factory=list)
    # Every `scaler.step(...)` call of a walked function body (not via a call): for fixes.
    steps: dict[int, list[tuple[cst.Call, tuple[cst.CSTNode, ...]]]] = field(default_factory=dict)
    unscales: dict[int, list[cst.Call]] = field(default_factory=dict)

    def of_kind(self, kind: str) -> Iterator[ScalerHazard]:
        return (hazard for hazard in self.hazards if hazard.kind == kind)


def function_key(function: cst.FunctionDef | None) -> int:
    """The key of ScalerFlow.steps / unscales for a function (0: the module's own code)."""
    return id(function) if function is not None else 0
