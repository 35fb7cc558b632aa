"""What the GradScaler-order rules (AMP301-AMP303) share: phrases and the statement edits
their fixes make (a new line before or after a statement)."""

from __future__ import annotations

import libcst as cst

from amp_lint.analysis.scaler.hazards import ScalerHazard
from amp_lint.analysis.syntax.module import ModuleFacts
from amp_lint.findings import Edit

RUNTIME_ERROR = "RuntimeError: step() has already been called since the last update()."


def source(node: cst.CSTNode) -> str:
    """The node's code, in full (for fixes; `common.code` shortens it for messages)."""
    return cst.Module([]).code_for_node(node)


def via(hazard: ScalerHazard, facts: ModuleFacts) -> str:
    if not hazard.via:
        return ""
    return " (via " + " → ".join(f"{facts.path}:{facts.line_of(c)}" for c in hazard.via) + ")"


def via_steps(hazard: ScalerHazard, facts: ModuleFacts) -> tuple[tuple[str, int], ...]:
    """The chain `via` names, as data: (path, line) of each call."""
    return tuple((facts.path, facts.line_of(call)) for call in hazard.via)


def standalone_call(hazard: ScalerHazard) -> cst.SimpleStatementLine | None:
    """The hazard's line when the call is the whole of it (`opt.step()` on its own line)."""
    line = hazard.line
    if line is None or len(line.body) != 1:
        return None
    small = line.body[0]
    if isinstance(small, cst.Expr) and small.value is hazard.node:
        return line
    return None


def new_line(code: str) -> cst.SimpleStatementLine:
    statement = cst.parse_statement(code + "\n")
    assert isinstance(statement, cst.SimpleStatementLine)
    return statement


def insert_before(line: cst.SimpleStatementLine, code: str) -> Edit:
    """`code` on a line of its own before `line`, taking over the comments above it."""
    added = new_line(code).with_changes(leading_lines=line.leading_lines)
    return Edit(line, cst.FlattenSentinel([added, line.with_changes(leading_lines=())]))


def insert_after(
    statement: cst.BaseStatement, code: str, replaced: cst.BaseStatement | None = None
) -> Edit:
    """`code` on a line of its own after `statement` (or after `replaced`, which takes its
    place); `statement` must sit in an indented block or at module level."""
    return Edit(statement, cst.FlattenSentinel([replaced or statement, new_line(code)]))
