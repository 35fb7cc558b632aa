"""Rules' reports as findings. RuleObserver hands the interpreter's nodes to a rule and
keeps the best-evidenced report for each node; to_findings places each report in its file
and keeps one finding per rule and position. Used by engine.py, for each file's analysis."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

import libcst as cst
from libcst.metadata import CodeRange

from amp_lint.analysis.interpreter.frames import ExecutionContext
from amp_lint.analysis.values.value import Origin
from amp_lint.findings import Finding
from amp_lint.rules import Report, Rule


class RuleObserver:
    """A rule as the interpreter's observer: it sees only the evidence the rule accepts, and
    each report gets the chain or assumption it rests on appended to its message. A node
    reached in several contexts is reported once, from the best of them (`_evidence_rank`):
    the module's code runs first, so `if __name__ == "__main__": train()` reaches what is in
    `train` before `train` is analysed on its own, and that copy has a chain and maybe no
    fix."""

    def __init__(self, rule: Rule) -> None:
        self.rule = rule
        self.node_types = rule.node_types
        self.reports: dict[tuple[int, Origin | None], tuple[tuple[int, ...], Report]] = {}

    def observe(self, node: cst.CSTNode, ctx: ExecutionContext) -> None:
        ctx.accepts_assumptions = self.rule.accepts_assumptions
        ctx.assumptions_used = []
        ctx.release_notes_used = []
        for report in self.rule.check_node(node, ctx):
            key = (id(report.node), report.elsewhere)
            rank = _evidence_rank(report, ctx)
            known = self.reports.get(key)
            if known is None or rank < known[0]:
                message = report.message + ctx.provenance()
                via = report.via or ctx.call_chain()
                self.reports[key] = (rank, replace(report, message=message, via=via))
            ctx.assumptions_used = []
            ctx.release_notes_used = []

    def found(self) -> list[Report]:
        return [report for _, report in self.reports.values()]


def _evidence_rank(report: Report, ctx: ExecutionContext) -> tuple[int, ...]:
    """Lower is better: a fix; then evidence that rests on no assumption about where the code
    runs (a frame reached from an assumed one inherits its assumption); then the shortest
    chain of calls, so that code seen where it is beats the same code reached through a call;
    then fewer assumptions about values."""
    frame = ctx.frame
    return (
        report.fix is None,
        frame.assumption is not None,
        len(frame.chain),
        len(ctx.assumptions_used),
    )


def to_findings(
    reports: Iterable[tuple[Rule, Report]],
    positions: Mapping[cst.CSTNode, CodeRange],
    path: str,
) -> list[Finding]:
    # One finding per rule and position: the first, unless a later one has a fix.
    findings: dict[tuple[object, ...], Finding] = {}
    for rule, report in reports:
        at = report.elsewhere
        if at is not None:
            place = (at.path, at.line, at.column, at.end_line, at.end_column)
        else:
            where = positions[report.node]
            start, end = where.start, where.end
            place = (path, start.line, start.column, end.line, end.column)
        key = (rule.code, *place[:3])
        known = findings.get(key)
        if known is not None and (known.fix is not None or report.fix is None):
            continue
        findings[key] = Finding(
            path=place[0],
            line=place[1],
            column=place[2],
            end_line=place[3],
            end_column=place[4],
            code=rule.code,
            name=rule.name,
            message=report.message,
            fix=report.fix,
            summary=report.summary,
            via=report.via,
        )
    return sorted(findings.values(), key=lambda f: f.sort_key)
