"""Where a finding is, as every text format writes it: `path:line:column`, or
`path:cell N:line:column` in a notebook (ruff's form), the column 1-based."""

from __future__ import annotations

from amp_lint.findings import Finding


def format_position(finding: Finding) -> str:
    # Columns are stored 0-based, as flake8 plugins report them; flake8 displays them 1-based.
    cell = "" if finding.cell is None else f"cell {finding.cell}:"
    return f"{finding.path}:{cell}{finding.line}:{finding.column + 1}"
