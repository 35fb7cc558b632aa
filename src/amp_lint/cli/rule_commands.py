"""`amp-lint rules` (the rules, with fix availability), `amp-lint rule CODE` (one rule's page)
and `amp-lint verify` (the runtime evidence; torch is imported only when it runs)."""

from __future__ import annotations

import argparse
import sys
from types import ModuleType

from amp_lint.cli.reporting import EXIT_CLEAN, EXIT_ERROR, Reporter


def run_rules(args: argparse.Namespace) -> int:
    from amp_lint.pages.rule_pages import fix_availability
    from amp_lint.rules import all_rules

    rules = all_rules()
    rows = [("CODE", "NAME", "FIX", "WHAT IT DOES")] + [
        (rule.code, rule.name, fix_availability(rule).label, " ".join(rule.summary.split()))
        for rule in rules
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths)]
        print("  ".join([*cells, row[3]]))
    return EXIT_CLEAN


def verify_command() -> ModuleType:
    from amp_lint.verify import command  # torch itself is imported only when verify runs

    return command


def run_verify(args: argparse.Namespace) -> int:
    status: int = verify_command().run(args)
    return status


def run_rule(args: argparse.Namespace) -> int:
    from amp_lint.pages.rule_pages import render_rule
    from amp_lint.rules import Rule, all_rules

    wanted = args.rule.strip()
    matches = [rule for rule in all_rules() if wanted.upper() == rule.code or wanted == rule.name]
    if not matches:
        known = ", ".join(rule.code for rule in all_rules())
        Reporter().error(f"unknown rule {wanted!r} (known: {known})")
        return EXIT_ERROR
    rule: type[Rule] = matches[0]
    sys.stdout.write(render_rule(rule))
    return EXIT_CLEAN
