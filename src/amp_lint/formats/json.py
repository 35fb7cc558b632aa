"""A JSON array of findings (or of per-code counts) for tools; columns are 1-based."""

from __future__ import annotations

import json
from collections.abc import Iterable

from amp_lint.findings import Finding
from amp_lint.formats import count_by_code


def finding_to_dict(finding: Finding) -> dict[str, object]:
    fix = (
        None
        if finding.fix is None
        else {
            "safety": finding.fix.safety.value,
            "title": finding.fix.title,
        }
    )
    return {
        "path": finding.path,
        "line": finding.line,
        "column": finding.column + 1,
        "end_line": finding.end_line,
        "end_column": finding.end_column + 1,
        "code": finding.code,
        "name": finding.name,
        "message": finding.message,
        "fix": fix,
    }


def format_findings(findings: Iterable[Finding]) -> str:
    ordered = sorted(findings, key=lambda f: f.sort_key)
    return json.dumps([finding_to_dict(f) for f in ordered], indent=2) + "\n"


def format_statistics(findings: Iterable[Finding]) -> str:
    counts = [
        {
            "code": entry.code,
            "name": entry.name,
            "count": entry.count,
            "safe_fixes": entry.safe_fixes,
            "unsafe_fixes": entry.unsafe_fixes,
        }
        for entry in count_by_code(findings)
    ]
    return json.dumps(counts, indent=2) + "\n"
