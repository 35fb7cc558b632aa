"""Run the analysis and the rules over one file; apply fixes.

This is the only place that knows both the analysis and the rules. The CLI and the flake8
plugin call `lint_source` and `fix_source` and nothing below them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import CodeRange

from amp_lint.analysis.interpreter import run_interpreter
from amp_lint.analysis.module import ModuleFacts
from amp_lint.analysis.names import collect_names
from amp_lint.config import Config
from amp_lint.findings import Finding, FixSafety
from amp_lint.fixes.apply import FixConflict, apply_fixes
from amp_lint.rules import Report, Rule, all_rules
from amp_lint.suppressions import NoqaMap

MAX_FIX_PASSES = 5


class SourceError(Exception):
    """A file that cannot be decoded or parsed; the message is one line naming the file."""


@dataclass
class FixResult:
    source: bytes
    fixed: list[Finding]
    remaining: list[Finding]


def parse_source(source: bytes, path: str) -> cst.Module:
    try:
        return cst.parse_module(source)
    except cst.ParserSyntaxError as error:
        raise SourceError(
            f"{path}:{error.raw_line}:{error.raw_column + 1}: cannot parse: "
            f"{error.message.splitlines()[0]}"
        ) from None
    except (UnicodeDecodeError, LookupError, SyntaxError, ValueError) as error:
        raise SourceError(f"{path}: cannot decode: {error}") from None


def lint_source(
    source: bytes, path: str, config: Config, *, honour_noqa: bool = True
) -> list[Finding]:
    """Findings for one file, sorted by position, without their edits."""
    module = parse_source(source, path)
    findings = _lint_module(module, path, config, honour_noqa=honour_noqa)
    return [finding.portable() for finding in findings]


def fix_source(source: bytes, path: str, config: Config, *, unsafe: bool) -> FixResult:
    """Apply every applicable fix, re-linting until nothing more changes."""
    module = parse_source(source, path)
    fixed: list[Finding] = []
    for _ in range(MAX_FIX_PASSES):
        findings = _lint_module(module, path, config, honour_noqa=True)
        chosen = [f for f in findings if f.fix is not None and _allowed(f, unsafe)]
        if not chosen:
            break
        try:
            new_module, applied = apply_fixes(module, chosen)
        except FixConflict as error:
            raise SourceError(
                f"{path}: fix produced invalid code ({error}); file left unchanged"
            ) from None
        if not applied or new_module.code == module.code:
            break
        # Re-parse: the next pass needs fresh node identities and proof the code parses.
        try:
            module = cst.parse_module(new_module.bytes)
        except cst.ParserSyntaxError as error:
            raise SourceError(
                f"{path}: fix produced code that does not parse ({error.message.splitlines()[0]});"
                " file left unchanged"
            ) from None
        fixed.extend(f.portable() for f in applied)
    remaining = [f.portable() for f in _lint_module(module, path, config, honour_noqa=True)]
    return FixResult(source=module.bytes, fixed=fixed, remaining=remaining)


def _allowed(finding: Finding, unsafe: bool) -> bool:
    assert finding.fix is not None
    return unsafe or finding.fix.safety is FixSafety.SAFE


def _lint_module(
    module: cst.Module, path: str, config: Config, *, honour_noqa: bool
) -> list[Finding]:
    rules = [rule_class() for rule_class in all_rules() if config.is_enabled(rule_class.code, path)]
    if not rules:
        return []
    facts = ModuleFacts(path=path, module=module, names=collect_names(module), config=config)
    reports: list[tuple[Rule, Report]] = []
    for rule in rules:
        reports.extend((rule, report) for report in rule.check_module(facts))
    reports.extend(run_interpreter(facts, [r for r in rules if r.node_types]))
    if not reports:
        return []
    findings = _to_findings(reports, facts.positions, path)
    if honour_noqa:
        noqa = NoqaMap(module.code)
        findings = [f for f in findings if not noqa.suppresses(f.line, f.code)]
    return findings


def _to_findings(
    reports: Iterable[tuple[Rule, Report]],
    positions: Mapping[cst.CSTNode, CodeRange],
    path: str,
) -> list[Finding]:
    seen: set[tuple[str, int, int]] = set()
    findings: list[Finding] = []
    for rule, report in reports:
        where = positions[report.node]
        key = (rule.code, where.start.line, where.start.column)
        if key in seen:
            continue
        seen.add(key)
        findings.append(
            Finding(
                path=path,
                line=where.start.line,
                column=where.start.column,
                end_line=where.end.line,
                end_column=where.end.column,
                code=rule.code,
                name=rule.name,
                message=report.message,
                fix=report.fix,
            )
        )
    return sorted(findings, key=lambda f: f.sort_key)
