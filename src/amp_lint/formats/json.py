"""`json`: an array of findings for tools; `json-lines`: the same objects, one per line.

Lines and columns are 1-based, end columns exclusive. `fix.edits` are the text edits that
applying that fix alone makes, positioned as ruff's JSON positions them (`location` and
`end_location`, each `{row, column}`); `via` is the chain of calls from the autocast region,
`[{path, line}, ...]`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from amp_lint.findings import Finding, Fix, FixSafety, TextEdit
from amp_lint.formats import count_by_code, rule_url
from amp_lint.formats.listing import Listing


def finding_to_dict(finding: Finding) -> dict[str, object]:
    return {
        "path": finding.path,
        # In a notebook, the cell (1-based over all cells) that `line` counts within, as
        # ruff's `cell`; null elsewhere.
        "cell": finding.cell,
        "line": finding.line,
        "column": finding.column + 1,
        "end_line": finding.end_line,
        "end_column": finding.end_column + 1,
        "code": finding.code,
        "name": finding.name,
        "message": finding.message,
        "summary": finding.summary or finding.message,
        "fix": None if finding.fix is None else fix_to_dict(finding.fix),
        "url": rule_url(finding.code, finding.name),
        "via": [{"path": path, "line": line} for path, line in finding.via],
    }


def fix_to_dict(fix: Fix) -> dict[str, object]:
    return {
        # ruff's keys: `applicability`, `message`, `edits`.
        "applicability": applicability(fix),
        "message": fix.title,
        "edits": [edit_to_dict(edit) for edit in fix.text_edits],
        # The names amp-lint used before, kept for the tools that read them.
        "safety": fix.safety.value,
        "title": fix.title,
    }


def applicability(fix: Fix) -> str:
    return "safe" if fix.safety is FixSafety.SAFE else "unsafe"


def edit_to_dict(edit: TextEdit) -> dict[str, object]:
    edit_dict: dict[str, object] = {
        "content": edit.content,
        "location": {"row": edit.line, "column": edit.column},
        "end_location": {"row": edit.end_line, "column": edit.end_column},
    }
    if edit.cell is not None:  # in a notebook, rows count in this cell
        edit_dict["cell"] = edit.cell
    return edit_dict


def format_findings(findings: Iterable[Finding]) -> str:
    ordered = sorted(findings, key=lambda f: f.sort_key)
    return json.dumps([finding_to_dict(f) for f in ordered], indent=2) + "\n"


def render(listing: Listing) -> str:
    return format_findings(listing.findings)


def render_lines(listing: Listing) -> str:
    """`json-lines`: one compact object per line, for streaming and `jq -c`."""
    return "".join(json.dumps(finding_to_dict(f)) + "\n" for f in listing.findings)


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
