"""`github`: GitHub Actions workflow commands, which the run's log turns into annotations on
the pull request's diff:

    ::error title=amp-lint (AMP401),file=train.py,line=3,col=6,endLine=3,endColumn=31::AMP401 ...

Values are escaped as the Actions toolkit escapes them: `%`, `\\r` and `\\n` everywhere, and
`:` and `,` in the properties too.
"""

from __future__ import annotations

from amp_lint.findings import Finding
from amp_lint.formats.listing import Listing

PROGRAM = "amp-lint"


def render(listing: Listing) -> str:
    return "".join(annotation(finding) + "\n" for finding in listing.findings)


def annotation(finding: Finding) -> str:
    properties = {
        "title": f"{PROGRAM} ({finding.code})",
        "file": finding.path,
        "line": str(finding.line),
        "col": str(finding.column + 1),
        "endLine": str(max(finding.end_line, finding.line)),
        "endColumn": str(_end_column(finding)),
    }
    joined = ",".join(f"{key}={escape_property(value)}" for key, value in properties.items())
    return f"::error {joined}::{escape_data(f'{finding.code} {finding.message}')}"


def _end_column(finding: Finding) -> int:
    if finding.end_line == 0:  # no end known: the first character
        return finding.column + 2
    return finding.end_column + 1


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")
