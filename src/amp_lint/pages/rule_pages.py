"""Rule documentation rendered from the rule classes, in the layout of ruff's rule pages.

`amp-lint rule CODE` prints one page; `python -m amp_lint.pages` writes every page to
docs/rules/ together with an index, and the pages made from the runtime evidence in
docs/evidence/ (its README.md and docs/claims.md; see evidence.py). `--check` only reports what
is out of date. The committed pages are generated, never edited by hand: a test regenerates them
and expects no difference.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from amp_lint.pages.evidence import (
    Report,
    claims_page,
    evidence_index,
    evidence_summaries,
    load_reports,
    rule_evidence,
)
from amp_lint.pages.optables_page import PAGE_NAME as OPTABLES_PAGE
from amp_lint.pages.optables_page import render_page as render_optables_page
from amp_lint.rules import Rule, all_rules

DEFAULT_OUTPUT = Path(__file__).resolve().parents[3] / "docs"
RULES_DIR = "rules"
EVIDENCE_DIR = "evidence"
INDEX_NAME = f"{RULES_DIR}/README.md"
# Relative to docs/: each rule's evidence in one line, installed with the package for the
# language server's hover (docs/ is not installed).
PACKAGE_EVIDENCE = "../src/amp_lint/data/evidence.json"
_PAGE_NAME = re.compile(r"^AMP\d{3}-.+\.md$")

# Rules state their fixes' safety in `fix_safety` prose with bold **safe** / **unsafe**, and
# say "no fix" for the cases that have none; the fix availability is read from that text.
_SAFETY_MARKER = re.compile(r"\*\*(safe|unsafe)\*\*", re.IGNORECASE)
_NO_FIX = re.compile(r"\bno fix\b", re.IGNORECASE)


@dataclass(frozen=True)
class FixAvailability:
    safeties: tuple[str, ...]  # subset of ("safe", "unsafe"), in that order
    sometimes: bool  # some flagged cases have no fix

    @property
    def label(self) -> str:
        """Short form for the `amp-lint rules` table: safe, unsafe, safe/unsafe or none."""
        return "/".join(self.safeties) or "none"

    @property
    def sentence(self) -> str:
        if not self.safeties:
            return "Fix is not available."
        how_often = "sometimes" if self.sometimes else "always"
        if self.safeties == ("safe",):
            kind = "safe"
        elif self.safeties == ("unsafe",):
            kind = "unsafe: applied with `--fix --unsafe-fixes`"
        else:
            kind = "safe or unsafe depending on the case; unsafe ones need `--unsafe-fixes`"
        return f"Fix is {how_often} available ({kind})."


def fix_availability(rule: type[Rule]) -> FixAvailability:
    found = {marker.lower() for marker in _SAFETY_MARKER.findall(rule.fix_safety)}
    safeties = tuple(kind for kind in ("safe", "unsafe") if kind in found)
    return FixAvailability(safeties, sometimes=bool(_NO_FIX.search(rule.fix_safety)))


# Said on the page of every rule that reports on assumed half values (Rule.accepts_assumptions).
ASSUMED_VALUES = """\
This rule also reports on values amp-lint assumes to be half precision, and each such finding
says so in its message (`assumes ...`, `assumed to run under ...`). The output of a model or
loss amp-lint cannot resolve (a parameter, something built by a registry or a config), called
under an enabled float16/bfloat16 autocast region with tensor arguments, is assumed to be in
the region's dtype, as autocast makes the output of a model ending in a Linear, convolution
or matmul; the project's own `nn.Module`s that such a call may run (in the files around the
caller, at most 64 of them) are analysed under the caller's region, and a model cast with
`.half()` runs them with half parameters. Values named or used as losses, metrics,
tokenizers or embeddings, and under autocast norms and softmax, get no assumption. Where a
model really ends in a float32 layer (an explicit `.float()`), the assumption is wrong:
suppress the finding with `# noqa: CODE` on its line."""


def page_name(rule: type[Rule]) -> str:
    return f"{rule.code}-{rule.name}.md"


def render_rule(rule: type[Rule], reports: Sequence[Report] | None = None) -> str:
    """One rule's page as markdown; with `reports`, its runtime evidence table."""
    sections = [
        f"# {rule.name} ({rule.code})",
        fix_availability(rule).sentence,
        "## What it does",
        _prose(rule.summary),
        "## Why is this bad?",
        _prose(rule.why),
        "## Example",
        _python(rule.example),
        "## Use instead:",
        _python(rule.fixed_example),
        "## Fix safety",
        _prose(rule.fix_safety),
    ]
    if rule.known_limitations.strip():
        sections += ["## Known limitations", _prose(rule.known_limitations)]
    if rule.accepts_assumptions:
        sections += ["## Assumed values", ASSUMED_VALUES]
    if not rule.runtime_evidence:
        evidence = (
            "None: this rule reports amp-lint's own comments, not code that misbehaves when "
            "it runs, so `amp-lint verify` has nothing of it to run."
        )
    elif reports is None:
        evidence = (
            f"`amp-lint verify --select {rule.code}` runs this rule's examples under autocast on "
            "your machine; the runs on ours are in the project's docs/evidence/."
        )
    else:
        evidence = rule_evidence(rule.code, reports, docs_prefix="../../")
    sections += ["## Runtime evidence", evidence]
    return "\n\n".join(sections) + "\n"


def render_index(rules: Sequence[type[Rule]]) -> str:
    rows = [
        f"| [{rule.code}]({page_name(rule)}) | {rule.name} | {fix_availability(rule).label} "
        f"| {_table_cell(rule.summary)} |"
        for rule in rules
    ]
    header = [
        "# amp-lint rules",
        "",
        "Generated from the rule classes by `python -m amp_lint.pages`; do not edit by hand.",
        "",
        "| Code | Name | Fix | What it does |",
        "| --- | --- | --- | --- |",
    ]
    return "\n".join(header + rows) + "\n"


def render_all(rules: Sequence[type[Rule]], docs: Path = DEFAULT_OUTPUT) -> dict[str, str]:
    """Path under docs/ -> contents, for every generated page."""
    reports = load_reports(docs / EVIDENCE_DIR)
    pages = {f"{RULES_DIR}/{page_name(rule)}": render_rule(rule, reports) for rule in rules}
    pages[INDEX_NAME] = render_index(rules)
    pages[f"{EVIDENCE_DIR}/README.md"] = evidence_index(reports, docs / EVIDENCE_DIR)
    pages["claims.md"] = claims_page(reports)
    pages[OPTABLES_PAGE] = render_optables_page()
    pages[PACKAGE_EVIDENCE] = evidence_summaries(
        [rule.code for rule in rules if rule.runtime_evidence], reports
    )
    return pages


def stale_files(output: Path, pages: dict[str, str]) -> list[str]:
    """Names of pages that differ from `pages`, are missing, or belong to no rule any more."""
    stale = [
        name
        for name, text in pages.items()
        if not (output / name).is_file() or (output / name).read_bytes() != text.encode()
    ]
    stale += [name for name in _existing_pages(output) if name not in pages]
    return sorted(stale)


def write_pages(output: Path, pages: dict[str, str]) -> list[str]:
    """Write what changed and delete pages of removed rules; returns the names touched."""
    touched = stale_files(output, pages)
    for name in touched:
        if name in pages:
            (output / name).parent.mkdir(parents=True, exist_ok=True)
            (output / name).write_bytes(pages[name].encode())
        else:
            (output / name).unlink()
    return touched


def _existing_pages(output: Path) -> list[str]:
    rules = output / RULES_DIR
    if not rules.is_dir():
        return []
    return [f"{RULES_DIR}/{p.name}" for p in rules.iterdir() if _PAGE_NAME.match(p.name)]


def _prose(text: str) -> str:
    return text.strip()


def _python(code: str) -> str:
    return f"```python\n{code.strip()}\n```"


def _table_cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m amp_lint.pages",
        description="Generate docs/rules/, docs/evidence/README.md and docs/claims.md.",
    )
    parser.add_argument(
        "--output", type=Path, default=DEFAULT_OUTPUT, help="the docs folder (default: %(default)s)"
    )
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if a page is out of date"
    )
    args = parser.parse_args(argv)
    pages = render_all(all_rules(), args.output)
    if args.check:
        stale = stale_files(args.output, pages)
        for name in stale:
            print(f"{args.output / name}: out of date (run python -m amp_lint.pages)")
        return 1 if stale else 0
    for name in write_pages(args.output, pages):
        print(f"updated {args.output / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
