"""Placeholder: replaced by the dtype interpreter."""
from __future__ import annotations

from typing import TYPE_CHECKING

from amp_lint.analysis.module import ModuleFacts

if TYPE_CHECKING:
    from amp_lint.rules.base import Report, Rule


class ExecutionContext:
    pass


def run_interpreter(facts: ModuleFacts, rules: list[Rule]) -> list[tuple[Rule, Report]]:
    return []
