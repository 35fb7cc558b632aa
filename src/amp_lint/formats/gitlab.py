"""`gitlab`: a GitLab Code Quality report (a JSON array), which merge requests show as
widgets and diff annotations when a job uploads it as `artifacts:reports:codequality`.

A finding's `fingerprint` identifies it across commits, so GitLab can tell new findings from
fixed ones: it hashes the path, the rule, the message and the flagged code, never the line
number, so that a finding keeps its fingerprint when lines above it are added or removed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import Counter
from pathlib import Path

from amp_lint.findings import Finding
from amp_lint.formats.listing import Listing, SourceTexts

SEVERITY = "major"
# Positions inside messages ("(via train.py:12 → model.py:40)", "(line 60)") move with the
# code; the fingerprint hashes the message without them.
_POSITION = re.compile(r"(\.pyi?):\d+|\bline \d+")


def render(listing: Listing) -> str:
    seen: Counter[str] = Counter()
    issues = []
    for finding in listing.findings:
        identity = fingerprint_identity(finding, listing.sources)
        occurrence = seen[identity]
        seen[identity] += 1
        issues.append(issue(finding, fingerprint(identity, occurrence)))
    return json.dumps(issues, indent=2) + "\n"


def issue(finding: Finding, print_: str) -> dict[str, object]:
    return {
        "description": f"{finding.code} {finding.message}",
        "check_name": finding.code,
        "fingerprint": print_,
        "severity": SEVERITY,
        "location": {
            "path": report_path(finding.path),
            "lines": {"begin": finding.line, "end": max(finding.end_line, finding.line)},
        },
    }


def fingerprint_identity(finding: Finding, sources: SourceTexts) -> str:
    """What a finding is, whatever line it is on: path, rule, message and flagged code."""
    message = _POSITION.sub(lambda m: m.group(1) or "line", finding.message)
    code = _flagged_code(finding, sources)
    return "\0".join((report_path(finding.path), finding.code, message, code))


def fingerprint(identity: str, occurrence: int) -> str:
    """A hex digest; a second finding identical in all but its line gets another one."""
    return hashlib.sha256(
        f"{identity}\0{occurrence}".encode("utf-8", "surrogateescape")
    ).hexdigest()


def _flagged_code(finding: Finding, sources: SourceTexts) -> str:
    if finding.cell is not None:  # a notebook: its file's lines are not the cell's
        return ""
    last = max(finding.end_line, finding.line)
    lines = [sources.line(finding.path, number) for number in range(finding.line, last + 1)]
    return "\n".join(line.strip() for line in lines)


def report_path(path: str) -> str:
    """The path relative to the current directory (the checkout in CI), `/`-separated."""
    absolute = Path(os.path.abspath(path))
    try:
        return absolute.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return Path(path).as_posix()
