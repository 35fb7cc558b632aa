"""Precision of amp-lint on whole repositories, as a new user runs it (issue 41).

The corpus (benchmarks/corpus) reads findings on unpacked wheels: library code, without the
tests, scripts, examples and benchmarks that users lint too. This protocol lints whole
repositories of training code at pinned commits (manifest.toml), with no flag, from each
repository's root (`amp-lint check .`), draws a seeded, stratified sample of the findings, and
scores the hand triage recorded in triage.toml (verdict and reason per finding, keyed by a
digest of the reported line: no project code is stored).

    python benchmarks/repositories/run.py lint   --amp-lint BIN --work DIR --findings F.json
    python benchmarks/repositories/run.py sample --findings F.json > new.toml
    python benchmarks/repositories/run.py score  --findings F.json [--triage triage.toml]

`lint` writes every finding (JSON); `sample` prints [[finding]] entries to judge: up to
--per-rule findings of every rule, drawn at random (seeded), at most --per-repo of one rule
from one repository, so that one repository's hundreds of deprecations (AMP401) do not fill
the sample; findings already judged are not drawn again. `score` matches the findings against
the triage and prints precision (true or plausible over judged) overall and per rule, and
lists judged findings no longer reported (gone after an engine change).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "realworld"))
from run import (  # type: ignore[import-not-found]  # noqa: E402
    _line_text,
    _materialise,
    line_digest,
)

RIGHT = ("true", "plausible")
VERDICTS = ("true", "plausible", "false")


def main() -> int:
    args = _arguments()
    if args.command == "lint":
        return _lint(args)
    findings = json.loads(Path(args.findings).read_text(encoding="utf-8"))
    triage = _triage(Path(args.triage))
    if args.command == "sample":
        print(_sample(findings, triage, args.per_rule, args.per_repo, args.seed))
        return 0
    print(_score(findings, triage))
    return 0


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    lint = commands.add_parser("lint", help="lint every repository of the manifest")
    lint.add_argument("--manifest", default=str(HERE / "manifest.toml"))
    lint.add_argument("--mirrors", default="/work/.mirror", help="MIRRORS/<owner>+<name>/repo")
    lint.add_argument("--amp-lint", default=str(Path(sys.executable).parent / "amp-lint"))
    lint.add_argument("--work", required=True, help="scratch folder for the checkouts")
    lint.add_argument("--findings", required=True, help="write every finding here (JSON)")
    lint.add_argument("--only", nargs="*", help="only these repositories (owner/name)")
    for name in ("sample", "score"):
        command = commands.add_parser(name)
        command.add_argument("--findings", required=True)
        command.add_argument("--triage", default=str(HERE / "triage.toml"))
    sample = commands.choices["sample"]
    sample.add_argument("--per-rule", type=int, default=12, help="most drawn from one rule")
    sample.add_argument("--per-repo", type=int, default=3, help="most from one repo per rule")
    sample.add_argument("--seed", type=int, default=41)
    return parser.parse_args()


# --- lint -------------------------------------------------------------------------------


def _lint(args: argparse.Namespace) -> int:
    manifest = tomllib.loads(Path(args.manifest).read_text(encoding="utf-8"))
    found: list[dict[str, object]] = []
    for repo in manifest["repo"]:
        name, commit = str(repo["name"]), str(repo["commit"])
        if args.only and name not in args.only:
            continue
        mirror = Path(args.mirrors) / name.replace("/", "+") / "repo"
        root = Path(args.work) / name.replace("/", "+") / commit[:12]
        if not root.exists():
            _materialise(mirror, commit, ["."], root)
        started = time.perf_counter()
        result = subprocess.run(
            [args.amp_lint, "check", "--no-cache", "--exit-zero", "--output-format", "json", "."],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=3600,
        )
        items = json.loads(result.stdout or "[]")
        for item in items:
            path, line = str(item["path"]), int(item["line"])
            text = _line_text(root / path, line)
            found.append(
                {
                    "repo": name,
                    "commit": commit,
                    "path": path,
                    "line": line,
                    "code": str(item["code"]),
                    "line_sha1": line_digest(text),
                    "message": str(item["message"]),
                }
            )
        seconds = time.perf_counter() - started
        print(f"{name}@{commit[:10]}: {len(items)} findings ({seconds:.1f} s)", file=sys.stderr)
    Path(args.findings).write_text(json.dumps(found, indent=1) + "\n", encoding="utf-8")
    return 0


# --- sample and score -------------------------------------------------------------------


def _key(item: dict[str, object]) -> tuple[str, str, str, str]:
    return (str(item["repo"]), str(item["path"]), str(item["code"]), str(item["line_sha1"]))


def _triage(path: Path) -> dict[tuple[str, str, str, str], dict[str, object]]:
    if not path.exists():
        return {}
    entries = tomllib.loads(path.read_text(encoding="utf-8")).get("finding", [])
    for entry in entries:
        if entry.get("verdict") not in VERDICTS:
            raise SystemExit(f"{path}: {entry.get('path')}: verdict must be one of {VERDICTS}")
    return {_key(entry): entry for entry in entries}


def _sample(
    findings: list[dict[str, object]],
    triage: dict[tuple[str, str, str, str], dict[str, object]],
    per_rule: int,
    per_repo: int,
    seed: int,
) -> str:
    """Unjudged findings, drawn per rule: at most `per_rule` of each, at most `per_repo` of
    one rule from one repository."""
    rng = random.Random(seed)
    unique = {_key(f): f for f in findings if _key(f) not in triage}
    by_rule: dict[str, list[dict[str, object]]] = defaultdict(list)
    for item in sorted(unique.values(), key=lambda f: (str(f["repo"]), str(f["path"]))):
        by_rule[str(item["code"])].append(item)
    chosen: list[dict[str, object]] = []
    for rule in sorted(by_rule):
        items = by_rule[rule]
        rng.shuffle(items)
        taken: Counter[str] = Counter()
        for item in items:
            if sum(taken.values()) >= per_rule:
                break
            if taken[str(item["repo"])] < per_repo:
                taken[str(item["repo"])] += 1
                chosen.append(item)
    total = len(unique)
    lines = [f"# {len(chosen)} findings drawn (seed {seed}) from {total} not yet judged\n"]
    for item in chosen:
        lines.append(
            "[[finding]]\n"
            f"repo = {json.dumps(item['repo'])}\n"
            f"commit = {json.dumps(item['commit'])}\n"
            f"path = {json.dumps(item['path'])}\n"
            f"line = {item['line']}\n"
            f"code = {json.dumps(item['code'])}\n"
            f"line_sha1 = {json.dumps(item['line_sha1'])}\n"
            'verdict = ""\n'
            'reason = ""\n'
        )
    return "\n".join(lines)


def _score(
    findings: list[dict[str, object]],
    triage: dict[tuple[str, str, str, str], dict[str, object]],
) -> str:
    reported = {_key(f) for f in findings}
    judged = [entry for key, entry in triage.items() if key in reported]
    gone = [entry for key, entry in triage.items() if key not in reported]
    per_rule: dict[str, Counter[str]] = defaultdict(Counter)
    repos: set[str] = set()
    for entry in judged:
        per_rule[str(entry["code"])][str(entry["verdict"])] += 1
        repos.add(str(entry["repo"]))
    right = sum(c[v] for c in per_rule.values() for v in RIGHT)
    lines = [
        f"findings reported: {len(reported)} (unique), judged: {len(judged)} "
        f"from {len(repos)} repositories",
        f"precision (true or plausible / judged): {right}/{len(judged)} = "
        f"{right / max(len(judged), 1):.2f}",
        "",
        "| rule | judged | true | plausible | false | precision |",
        "|---|---|---|---|---|---|",
    ]
    for rule in sorted(per_rule):
        counts = per_rule[rule]
        n = sum(counts.values())
        ok = counts["true"] + counts["plausible"]
        lines.append(
            f"| {rule} | {n} | {counts['true']} | {counts['plausible']} | {counts['false']} "
            f"| {ok / n:.2f} |"
        )
    if gone:
        lines += ["", f"judged but no longer reported: {len(gone)}"]
        lines += [
            f"- {e['repo']} {e['path']}:{e['line']} {e['code']} ({e['verdict']})" for e in gone
        ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
