"""Hover on a finding: what goes wrong there, the rule's summary and why, and the line of
measured evidence from the rule's runtime cases."""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import TYPE_CHECKING

from amp_lint.findings import Finding
from amp_lint.formats import rule_url

if TYPE_CHECKING:
    from amp_lint.rules import Rule


def hover_text(findings: list[Finding]) -> str:
    """Markdown for the findings under the cursor, one section each."""
    return "\n\n---\n\n".join(_section(finding) for finding in findings)


def _section(finding: Finding) -> str:
    rule = _rule(finding.code)
    parts = [f"**{finding.code}** `{finding.name}`: {finding.message}"]
    if rule is not None:
        parts.append(rule.summary)
        why = _first_paragraph(rule.why)
        if why:
            parts.append(why)
    evidence = _evidence().get(finding.code)
    if evidence:
        parts.append(f"*{evidence}*")
    parts.append(f"[{finding.code} documentation]({rule_url(finding.code, finding.name)})")
    return "\n\n".join(parts)


def _rule(code: str) -> type[Rule] | None:
    from amp_lint.rules import all_rules  # loads libcst, which the lint has loaded already

    rules = {rule.code: rule for rule in all_rules()}
    return rules.get(code)


def _first_paragraph(text: str) -> str:
    paragraph = text.strip().split("\n\n", 1)[0]
    return " ".join(paragraph.split())


@functools.lru_cache(maxsize=1)
def _evidence() -> dict[str, str]:
    """Rule code -> one line, generated with the docs (docs.PACKAGE_EVIDENCE)."""
    text = resources.files("amp_lint").joinpath("data/evidence.json").read_text("utf-8")
    loaded: dict[str, str] = json.loads(text)
    return loaded
