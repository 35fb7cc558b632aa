"""Markdown for the runtime evidence: the JSON reports that `amp-lint verify` writes into
docs/evidence/, one per device kind, GPU model and torch version.

The rule pages show the rows of their rule, docs/evidence/README.md lists every report and
docs/claims.md the executed claims. Reading JSON only: no torch needed to render.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CASES_SOURCE = "src/amp_lint/verify/cases"
VERIFY_COMMAND = "amp-lint verify --claims --report docs/evidence/"


@dataclass(frozen=True)
class Report:
    file: str
    environment: dict[str, str]
    cases: dict[str, dict[str, str]]
    rows: list[dict[str, Any]]
    claims: dict[str, Any]

    @property
    def torch(self) -> str:
        return self.environment.get("torch", "?")

    def hardware(self, device: str) -> str:
        if device == "cuda":
            return self.environment.get("gpu", "?")
        return self.environment.get("processor", "?")


def load_reports(directory: Path) -> list[Report]:
    reports = []
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        data = json.loads(path.read_text(encoding="utf-8"))
        reports.append(
            Report(
                file=path.name,
                environment=data["environment"],
                cases=data.get("cases", {}),
                rows=data["rows"],
                claims=data.get("claims", {}),
            )
        )
    return reports


def rule_evidence(code: str, reports: Sequence[Report], docs_prefix: str) -> str:
    """The "Runtime evidence" section of one rule page."""
    cases: dict[str, dict[str, str]] = {}
    columns = ("Case", "Device", "dtype", "torch", "Hardware", "Bad example", "Fixed example")
    lines = [
        "| " + " | ".join((*columns, "As documented")) + " |",
        "| --- " * (len(columns) + 1) + "|",
    ]
    rows = sorted(
        ((r["case"], r["device"], r["dtype"], report.torch), r, report)
        for report in reports
        for r in report.rows
        if r["rule"] == code
    )
    for (case, device, dtype, torch), row, report in rows:
        cases.setdefault(case, report.cases.get(case, {}))
        cells = [
            case,
            device,
            dtype,
            torch,
            report.hardware(device),
            _outcome(row["bad"]),
            _outcome(row["fixed"]),
            "yes" if row["ok"] else f"**no** (expected {row['expected']})",
        ]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    if not cases:
        return (
            "No runnable case yet: this rule's hazard has not been reproduced by a run. "
            f"`amp-lint verify --select {code}` runs the cases of a rule on your machine."
        )
    intro = [
        "Every row is a real run: the rule's runnable example and its fixed copy (amp-lint's "
        "own fix unless noted), under "
        "`torch.autocast(device, dtype)`, compared with the same code run in float32. "
        f"`amp-lint verify --select {code}` repeats them on your machine and torch.",
        "",
    ]
    for name, info in sorted(cases.items()):
        source = f"{docs_prefix}{CASES_SOURCE}/{info.get('file', '')}"
        fixed_by = info.get("fixed_by", "amp-lint")
        note = "" if fixed_by == "amp-lint" else f" The fixed example is fixed by {fixed_by}."
        intro.append(f"* [`{name}`]({source}): {_case_description(info)}{note}")
    return "\n".join([*intro, "", *lines])


def evidence_summary(code: str, reports: Sequence[Report]) -> str:
    """One line on a rule's runtime evidence, for the language server's hover."""
    rows = [(report, row) for report in reports for row in report.rows if row["rule"] == code]
    if not rows:
        return f"No run has reproduced this hazard yet (`amp-lint verify --select {code}`)."
    runs = sorted(
        {f"{row['device']} {row['dtype']} (torch {report.torch})" for report, row in rows}
    )
    documented = sum(1 for _, row in rows if row["ok"])
    shown = next((row for _, row in rows if row["ok"] and row["bad"]["kind"] != "clean"), None)
    shown = shown or rows[0][1]
    return (
        f"Measured: the bad example gives {_outcome(shown['bad'])}, the fixed one "
        f"{_outcome(shown['fixed'])}; {documented} of {len(rows)} case runs as documented, "
        f"on {', '.join(runs)}."
    )


def evidence_summaries(codes: Sequence[str], reports: Sequence[Report]) -> str:
    """evidence_summary of each rule, as the JSON the package installs."""
    summaries = {code: evidence_summary(code, reports) for code in codes}
    return json.dumps(summaries, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def evidence_index(reports: Sequence[Report], directory: Path) -> str:
    """docs/evidence/README.md; a report's `<name>-pytest.log` beside it (the GPU machines' run
    of the torch-only tests) is linked."""
    lines = [
        "# Runtime evidence",
        "",
        "Generated by `python -m amp_lint.pages` from the JSON reports in this folder; do not edit "
        "by hand. Each report is the output of",
        "",
        f"    {VERIFY_COMMAND}",
        "",
        "on one machine: every rule's runnable example (`src/amp_lint/verify/cases/`) and its "
        "autofixed copy, run under `torch.autocast` in float16 and bfloat16 and compared with "
        "float32. Outcomes: `raised` (exception and first line of its message), `nonfinite` (inf "
        "or NaN in an output or gradient), `wrong` (relative error against float32 above the "
        "case's tolerance, 5% unless stated), `warned` (a deprecation warning), `clean`. The "
        "CPU report is checked against a fresh run by the test suite (tests/test_runtime.py); "
        "CUDA reports come from runs on GPU machines, which also run the torch-only tests "
        "(op-table truth test, runtime suite, claims) and keep their log beside the report.",
        "",
        "| Report | Devices | Hardware | torch | Python | Date | Rows as documented |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for report in reports:
        env = report.environment
        devices = env.get("devices", env.get("device", "?"))
        hardware = ", ".join(report.hardware(d) for d in devices.split(","))
        ok = sum(1 for row in report.rows if row["ok"])
        log = report.file[: -len(".json")] + "-pytest.log"
        name = f"[{report.file}]({report.file})"
        if (directory / log).exists():
            name += f" ([pytest log]({log}))"
        cells = [
            name,
            devices,
            hardware,
            report.torch,
            env.get("python", "?"),
            env.get("date", "?"),
            f"{ok} of {len(report.rows)}",
        ]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    lines += ["", "The tables per rule are on the rule pages: [docs/rules/](../rules/)."]
    return "\n".join(lines) + "\n"


def claims_page(reports: Sequence[Report]) -> str:
    """docs/claims.md: each claim of the common AMP advice and what running it showed."""
    definitions: dict[str, dict[str, Any]] = {}
    results: dict[str, list[tuple[dict[str, Any], Report]]] = {}
    for report in reports:
        for claim in report.claims.get("definitions", []):
            definitions.setdefault(claim["key"], claim)
        for row in report.claims.get("rows", []):
            results.setdefault(row["claim"], []).append((row, report))
    lines = [
        "# Claims about mixed precision, checked by running them",
        "",
        "Generated by `python -m amp_lint.pages` from the reports in [evidence/](evidence/); do "
        "not edit by hand. Blog posts and forum answers about AMP repeat claims that are partly "
        "wrong; each claim below was turned into minimal programs "
        "(`src/amp_lint/verify/claims.py`) and run under `torch.autocast` on the devices and "
        f"torch versions shown (`{VERIFY_COMMAND}`). Outcomes are classified as in "
        "[evidence/](evidence/README.md).",
    ]
    if not definitions:
        lines += ["", "No report with claims yet."]
    for key, claim in definitions.items():
        lines += ["", f"## {claim['claim']}", ""]
        if claim.get("source"):
            lines += [f"Reference: <{claim['source']}>", ""]
        if claim.get("verdict"):
            lines += [f"**Measured:** {claim['verdict']}", ""]
        lines += ["What we ran:", ""]
        lines += [f"* `{e['name']}`: {e['ran']}" for e in claim["experiments"]]
        lines += [
            "",
            "| Experiment | Device | dtype | torch | Hardware | Outcome |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        rows = sorted(
            results.get(key, []),
            key=lambda item: (item[0]["experiment"], item[0]["device"], item[0]["dtype"]),
        )
        for row, report in rows:
            cells = [
                row["experiment"],
                row["device"],
                row["dtype"],
                report.torch,
                report.hardware(row["device"]),
                _outcome(row["outcome"]),
            ]
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def _case_description(info: dict[str, str]) -> str:
    """A case's docstring without its leading "AMP001: " and with markdown code quotes."""
    text = _cell(info.get("why") or info.get("title", ""))
    code, _, rest = text.partition(": ")
    if code.startswith("AMP") and code[3:].isdigit():
        text = rest
    return text.replace("``", "`")


def _outcome(outcome: dict[str, Any]) -> str:
    text = str(outcome["kind"])
    if outcome.get("detail"):
        text += f": {outcome['detail']}"
    error = outcome.get("error")
    if error is not None and outcome["kind"] in ("clean", "warned"):
        text += f" (error {error:.2g})"
    return text


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")
