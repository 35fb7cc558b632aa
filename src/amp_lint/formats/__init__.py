"""Output formats of `amp-lint check`: text for people, JSON for tools."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from amp_lint.findings import Finding, FixSafety


@dataclass(frozen=True)
class CodeCount:
    """One line of `--statistics`: how often a rule fired, and how many of those are fixable."""

    code: str
    name: str
    count: int
    safe_fixes: int
    unsafe_fixes: int


def count_by_code(findings: Iterable[Finding]) -> list[CodeCount]:
    """Counts per code, most frequent first, then by code (ruff's order)."""
    findings = list(findings)
    counts = Counter(f.code for f in findings)
    names = {f.code: f.name for f in findings}
    safe = Counter(f.code for f in findings if f.fix and f.fix.safety is FixSafety.SAFE)
    unsafe = Counter(f.code for f in findings if f.fix and f.fix.safety is FixSafety.UNSAFE)
    return [
        CodeCount(code, names[code], count, safe[code], unsafe[code])
        for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    ]


__all__ = ["CodeCount", "count_by_code"]
