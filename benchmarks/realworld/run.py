"""Recall and precision of amp-lint on real AMP bugs (benchmarks/realworld/manifest.toml).

For every repository of the manifest, the Python files of its `scope` are taken from a git
mirror at each commit the manifest names (the commit before a fix, and the fix), written to
a scratch folder (blobs missing from the mirror are skipped and counted), and linted there as
one project with the real `amp-lint check` (library mode where the manifest says so).

* A case is found when a finding of its rule is within `--tolerance` lines of its `line` in
  its `path` at `commit`. Cases whose code is "uncovered" are listed but left out of recall.
* The same rule reported near `fixed_line` at `fixed` is a false positive: the fix is flagged.
* Every other finding must be judged in the manifest's [[triage]] table (true, plausible or
  false), matched by repository, path, code and a digest of the reported line (`line_sha1`).
  Precision counts found cases and true/plausible triage as right, flagged fixes and false
  triage as wrong; findings not yet triaged are listed, and precision says how many there are.

Mirrors are bare git repositories at MIRRORS/<owner>+<name>/repo, as the project's `fetch`
tool leaves them (any full clone works: `git clone --mirror URL MIRRORS/owner+name/repo`).

    python benchmarks/realworld/run.py --mirrors /work/.mirror --output docs/accuracy-run.md
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

HERE = Path(__file__).resolve().parent
# One step of a finding's call chain, as amp-lint prints it: "via train.py:12 → m/a.py:40".
_CHAIN_STEP = re.compile(r"(?:via |→ )([^\s:()]+\.py):(\d+)")
VERDICTS = ("true", "plausible", "false")


@dataclass(frozen=True)
class Finding:
    repo: str
    commit: str
    path: str
    line: int
    code: str
    message: str
    text: str  # the stripped source line reported

    @property
    def triage_key(self) -> tuple[str, str, str, str]:
        return (self.repo, self.path, self.code, line_digest(self.text))


def line_digest(text: str) -> str:
    """The [[triage]] key for a reported line: a digest of its whitespace-normalised text,
    so that the manifest stores no line of the projects' code."""
    return hashlib.sha1(" ".join(text.split()).encode("utf-8")).hexdigest()[:16]


@dataclass
class Snapshot:
    repo: str
    commit: str
    findings: list[Finding] = field(default_factory=list)
    files: int = 0
    missing_blobs: int = 0
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0


def main() -> int:
    args = _arguments()
    manifest = tomllib.loads(Path(args.manifest).read_text(encoding="utf-8"))
    repos = {repo["name"]: repo for repo in manifest["repo"]}
    cases = manifest["case"]
    if args.only:
        cases = [c for c in cases if c["repo"] in args.only]
    wanted: dict[tuple[str, str], None] = {}
    for case in cases:
        wanted[(case["repo"], case["commit"])] = None
        wanted[(case["repo"], case["fixed"])] = None
    work = Path(args.work or tempfile.mkdtemp(prefix="amp-lint-realworld-"))
    snapshots: dict[tuple[str, str], Snapshot] = {}
    for repo, commit in wanted:
        snapshot = _lint_snapshot(repos[repo], commit, Path(args.mirrors), work, args.amp_lint)
        snapshots[(repo, commit)] = snapshot
        status = f"{len(snapshot.findings)} findings, {snapshot.files} files"
        if snapshot.errors:
            status += f", {len(snapshot.errors)} errors"
        print(f"{repo}@{commit[:10]}: {status} ({snapshot.seconds:.1f} s)", file=sys.stderr)
    report = _evaluate(cases, snapshots, manifest.get("triage", []), args.tolerance)
    text = _markdown(report, snapshots, args)
    print(text)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    if args.findings:
        _write_findings(Path(args.findings), [f for s in snapshots.values() for f in s.findings])
    if args.untriaged:
        _write_findings(Path(args.untriaged), report.untriaged)
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifest", default=str(HERE / "manifest.toml"))
    parser.add_argument("--mirrors", default="/work/.mirror", help="MIRRORS/<owner>+<name>/repo")
    default_binary = Path(sys.executable).parent / "amp-lint"
    parser.add_argument("--amp-lint", default=str(default_binary), help="the command to run")
    parser.add_argument("--work", help="scratch folder for the snapshots (kept when given)")
    parser.add_argument("--tolerance", type=int, default=3, help="lines around a case's line")
    parser.add_argument("--only", nargs="*", help="only these repositories (owner/name)")
    parser.add_argument("--output", help="also write the report (markdown) here")
    parser.add_argument("--findings", help="write every finding here (JSON), for diffs")
    parser.add_argument("--untriaged", help="write the findings still to triage here (JSON)")
    return parser.parse_args()


# --- snapshots --------------------------------------------------------------------------


def _lint_snapshot(
    repo: dict[str, object], commit: str, mirrors: Path, work: Path, amp_lint: str
) -> Snapshot:
    name = str(repo["name"])
    snapshot = Snapshot(name, commit)
    mirror = mirrors / name.replace("/", "+") / "repo"
    if not mirror.is_dir():
        snapshot.errors.append(f"no mirror at {mirror}")
        return snapshot
    root = work / name.replace("/", "+") / commit[:12]
    scope = [str(s) for s in repo.get("scope", ["."])]  # type: ignore[union-attr]
    if not root.exists():
        snapshot.missing_blobs = _materialise(mirror, commit, scope, root)
    present = [s for s in scope if (root / s).exists()]
    snapshot.files = sum(1 for _ in root.rglob("*.py")) if root.exists() else 0
    if not present:
        snapshot.errors.append("nothing of the scope exists at this commit")
        return snapshot
    command = [amp_lint, "check", "--no-cache", "--exit-zero", "--format", "json"]
    if repo.get("library"):
        command += ["--assume-autocast", str(repo.get("library_dtype", "float16"))]
    started = time.perf_counter()
    result = subprocess.run(
        [*command, *present], cwd=root, capture_output=True, text=True, timeout=3600
    )
    snapshot.seconds = time.perf_counter() - started
    snapshot.errors += [line for line in result.stderr.splitlines() if "error" in line]
    try:
        found = json.loads(result.stdout or "[]")
    except json.JSONDecodeError:
        snapshot.errors.append(f"amp-lint printed no JSON (exit {result.returncode})")
        return snapshot
    for item in found:
        path = str(item["path"])
        snapshot.findings.append(
            Finding(
                name,
                commit,
                path,
                int(item["line"]),
                str(item["code"]),
                str(item["message"]),
                _line_text(root / path, int(item["line"])),
            )
        )
    return snapshot


def _materialise(mirror: Path, commit: str, scope: list[str], root: Path) -> int:
    """Write the scope's .py files at `commit` under `root`; the number of blobs missing."""
    listed = subprocess.run(
        ["git", "-C", str(mirror), "ls-tree", "-r", "--name-only", commit, "--", *scope],
        capture_output=True,
        text=True,
        check=False,
    )
    paths = [p for p in listed.stdout.splitlines() if p.endswith((".py", ".pyi"))]
    root.mkdir(parents=True, exist_ok=True)
    if not paths:
        return 0
    batch = subprocess.run(
        ["git", "-C", str(mirror), "cat-file", "--batch"],
        input="".join(f"{commit}:{p}\n" for p in paths).encode(),
        capture_output=True,
        check=False,
    )
    data, position, missing = batch.stdout, 0, 0
    for path in paths:
        end = data.index(b"\n", position)
        header = data[position:end].split()
        position = end + 1
        if len(header) < 3 or header[1] != b"blob":
            missing += 1
            continue
        size = int(header[2])
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data[position : position + size])
        position += size + 1
    return missing


def _line_text(path: Path, line: int) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return " ".join(lines[line - 1].split())[:120] if 0 < line <= len(lines) else ""


# --- scoring ----------------------------------------------------------------------------


@dataclass
class Report:
    found: list[dict[str, object]] = field(default_factory=list)
    missed: list[dict[str, object]] = field(default_factory=list)
    uncovered: list[dict[str, object]] = field(default_factory=list)
    fix_flagged: list[tuple[dict[str, object], Finding]] = field(default_factory=list)
    triaged: dict[str, list[Finding]] = field(default_factory=lambda: defaultdict(list))
    untriaged: list[Finding] = field(default_factory=list)


def _near(finding: Finding, path: str, line: int, code: str, tolerance: int) -> bool:
    """The finding is at the case, or is reached from it: a helper's finding whose chain
    (`via a.py:12 → b.py:40`) names a call within `tolerance` lines of the case."""
    if finding.code != code:
        return False
    if finding.path == path and abs(finding.line - line) <= tolerance:
        return True
    for step in _CHAIN_STEP.finditer(finding.message):
        if step.group(1) == path and abs(int(step.group(2)) - line) <= tolerance:
            return True
    return False


def _evaluate(
    cases: list[dict[str, object]],
    snapshots: dict[tuple[str, str], Snapshot],
    triage: list[dict[str, object]],
    tolerance: int,
) -> Report:
    report = Report()
    explained: set[tuple[str, str, str, str]] = set()
    verdicts = {
        (str(t["repo"]), str(t["path"]), str(t["code"]), str(t["line_sha1"])): str(t["verdict"])
        for t in triage
    }
    for case in cases:
        repo, code = str(case["repo"]), str(case["code"])
        if code == "uncovered":
            report.uncovered.append(case)
            continue
        before = snapshots[(repo, str(case["commit"]))].findings
        line = int(case["line"])  # type: ignore[call-overload]
        hits = [f for f in before if _near(f, str(case["path"]), line, code, tolerance)]
        (report.found if hits else report.missed).append(case)
        explained.update(f.triage_key for f in hits)
        after = snapshots[(repo, str(case["fixed"]))].findings
        fixed_path = str(case.get("fixed_path", case["path"]))
        fixed_line = int(case.get("fixed_line", case["line"]))  # type: ignore[call-overload]
        for finding in after:
            if not _near(finding, fixed_path, fixed_line, code, tolerance):
                continue
            # A fix that left another bug of the series (mmcv cast one kernel argument at a
            # time) is judged like any other finding, by the triage table.
            if finding.triage_key not in verdicts:
                report.fix_flagged.append((case, finding))
                explained.add(finding.triage_key)
    seen: set[tuple[str, str, str, str]] = set()
    for snapshot in snapshots.values():
        for finding in snapshot.findings:
            key = finding.triage_key
            if key in explained or key in seen:
                continue
            seen.add(key)
            verdict = verdicts.get(key)
            if verdict in VERDICTS:
                report.triaged[verdict].append(finding)
            else:
                report.untriaged.append(finding)
    return report


def _ratio(numerator: int, denominator: int) -> str:
    return f"{numerator / denominator:.2f}" if denominator else "n/a"


def _markdown(
    report: Report, snapshots: dict[tuple[str, str], Snapshot], args: argparse.Namespace
) -> str:
    lines = ["## Recall", "", "| rule | cases | found | recall |", "|---|---|---|---|"]
    by_rule: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for case in report.found:
        by_rule[str(case["code"])][0] += 1
        by_rule[str(case["code"])][1] += 1
    for case in report.missed:
        by_rule[str(case["code"])][1] += 1
    for code in sorted(by_rule):
        hit, total = by_rule[code]
        lines.append(f"| {code} | {total} | {hit} | {_ratio(hit, total)} |")
    found, total = len(report.found), len(report.found) + len(report.missed)
    lines.append(f"| **all rules** | {total} | {found} | **{_ratio(found, total)}** |")
    cross_found = sum(1 for c in report.found if c.get("cross_function"))
    cross_total = cross_found + sum(1 for c in report.missed if c.get("cross_function"))
    lines.append(
        f"| cross-function rows | {cross_total} | {cross_found} | "
        f"**{_ratio(cross_found, cross_total)}** |"
    )
    right = len(report.found) + len(report.triaged["true"]) + len(report.triaged["plausible"])
    wrong = len(report.fix_flagged) + len(report.triaged["false"])
    lines += [
        "",
        "## Precision",
        "",
        "| | findings |",
        "|---|---|",
        f"| cases found | {len(report.found)} |",
        f"| other findings triaged true | {len(report.triaged['true'])} |",
        f"| other findings triaged plausible | {len(report.triaged['plausible'])} |",
        f"| fixed code still flagged | {len(report.fix_flagged)} |",
        f"| other findings triaged false | {len(report.triaged['false'])} |",
        f"| not triaged yet | {len(report.untriaged)} |",
        f"| **precision** (right / judged) | **{_ratio(right, right + wrong)}** |",
        "",
        f"{len(report.uncovered)} cases are marked uncovered (no rule's scope) and not counted.",
        "",
        "## Missed cases",
        "",
    ]
    for case in report.missed:
        cross = " (cross-function)" if case.get("cross_function") else ""
        lines.append(
            f"- {case['code']} {case['repo']} {case['path']}:{case['line']}{cross}: "
            f"{case['description']}"
        )
    if report.fix_flagged:
        lines += ["", "## Fixed code still flagged", ""]
        for case, finding in report.fix_flagged:
            lines.append(f"- {case['repo']} {finding.path}:{finding.line} {finding.message}")
    for title, findings in (
        ("Triaged false", report.triaged["false"]),
        ("Not triaged yet", report.untriaged),
    ):
        if findings:
            lines += ["", f"## {title}", ""]
            for finding in findings:
                lines.append(
                    f"- {finding.repo} {finding.path}:{finding.line} {finding.code} "
                    f"`{finding.text}` — {finding.message}"
                )
    lines += ["", "## Snapshots", "", "| repository | commit | files | findings | s | notes |"]
    lines.append("|---|---|---|---|---|---|")
    for snapshot in snapshots.values():
        notes = "; ".join(snapshot.errors[:2])
        if snapshot.missing_blobs:
            notes = f"{snapshot.missing_blobs} blobs missing; " + notes
        lines.append(
            f"| {snapshot.repo} | {snapshot.commit[:10]} | {snapshot.files} | "
            f"{len(snapshot.findings)} | {snapshot.seconds:.1f} | {notes} |"
        )
    return "\n".join(lines) + "\n"


def _write_findings(path: Path, findings: list[Finding]) -> None:
    rows = [
        {
            "repo": f.repo,
            "commit": f.commit,
            "path": f.path,
            "line": f.line,
            "code": f.code,
            "message": f.message,
            "text": f.text,
        }
        for f in findings
    ]
    path.write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
