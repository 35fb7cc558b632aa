"""`junit`: JUnit XML, which CI systems (GitLab, Jenkins, Azure) show as test results: one
test suite per file with findings, one failed test case per finding, and an error test case
per file that could not be analysed. A run with nothing to report is one passing case, as
ruff writes it, so that the report is never empty."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable
from itertools import groupby
from pathlib import PurePath

from amp_lint.findings import Finding
from amp_lint.formats.listing import Listing

PROGRAM = "amp-lint"


def render(listing: Listing) -> str:
    root = ET.Element("testsuites", name=PROGRAM)
    for path, findings in groupby(listing.findings, key=lambda f: f.path):
        _suite(root, path, list(findings))
    for path, message in listing.errors:
        suite = _new_suite(root, path, tests=1, failures=0, errors=1)
        case = ET.SubElement(suite, "testcase", name=f"{PROGRAM}.error", classname=_class(path))
        ET.SubElement(case, "error", message=message).text = message
    if not listing.findings and not listing.errors:
        suite = _new_suite(root, PROGRAM, tests=1, failures=0, errors=0)
        ET.SubElement(suite, "testcase", name="No findings", classname=PROGRAM)
    _count(root, listing.findings, len(listing.errors))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"


def _suite(root: ET.Element, path: str, findings: list[Finding]) -> None:
    suite = _new_suite(root, path, tests=len(findings), failures=len(findings), errors=0)
    for finding in findings:
        case = ET.SubElement(
            suite,
            "testcase",
            name=f"{PROGRAM}.{finding.code}",
            classname=_class(path),
            file=path,
            line=str(finding.line),
            column=str(finding.column + 1),
        )
        failure = ET.SubElement(case, "failure", message=finding.message, type=finding.code)
        failure.text = f"line {finding.line}, col {finding.column + 1}, {finding.message}"


def _new_suite(
    root: ET.Element, name: str, *, tests: int, failures: int, errors: int
) -> ET.Element:
    return ET.SubElement(
        root,
        "testsuite",
        name=name,
        tests=str(tests),
        failures=str(failures),
        errors=str(errors),
    )


def _count(root: ET.Element, findings: Iterable[Finding], errors: int) -> None:
    total = len(list(findings))
    root.set("tests", str(max(total + errors, 1)))
    root.set("failures", str(total))
    root.set("errors", str(errors))


def _class(path: str) -> str:
    """`pkg/train.py` -> `pkg/train`, the class name ruff gives a file's cases."""
    return PurePath(path).with_suffix("").as_posix()
