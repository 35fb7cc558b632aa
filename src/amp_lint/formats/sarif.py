"""`sarif`: SARIF 2.1.0, the format GitHub code scanning and other static-analysis viewers
import. The rules that fired are described in `tool.driver.rules` (with their pages as
`helpUri`); each finding is a result with its region, its fix as `fixes` where the fix's text
edits are known, and the chain of calls from the autocast region as a `codeFlows` thread;
files that could not be analysed are the invocation's error notifications.

Paths under the current directory are given relative to it (`uriBaseId` `%SRCROOT%`, which
code scanning resolves against the checkout); others as absolute `file:` URIs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import quote

from amp_lint import __version__
from amp_lint.findings import Finding, Fix, TextEdit
from amp_lint.formats import REPOSITORY_URL, rule_url
from amp_lint.formats.listing import Listing

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SOURCE_ROOT = "%SRCROOT%"


def render(listing: Listing) -> str:
    codes = sorted({(f.code, f.name) for f in listing.findings})
    rule_index = {code: index for index, (code, _) in enumerate(codes)}
    run = {
        "tool": {
            "driver": {
                "name": "amp-lint",
                "version": __version__,
                "informationUri": REPOSITORY_URL,
                "rules": [_rule(code, name) for code, name in codes],
            }
        },
        "originalUriBaseIds": {SOURCE_ROOT: {"uri": Path.cwd().as_uri() + "/"}},
        "invocations": [_invocation(listing)],
        "results": [_result(finding, rule_index[finding.code]) for finding in listing.findings],
    }
    document = {"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}
    return json.dumps(document, indent=2) + "\n"


def _rule(code: str, name: str) -> dict[str, object]:
    return {
        "id": code,
        "name": name,
        "shortDescription": {"text": _summary(code) or name},
        "helpUri": rule_url(code, name),
        "properties": {"tags": ["mixed-precision"]},
    }


def _summary(code: str) -> str:
    """The rule's one-sentence summary; the rule classes load only for this format."""
    from amp_lint.rules import all_rules

    for rule in all_rules():
        if rule.code == code:
            return " ".join(rule.summary.split())
    return ""


def _invocation(listing: Listing) -> dict[str, object]:
    notifications = [
        {
            "level": "error",
            "message": {"text": message},
            "locations": [{"physicalLocation": {"artifactLocation": artifact(path)}}],
        }
        for path, message in listing.errors
    ]
    return {"executionSuccessful": not listing.errors, "toolExecutionNotifications": notifications}


def _result(finding: Finding, index: int) -> dict[str, object]:
    result: dict[str, object] = {
        "ruleId": finding.code,
        "ruleIndex": index,
        "level": "error",
        "message": {"text": finding.message},
        "locations": [_location(finding.path, region(finding))],
    }
    if finding.fix is not None and finding.fix.text_edits:
        result["fixes"] = [_fix(finding.path, finding.fix)]
    if finding.via:
        result["codeFlows"] = [_code_flow(finding)]
    return result


def region(finding: Finding) -> dict[str, int]:
    """1-based lines and columns, the end column exclusive, as SARIF counts them."""
    end_line = max(finding.end_line, finding.line)
    end_column = finding.end_column + 1 if finding.end_line else finding.column + 2
    return {
        "startLine": finding.line,
        "startColumn": finding.column + 1,
        "endLine": end_line,
        "endColumn": end_column,
    }


def _location(path: str, where: dict[str, int], text: str | None = None) -> dict[str, object]:
    location: dict[str, object] = {
        "physicalLocation": {"artifactLocation": artifact(path), "region": where}
    }
    if text is not None:
        location["message"] = {"text": text}
    return location


def _fix(path: str, fix: Fix) -> dict[str, object]:
    return {
        "description": {"text": fix.title},
        "artifactChanges": [
            {
                "artifactLocation": artifact(path),
                "replacements": [_replacement(edit) for edit in fix.text_edits],
            }
        ],
    }


def _replacement(edit: TextEdit) -> dict[str, object]:
    return {
        "deletedRegion": {
            "startLine": edit.line,
            "startColumn": edit.column,
            "endLine": edit.end_line,
            "endColumn": edit.end_column,
        },
        "insertedContent": {"text": edit.content},
    }


def _code_flow(finding: Finding) -> dict[str, object]:
    """The calls from the autocast region, then the finding itself."""
    steps = [
        {"location": _location(path, {"startLine": line}, "called under autocast")}
        for path, line in finding.via
    ]
    steps.append({"location": _location(finding.path, region(finding), finding.code)})
    return {"threadFlows": [{"locations": steps}]}


def artifact(path: str) -> dict[str, str]:
    absolute = Path(os.path.abspath(path))
    try:
        relative = absolute.relative_to(Path.cwd())
    except ValueError:
        return {"uri": absolute.as_uri()}
    return {"uri": quote(relative.as_posix(), errors="surrogateescape"), "uriBaseId": SOURCE_ROOT}
