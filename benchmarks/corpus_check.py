"""Reliability check of amp-lint on a tree of real code (issue 13).

For each package folder of the corpus (each immediate subfolder holding .py files; loose files at
the top form one more group), in default mode and in library mode:

1. lint: `amp-lint check --no-cache --format json --exit-zero PKG`: findings, files with findings,
   and every stderr line sorted by kind (internal error, traceback, file that cannot be parsed or
   decoded, file too large or too deep to analyse, anything else);
2. fix: on a copy of the package, `amp-lint check --fix --unsafe-fixes`: the files it changed, and
   which of them Python no longer compiles although the original compiled;
3. fix again: a second `--fix --unsafe-fixes` on the fixed copy must change no byte.

Every amp-lint run is a subprocess in its own process group with a timeout, started from an empty
folder (no configuration file applies) with the cache off. Prints a Markdown summary; `--json`
writes every count and problem line. Exits 1 when a problem was found (internal error, traceback,
crash, timeout, fix error, unparsable or non-idempotent fix), 0 when none, 2 on a usage error.
Standard library only.

    .venv/bin/python benchmarks/corpus_check.py /work/corpus --modes default,library \\
        --json corpus-check.json --output corpus-check.md --keep-failures /tmp/corpus-failures
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

DEFAULT_CORPUS = Path("/work/corpus")
MODES = {"default": [], "library": ["--assume-autocast", "float16"]}
SUFFIXES = (".py", ".pyi")
PREFIX = "amp-lint: "
# A stderr line's kind; the first pattern that matches wins.
LINE_KINDS = [
    ("internal error", re.compile(r"internal error")),
    ("fix error", re.compile(r"fix produced")),
    ("cannot parse", re.compile(r": cannot parse\b")),
    ("cannot decode", re.compile(r": cannot decode\b")),
    ("too deep", re.compile(r"too deeply nested|nested too deeply|too deep")),
    ("too large", re.compile(r"not analysed|too large")),
    ("cannot read", re.compile(r": cannot (read|write)\b")),
]
PROBLEM_KINDS = ("internal error", "fix error", "other error")


@dataclass
class Step:
    """One amp-lint run."""

    seconds: float = 0.0
    returncode: int | None = None  # None: timed out
    lines: dict[str, list[str]] = field(default_factory=dict)  # stderr lines by kind
    traceback: str = ""  # the last lines of a traceback on stderr, if any


@dataclass
class PackageResult:
    package: str
    mode: str
    files: int = 0
    findings: int = 0
    files_with_findings: int = 0
    fixed_files: int = 0
    unparsable_fixes: list[str] = field(default_factory=list)
    non_idempotent_fixes: list[str] = field(default_factory=list)
    steps: dict[str, Step] = field(default_factory=dict)  # lint, fix, refix
    notes: list[str] = field(default_factory=list)  # a step that printed no JSON, etc.

    def count(self, kind: str) -> int:
        return sum(len(step.lines.get(kind, [])) for step in self.steps.values())

    def lint_count(self, kind: str) -> int:
        step = self.steps.get("lint")
        return len(step.lines.get(kind, [])) if step else 0

    @property
    def tracebacks(self) -> int:
        return sum(1 for step in self.steps.values() if step.traceback)

    @property
    def crashes(self) -> int:
        """Runs killed by a signal, stopped by the timeout, or with an exit status above 2."""
        return sum(
            1
            for step in self.steps.values()
            if step.returncode is None or step.returncode < 0 or step.returncode > 2
        )

    @property
    def seconds(self) -> float:
        return sum(step.seconds for step in self.steps.values())

    def problems(self) -> int:
        return (
            sum(self.count(kind) for kind in PROBLEM_KINDS)
            + self.tracebacks
            + self.crashes
            + len(self.unparsable_fixes)
            + len(self.non_idempotent_fixes)
            + len(self.notes)
        )


# Running amp-lint


def run(
    argv: Sequence[str], cwd: Path, timeout: float, env: dict[str, str]
) -> tuple[int | None, str, str, float]:
    """(exit status or None on timeout, stdout, stderr, seconds); the whole process group
    is killed on timeout so that no worker outlives it."""
    started = time.monotonic()
    process = subprocess.Popen(
        list(argv),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="backslashreplace",
        start_new_session=True,
        env=env,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
        returncode: int | None = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        returncode = None
    return returncode, stdout, stderr, time.monotonic() - started


def classify(stderr: str) -> tuple[dict[str, list[str]], str]:
    """stderr lines by kind, and the tail of a traceback if there is one."""
    lines: dict[str, list[str]] = {}
    traceback = ""
    if "Traceback (most recent call last)" in stderr:
        traceback = "\n".join(stderr.strip().splitlines()[-6:])
    for line in stderr.splitlines():
        if not line.startswith(PREFIX):
            continue  # a traceback's lines, counted once above
        kind = next((k for k, pattern in LINE_KINDS if pattern.search(line)), None)
        if kind is None:
            kind = "other error" if line.startswith(PREFIX + "error:") else "other warning"
        lines.setdefault(kind, []).append(line)
    return lines, traceback


def step(
    binary: str, args: Sequence[str], cwd: Path, timeout: float, env: dict[str, str]
) -> tuple[Step, str]:
    returncode, stdout, stderr, seconds = run([binary, *args], cwd, timeout, env)
    lines, traceback = classify(stderr)
    if returncode is not None and returncode < 0 and not traceback:
        traceback = f"killed by signal {-returncode}"
    return Step(seconds, returncode, lines, traceback), stdout


# Files


def python_files(root: Path) -> Iterator[Path]:
    for parent, dir_names, file_names in os.walk(root):
        dir_names.sort()
        for name in sorted(file_names):
            if name.endswith(SUFFIXES):
                yield Path(parent, name)


def packages(corpus: Path, wanted: Sequence[str]) -> list[tuple[str, list[Path]]]:
    """(name, paths to lint) per package: each subfolder with Python files, and the loose
    files at the top as one more group named "."."""
    groups = []
    loose = sorted(p for p in corpus.iterdir() if p.is_file() and p.name.endswith(SUFFIXES))
    if loose and (not wanted or "." in wanted):
        groups.append((".", loose))
    for folder in sorted(p for p in corpus.iterdir() if p.is_dir()):
        if wanted and folder.name not in wanted:
            continue
        if next(python_files(folder), None) is not None:
            groups.append((folder.name, [folder]))
    return groups


def snapshot(paths: Sequence[Path]) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for path in paths:
        for file in [path] if path.is_file() else python_files(path):
            try:
                files[str(file)] = file.read_bytes()
            except OSError:
                continue
    return files


def compiles(source: bytes, name: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(source, name, "exec", dont_inherit=True)
    except Exception:
        return False
    return True


def copy_group(paths: Sequence[Path], destination: Path) -> list[Path]:
    destination.mkdir(parents=True)
    copies = []
    for path in paths:
        target = destination / path.name
        if path.is_dir():
            shutil.copytree(path, target, symlinks=True)
        else:
            shutil.copy2(path, target)
        copies.append(target)
    return copies


# One package in one mode


def check_package(
    name: str,
    paths: Sequence[Path],
    mode: str,
    options: argparse.Namespace,
    scratch: Path,
    env: dict[str, str],
) -> PackageResult:
    result = PackageResult(name, mode)
    mode_args = MODES[mode]
    originals = snapshot(paths)
    result.files = len(originals)
    lint_args = ["check", "--no-cache", "--exit-zero", "--format", "json", *mode_args]
    result.steps["lint"], stdout = step(
        options.amp_lint, [*lint_args, *map(str, paths)], scratch, options.timeout, env
    )
    try:
        findings = json.loads(stdout)
        result.findings = len(findings)
        result.files_with_findings = len({finding["path"] for finding in findings})
    except (ValueError, TypeError, KeyError):
        result.notes.append(f"lint printed no JSON findings ({len(stdout)} characters)")
    if options.no_fix:
        return result

    copy_root = scratch / "copy"
    copies = copy_group(paths, copy_root)
    try:
        fix_args = ["check", "--no-cache", "--exit-zero", "-q", "--fix", "--unsafe-fixes"]
        fix_args += [*mode_args, *map(str, copies)]
        result.steps["fix"], _ = step(options.amp_lint, fix_args, scratch, options.timeout, env)
        fixed = snapshot(copies)
        for copy_path, data in fixed.items():
            original_path = str(Path(paths[0]).parent / Path(copy_path).relative_to(copy_root))
            original = originals.get(original_path)
            if original is None or data == original:
                continue
            result.fixed_files += 1
            if compiles(original, original_path) and not compiles(data, copy_path):
                result.unparsable_fixes.append(original_path)
                keep(options, "unparsable", mode, original_path, original, data)
        result.steps["refix"], _ = step(options.amp_lint, fix_args, scratch, options.timeout, env)
        for copy_path, data in snapshot(copies).items():
            if data != fixed.get(copy_path):
                original_path = str(Path(paths[0]).parent / Path(copy_path).relative_to(copy_root))
                result.non_idempotent_fixes.append(original_path)
                keep(options, "non-idempotent", mode, original_path, fixed[copy_path], data)
    finally:
        shutil.rmtree(copy_root, ignore_errors=True)
    return result


def keep(
    options: argparse.Namespace, what: str, mode: str, path: str, before: bytes, after: bytes
) -> None:
    """With --keep-failures: the file before and after the fix that went wrong."""
    if options.keep_failures is None:
        return
    folder = options.keep_failures / f"{what}-{mode}"
    folder.mkdir(parents=True, exist_ok=True)
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", path.strip("/"))
    (folder / f"{stem}.before.py").write_bytes(before)
    (folder / f"{stem}.after.py").write_bytes(after)


# Report


COLUMNS = [
    ("packages", None),
    ("files", "files"),
    ("files with findings", "files_with_findings"),
    ("findings", "findings"),
    ("fixed files", "fixed_files"),
    ("internal errors", "internal error"),
    ("tracebacks", "tracebacks"),
    ("crashes, timeouts", "crashes"),
    ("cannot parse", "cannot parse"),
    ("cannot decode", "cannot decode"),
    ("too large / deep", "too large/deep"),
    ("fix errors", "fix error"),
    ("unparsable fixes", "unparsable_fixes"),
    ("non-idempotent fixes", "non_idempotent_fixes"),
    ("time (s)", "seconds"),
]


def value(result: PackageResult, key: str) -> float:
    if key in ("files", "files_with_findings", "findings", "fixed_files"):
        number: float = getattr(result, key)
        return number
    if key in ("unparsable_fixes", "non_idempotent_fixes"):
        return len(getattr(result, key))
    if key in ("tracebacks", "crashes", "seconds"):
        number = getattr(result, key)
        return number
    if key in ("cannot parse", "cannot decode"):
        return result.lint_count(key)
    if key == "too large/deep":
        return result.lint_count("too large") + result.lint_count("too deep")
    return result.count(key)


def cell(number: float, key: str | None) -> str:
    return f"{number:,.1f}" if key == "seconds" else f"{int(number):,}"


def markdown(results: list[PackageResult], header: list[str]) -> str:
    out = ["# amp-lint corpus check", "", *header, ""]
    modes = list(dict.fromkeys(r.mode for r in results))
    out += ["| mode | " + " | ".join(title for title, _ in COLUMNS) + " |"]
    out += ["|---" * (len(COLUMNS) + 1) + "|"]
    for mode in modes:
        rows = [r for r in results if r.mode == mode]
        cells = [
            str(len(rows)) if key is None else cell(sum(value(r, key) for r in rows), key)
            for _, key in COLUMNS
        ]
        out.append(f"| {mode} | " + " | ".join(cells) + " |")
    out += [
        "",
        "Per-file errors (cannot parse, cannot decode, too large or deep) are from the lint run; "
        "internal errors and fix errors are counted over the lint and both fix runs.",
    ]
    for mode in modes:
        out += ["", f"## {mode} mode", ""]
        out += ["| package | " + " | ".join(title for title, _ in COLUMNS[1:]) + " |"]
        out += ["|---" * len(COLUMNS) + "|"]
        for r in (r for r in results if r.mode == mode):
            cells = [cell(value(r, key), key) for _, key in COLUMNS[1:] if key is not None]
            out.append(f"| {r.package} | " + " | ".join(cells) + " |")
    problems = problem_lines(results)
    out += ["", "## Problems", ""]
    out += problems or ["None."]
    return "\n".join(out) + "\n"


def problem_lines(results: list[PackageResult], limit: int = 40) -> list[str]:
    lines: list[str] = []
    for r in results:
        where = f"{r.mode} {r.package}"
        for name, s in r.steps.items():
            if s.returncode is None:
                lines.append(f"- {where}, {name}: timed out")
            elif s.returncode < 0 or s.returncode > 2:
                lines.append(f"- {where}, {name}: exit status {s.returncode}")
            if s.traceback:
                last = s.traceback.strip().splitlines()[-1]
                lines.append(f"- {where}, {name}: traceback: `{last}`")
            for kind in PROBLEM_KINDS:
                for line in s.lines.get(kind, [])[:limit]:
                    lines.append(f"- {where}, {name}: `{line}`")
        lines += [f"- {where}: fixed file does not compile: `{p}`" for p in r.unparsable_fixes]
        lines += [f"- {where}: second fix changed `{p}`" for p in r.non_idempotent_fixes]
        lines += [f"- {where}: {note}" for note in r.notes]
    return lines


def source_description(binary: str, env: dict[str, str]) -> str:
    """Which amp-lint ran: its version and where its package is, with the git commit."""
    version = subprocess.run(
        [binary, "--version"], capture_output=True, text=True, env=env, check=False
    ).stdout.strip()
    interpreter = Path(binary).read_text(errors="replace").splitlines()[0].removeprefix("#!")
    located = subprocess.run(
        [
            interpreter.strip(),
            "-c",
            "import amp_lint, os; print(os.path.dirname(amp_lint.__file__))",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    ).stdout.strip()
    commit = subprocess.run(
        ["git", "-C", located or ".", "describe", "--always", "--dirty", "--exclude", "*"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return f"{version or binary}, package at `{located}`" + (f", commit {commit}" if commit else "")


def default_binary() -> str:
    beside = Path(sys.executable).parent / "amp-lint"
    return str(beside) if beside.exists() else (shutil.which("amp-lint") or "amp-lint")


def totals(results: list[PackageResult]) -> dict[str, float]:
    return {key: sum(value(r, key) for r in results) for _, key in COLUMNS if key is not None}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("corpus", nargs="?", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--modes", default="default,library", help="default,library")
    parser.add_argument(
        "--packages", default="", help="only these package folders, comma-separated"
    )
    parser.add_argument("--amp-lint", default=default_binary(), help="the amp-lint command")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per amp-lint run")
    parser.add_argument("--no-fix", action="store_true", help="lint only")
    parser.add_argument("--json", type=Path, help="write every count and problem line here")
    parser.add_argument("--output", type=Path, help="write the Markdown summary here too")
    parser.add_argument("--keep-failures", type=Path, help="keep bad fixes (before/after) here")
    parser.add_argument("--label", default="", help="a line to add to the report's header")
    options = parser.parse_args(argv)
    modes = [m for m in options.modes.split(",") if m]
    if not options.corpus.is_dir() or any(m not in MODES for m in modes):
        print(f"corpus_check: no folder {options.corpus} or bad --modes", file=sys.stderr)
        return 2
    wanted = [p for p in options.packages.split(",") if p]
    groups = packages(options.corpus, wanted)
    env = dict(os.environ)
    env.pop("AMP_LINT_CACHE_DIR", None)
    results: list[PackageResult] = []
    started = time.time()
    for mode in modes:
        for name, paths in groups:
            print(f"[{time.strftime('%H:%M:%S')}] {mode} {name}", file=sys.stderr, flush=True)
            with tempfile.TemporaryDirectory(prefix="amp-lint-corpus-") as scratch:
                result = check_package(name, paths, mode, options, Path(scratch), env)
            results.append(result)
            print(
                f"    {result.files} files, {result.findings} findings, "
                f"{result.fixed_files} fixed, {result.problems()} problems, "
                f"{result.seconds:.1f} s",
                file=sys.stderr,
                flush=True,
            )
    header = [
        f"Corpus: `{options.corpus}`, {len(groups)} package folders. "
        f"amp-lint: {source_description(options.amp_lint, env)}.",
        f"Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(started))}; "
        f"took {time.time() - started:,.0f} s. Timeout per run: {options.timeout:.0f} s.",
    ]
    if options.label:
        header.append(options.label)
    report = markdown(results, header)
    print(report)
    if options.output:
        options.output.write_text(report)
    if options.json:
        data = {
            "header": header,
            "results": [asdict(r) | {"problems": r.problems()} for r in results],
            "totals": {mode: totals([r for r in results if r.mode == mode]) for mode in modes},
        }
        options.json.write_text(json.dumps(data, indent=1))
    return 1 if any(r.problems() for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
