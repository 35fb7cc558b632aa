"""Benchmark amp-lint against ruff and flake8 on large real PyTorch code.

Standard library only. Run `python benchmarks/bench.py --help`; benchmarks/README.md explains
the method and how to read the report.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

# The wheels the reference timings in perf-anchors.md were taken on.
PINNED_VERSIONS = {"transformers": "5.23.0", "diffusers": "0.42.1", "timm": "1.0.31"}
DEFAULT_TREES = "transformers,diffusers"
QUICK_FILE_COUNT = 200

# Targets from the issue, as (label, limit).
# Issue 18's targets (the plugin overhead one is from the issue before it).
TARGET_DEFAULT_RATIO = 2.0
TARGET_LIBRARY_RATIO = 5.0
TARGET_WARM_SECONDS = 0.3
TARGET_PLUGIN_OVERHEAD = 0.10
TARGET_PEAK_MIB = 500.0

# Runs argv[3:] with stdout to argv[1] and stderr to argv[2] (files, never pipes), then prints
# its wall time and the rusage of its children. The wrapper is a fresh process per measurement,
# so RUSAGE_CHILDREN covers exactly the measured command and the processes it waited for.
WRAPPER_CODE = """\
import json, resource, subprocess, sys, time
with open(sys.argv[1], "wb") as out, open(sys.argv[2], "wb") as err:
    start = time.perf_counter()
    rc = subprocess.call(sys.argv[3:], stdin=subprocess.DEVNULL, stdout=out, stderr=err)
    wall = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": rc, "wall": wall, "user": usage.ru_utime, "sys": usage.ru_stime,
                  "maxrss_kib": usage.ru_maxrss}))
"""

# flake8 with amp-lint's plugin hidden: the same flake8, but its entry-point finder drops the
# plugins whose entry point lives in amp_lint. flake8's pool forks (Linux), so workers inherit it.
FLAKE8_WITHOUT_AMP_CODE = """\
import sys
from flake8.plugins import finder
find_all = finder._find_importlib_plugins
def find_without_amp_lint():
    return (p for p in find_all() if not p.entry_point.value.startswith("amp_lint."))
finder._find_importlib_plugins = find_without_amp_lint
from flake8.main.cli import main
sys.exit(main(sys.argv[1:]))
"""


class BenchError(Exception):
    """A missing tool or corpus: reported as one line, exit status 2."""


@dataclass
class Tools:
    python: str
    ruff: str
    amp_lint: list[str]


@dataclass
class Row:
    key: str
    label: str
    argv: list[str]
    display: str
    kind: str  # "ruff", "flake8", "amp-lint": how its output is counted
    warm_up: bool = False


@dataclass
class Measurement:
    rc: int
    wall: float
    cpu: float
    maxrss_mib: float


@dataclass
class RowResult:
    row: Row
    runs: list[Measurement] = field(default_factory=list)
    unavailable: str = ""
    findings: str = ""
    findings_json: str = ""  # amp-lint rows: the last run's output

    @property
    def wall_median(self) -> float:
        return statistics.median(run.wall for run in self.runs)

    @property
    def wall_min(self) -> float:
        return min(run.wall for run in self.runs)

    @property
    def cpu_median(self) -> float:
        return statistics.median(run.cpu for run in self.runs)

    @property
    def peak_mib(self) -> float:
        return max(run.maxrss_mib for run in self.runs)


@dataclass
class Tree:
    name: str
    source: str  # where the files came from, for the report
    path: Path
    files: list[Path]
    lines: int
    size: int
    no_vocab_dir: Path
    no_vocab_count: int


@dataclass
class TreeResult:
    tree: Tree
    rows: list[RowResult]


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Time amp-lint, ruff and flake8 on real PyTorch packages "
        "and print a Markdown report.",
    )
    parser.add_argument(
        "--corpus",
        type=Path,
        help="reuse DIR/<name>/<name>/ (or DIR/<name>/) instead of downloading wheels",
    )
    parser.add_argument(
        "--trees",
        default=DEFAULT_TREES,
        help=f"comma-separated package names (default: {DEFAULT_TREES})",
    )
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per row (default: 3)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"smoke test: 1 run and only the first {QUICK_FILE_COUNT} files of each tree",
    )
    parser.add_argument("--output", type=Path, help="also write the report to this file")
    parser.add_argument(
        "--findings-dir", type=Path, help="save each amp-lint mode's JSON findings here"
    )
    parser.add_argument(
        "--reference-findings",
        type=Path,
        metavar="DIR",
        help="compare each amp-lint mode's findings with DIR/<tree>-<row>.json (a --findings-dir "
        "of an earlier build); the report says whether they are identical",
    )
    parser.add_argument(
        "--rows",
        help="comma-separated row keys to run (default: all; ruff is always run)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.repeat = 1
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


# ----------------------------------------------------------------------------- tools


def find_executable(name: str) -> str:
    """`name` next to this Python (the venv) first, then on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise BenchError(f"{name} not found next to {sys.executable} or on PATH")
    return found


def find_tools() -> Tools:
    for module in ("flake8", "amp_lint"):
        if importlib.util.find_spec(module) is None:
            raise BenchError(f"{module} is not installed for {sys.executable}")
    script = Path(sys.executable).parent / "amp-lint"
    amp_lint = [str(script)] if script.is_file() else [sys.executable, "-m", "amp_lint"]
    return Tools(python=sys.executable, ruff=find_executable("ruff"), amp_lint=amp_lint)


def first_line(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[0] if lines else f"(no output, exit {done.returncode})"


def flake8_version(tools: Tools, hide_amp: bool) -> str:
    if hide_amp:
        argv = [tools.python, "-c", FLAKE8_WITHOUT_AMP_CODE, "--version"]
    else:
        argv = [tools.python, "-m", "flake8", "--version"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    return " ".join(done.stdout.split())


def check_plugin_hiding(tools: Tools) -> str:
    """flake8 --version lists the loaded plugins: amp-lint must be there only without hiding."""
    shown = "amp-lint" in flake8_version(tools, hide_amp=False)
    hidden = "amp-lint" not in flake8_version(tools, hide_amp=True)
    if shown and hidden:
        return "verified (`--version` lists amp-lint only without the launcher)"
    return f"NOT verified (plugin listed normally: {shown}; hidden by launcher: {hidden})"


# ----------------------------------------------------------------------------- corpus


def download_trees(names: list[str], workdir: Path) -> dict[str, Path]:
    wheels = workdir / "wheels"
    specs = [
        f"{name}=={PINNED_VERSIONS[name]}" if name in PINNED_VERSIONS else name for name in names
    ]
    argv = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary",
        ":all:",
        *specs,
        "-d",
        str(wheels),
    ]
    print("downloading:", " ".join(specs), file=sys.stderr)
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise BenchError(f"pip download failed: {last}")
    return {name: unpack_wheel(wheels, name, workdir / "corpus" / name) for name in names}


def unpack_wheel(wheels: Path, name: str, dest: Path) -> Path:
    """Extract only the package folder `name/` of the wheel (not .dist-info)."""
    stem = name.replace("-", "_")
    matches = sorted(wheels.glob(f"{stem}-*.whl"))
    if not matches:
        raise BenchError(f"no wheel for {name} in {wheels}")
    with zipfile.ZipFile(matches[0]) as wheel:
        members = [m for m in wheel.namelist() if m.startswith(f"{stem}/")]
        wheel.extractall(dest, members)
    return dest / stem


def corpus_trees(corpus: Path, names: list[str]) -> dict[str, Path]:
    trees: dict[str, Path] = {}
    for name in names:
        nested = corpus / name / name
        flat = corpus / name
        if nested.is_dir():
            trees[name] = nested
        elif flat.is_dir() and any(flat.glob("*.py")):
            trees[name] = flat
        else:
            raise BenchError(f"no package folder {nested} or {flat}")
    return trees


def python_files(root: Path) -> list[Path]:
    found: list[Path] = []
    for parent, dir_names, file_names in os.walk(root):
        dir_names[:] = sorted(d for d in dir_names if d != "__pycache__")
        found.extend(Path(parent) / name for name in sorted(file_names) if name.endswith(".py"))
    return found


def copy_files(files: list[Path], root: Path, dest: Path) -> Path:
    """Copy `files` (under `root`) to `dest/<root name>/`, keeping their relative paths."""
    target = dest / root.name
    for path in files:
        copy = target / path.relative_to(root)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, copy)
    target.mkdir(parents=True, exist_ok=True)
    return target


def prepare_tree(name: str, root: Path, workdir: Path, quick: bool) -> Tree:
    from amp_lint.settings.config import Config
    from amp_lint.sources.files import round_zero_vocabulary

    vocabulary = round_zero_vocabulary(Config())
    files = python_files(root)
    if not files:
        raise BenchError(f"no .py files under {root}")
    source = f"`{root}`"
    if quick:
        source = f"the first {QUICK_FILE_COUNT} files of `{root}`, copied"
        root = copy_files(files[:QUICK_FILE_COUNT], root, workdir / "quick" / name)
        files = python_files(root)
    lines = size = 0
    without: list[Path] = []
    for path in files:
        data = path.read_bytes()
        lines += data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
        size += len(data)
        if not any(word in data for word in vocabulary):
            without.append(path)
    no_vocab_dir = copy_files(without, root, workdir / "no-vocab" / name)
    return Tree(name, source, root, files, lines, size, no_vocab_dir, len(without))


# ----------------------------------------------------------------------------- rows


def build_rows(tree: Tree, tools: Tools, cache_dir: Path) -> list[Row]:
    target = str(tree.path)
    no_vocab = str(tree.no_vocab_dir)
    py = tools.python
    amp = tools.amp_lint
    flake8 = [py, "-m", "flake8"]
    flake8_bare = [py, "-c", FLAKE8_WITHOUT_AMP_CODE]
    json_out = ["--format", "json"]
    return [
        Row(
            "ruff",
            "ruff check --select ALL (reference)",
            [
                tools.ruff,
                "check",
                "--select",
                "ALL",
                "--no-cache",
                "--output-format",
                "concise",
                "--exit-zero",
                target,
            ],
            "ruff check --select ALL --no-cache --output-format concise --exit-zero TREE",
            "ruff",
        ),
        Row(
            "flake8",
            "flake8, without amp-lint plugin",
            [*flake8_bare, "--exit-zero", target],
            "python -c <flake8 without AMP> --exit-zero TREE",
            "flake8",
        ),
        Row(
            "flake8+amp",
            "flake8, with amp-lint plugin",
            [*flake8, "--exit-zero", target],
            "python -m flake8 --exit-zero TREE",
            "flake8",
        ),
        Row(
            "default",
            "amp-lint check (default mode, cold)",
            [*amp, "check", "--no-cache", "--exit-zero", *json_out, target],
            "amp-lint check --no-cache --exit-zero --format json TREE",
            "amp-lint",
        ),
        Row(
            "library",
            "amp-lint check --assume-autocast float16 (library mode, cold)",
            [
                *amp,
                "check",
                "--no-cache",
                "--exit-zero",
                "--assume-autocast",
                "float16",
                *json_out,
                target,
            ],
            "amp-lint check --no-cache --exit-zero --assume-autocast float16 --format json TREE",
            "amp-lint",
        ),
        Row(
            "warm",
            "amp-lint check, warm cache (default mode)",
            [*amp, "check", "--exit-zero", "--cache-dir", str(cache_dir), *json_out, target],
            "amp-lint check --exit-zero --cache-dir CACHE --format json TREE"
            "  (run once untimed first)",
            "amp-lint",
            warm_up=True,
        ),
        Row(
            "nv-flake8",
            f"flake8 without plugin, {tree.no_vocab_count} files without AMP words",
            [*flake8_bare, "--exit-zero", no_vocab],
            "python -c <flake8 without AMP> --exit-zero NO_VOCAB_COPY",
            "flake8",
        ),
        Row(
            "nv-flake8+amp",
            f"flake8 with plugin, {tree.no_vocab_count} files without AMP words",
            [*flake8, "--exit-zero", no_vocab],
            "python -m flake8 --exit-zero NO_VOCAB_COPY",
            "flake8",
        ),
    ]


def measure(argv: list[str], out: Path, err: Path, cwd: Path) -> Measurement:
    wrapper = [sys.executable, "-c", WRAPPER_CODE, str(out), str(err), *argv]
    done = subprocess.run(wrapper, cwd=cwd, capture_output=True, text=True, check=True)
    data = json.loads(done.stdout)
    return Measurement(
        rc=data["rc"],
        wall=data["wall"],
        cpu=data["user"] + data["sys"],
        maxrss_mib=data["maxrss_kib"] / 1024,
    )


def failure_reason(measurement: Measurement, err: Path) -> str:
    """Why a run does not count: '' if it succeeded."""
    if measurement.rc == 0:
        return ""
    text = err.read_text(errors="replace")
    if measurement.rc == 2 and "unrecognized arguments" in text:
        rest = text.strip().splitlines()[-1].split("unrecognized arguments:")[-1].split()
        flags = " ".join(word for word in rest if word.startswith("-"))
        return f"not available (amp-lint does not accept {flags})"
    lines = text.strip().splitlines()
    return f"failed (exit {measurement.rc}: {lines[-1] if lines else 'no message'})"


def count_findings(kind: str, out: Path) -> str:
    text = out.read_text(errors="replace")
    if kind == "amp-lint":
        try:
            return f"{len(json.loads(text)):,}"
        except ValueError:
            return "unreadable JSON"
    if kind == "ruff":
        found = re.search(r"^Found ([\d,]+) error", text, re.MULTILINE)
        return f"{int(found.group(1).replace(',', '')):,}" if found else "0"
    lines = text.splitlines()
    amp = sum(1 for line in lines if re.search(r":\d+:\d+: AMP\d", line))
    return f"{len(lines):,} (AMP: {amp:,})"


def run_tree(
    tree: Tree,
    tools: Tools,
    workdir: Path,
    repeat: int,
    findings_dir: Optional[Path],
    wanted: set[str],
) -> TreeResult:
    scratch = workdir / "out" / tree.name
    scratch.mkdir(parents=True, exist_ok=True)
    rows = build_rows(tree, tools, workdir / "cache" / tree.name)
    if wanted:
        rows = [row for row in rows if row.key in wanted or row.key == "ruff"]
    results = [RowResult(row) for row in rows]
    for result in results:
        if result.row.warm_up:
            warm_up(result, scratch)
    # Round-robin over rows, so that a slow drift of the machine affects every row alike.
    for round_number in range(repeat):
        for result in results:
            if result.unavailable:
                continue
            print(f"  {tree.name} [{round_number + 1}/{repeat}] {result.row.key}", file=sys.stderr)
            run_once(result, scratch, findings_dir, tree.name)
    return TreeResult(tree, results)


def warm_up(result: RowResult, scratch: Path) -> None:
    out, err = scratch / f"{result.row.key}-fill.out", scratch / f"{result.row.key}-fill.err"
    print(f"  filling cache: {result.row.key}", file=sys.stderr)
    result.unavailable = failure_reason(measure(result.row.argv, out, err, scratch), err)


def run_once(result: RowResult, scratch: Path, findings_dir: Optional[Path], name: str) -> None:
    out, err = scratch / f"{result.row.key}.out", scratch / f"{result.row.key}.err"
    measurement = measure(result.row.argv, out, err, scratch)
    reason = failure_reason(measurement, err)
    if reason:
        result.unavailable = reason
        return
    result.runs.append(measurement)
    result.findings = count_findings(result.row.kind, out)
    if result.row.kind == "amp-lint":
        result.findings_json = out.read_text(encoding="utf-8", errors="replace")
    if findings_dir is not None and result.row.kind == "amp-lint":
        findings_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(out, findings_dir / f"{name}-{result.row.key}.json")


# ----------------------------------------------------------------------------- report


def machine_lines(tools: Tools) -> list[str]:
    return [
        "| | |",
        "|---|---|",
        f"| CPU | {cpu_model()} |",
        f"| nproc | {cpu_count()} |",
        f"| memory | {memory_gib():.1f} GiB |",
        f"| OS | {os_name()}, {platform.system()} {platform.release()} |",
        f"| Python | {platform.python_implementation()} {platform.python_version()} "
        f"({sys.executable}) |",
        f"| ruff | {first_line([tools.ruff, '--version'])} |",
        f"| flake8 | {flake8_version(tools, hide_amp=False)} |",
        f"| libcst | {importlib.metadata.version('libcst')} |",
        f"| amp-lint | {first_line([*tools.amp_lint, '--version'])} |",
    ]


def cpu_count() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 0


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def memory_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return 0.0


def os_name() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return platform.platform()


def command_lines(results: list[TreeResult]) -> list[str]:
    lines = ["```"]
    for result in results[0].rows:
        lines.append(f"{result.row.key:14} {result.row.display}")
    lines.append("```")
    return lines


def seconds(value: float) -> str:
    return f"{value:.3f}" if value < 1 else f"{value:.2f}"


def row_line(result: RowResult, ruff_wall: Optional[float]) -> str:
    label = f"`{result.row.key}` {result.row.label}"
    if not result.runs:
        return f"| {label} | {result.unavailable} | | | | | | |"
    ratio = f"{result.wall_median / ruff_wall:.2f}x" if ruff_wall else "-"
    return (
        f"| {label} | {len(result.runs)} | {seconds(result.wall_median)} | "
        f"{seconds(result.wall_min)} | {seconds(result.cpu_median)} | {result.peak_mib:.0f} | "
        f"{ratio} | {result.findings} |"
    )


def tree_section(result: TreeResult, reference: Optional[Path] = None) -> list[str]:
    tree = result.tree
    rows = {row.row.key: row for row in result.rows}
    ruff = rows["ruff"]
    ruff_wall = ruff.wall_median if ruff.runs else None
    lines = [
        f"## {tree.name}",
        "",
        f"{tree.source}: {len(tree.files):,} .py files, {tree.lines:,} lines, "
        f"{tree.size / 1e6:.1f} MB; {tree.no_vocab_count:,} files have none of amp-lint's "
        "AMP vocabulary.",
        "",
        "| row | runs | wall median (s) | wall min (s) | CPU s (median) | peak RSS MiB "
        "| ÷ ruff | findings |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += [row_line(row, ruff_wall) for row in result.rows]
    lines += ["", *target_lines(rows, ruff_wall), ""]
    lines += [*findings_lines(tree.name, rows, reference), ""]
    return lines


def findings_lines(name: str, rows: dict[str, RowResult], reference: Optional[Path]) -> list[str]:
    """Whether each amp-lint mode found exactly what the reference build found (the same
    JSON, compared as sorted findings), and the warm run what the cold one did."""
    lines = []
    for key in ("default", "library", "warm"):
        row = rows.get(key)
        if row is None or not row.runs:
            continue
        mine = sorted_findings(row.findings_json)
        if key == "warm" and "default" in rows and rows["default"].runs:
            same = mine == sorted_findings(rows["default"].findings_json)
            lines.append(
                f"- `warm` findings {'identical to' if same else '**differ from**'} "
                "the cold default run's."
            )
        if reference is None:
            continue
        path = reference / f"{name}-{key}.json"
        if not path.is_file():
            lines.append(f"- `{key}`: no reference file {path}.")
            continue
        theirs = sorted_findings(path.read_text(encoding="utf-8", errors="replace"))
        if mine == theirs:
            lines.append(f"- `{key}` findings identical to the reference ({len(mine)}).")
        else:
            lost = len([f for f in theirs if f not in mine])
            new = len([f for f in mine if f not in theirs])
            lines.append(
                f"- `{key}` findings **differ** from the reference: {new} new, {lost} gone."
            )
    return lines


def sorted_findings(text: str) -> list[str]:
    try:
        findings = json.loads(text)
    except ValueError:
        return ["<not JSON>"]
    return sorted(json.dumps(f, sort_keys=True) for f in findings)


def verdict(met: Optional[bool]) -> str:
    return "n/a" if met is None else ("met" if met else "**not met**")


def target_lines(rows: dict[str, RowResult], ruff_wall: Optional[float]) -> list[str]:
    def ratio(key: str) -> Optional[float]:
        row = rows.get(key)
        return row.wall_median / ruff_wall if row and row.runs and ruff_wall else None

    default, library = ratio("default"), ratio("library")
    warm = rows["warm"].wall_median if "warm" in rows and rows["warm"].runs else None
    overhead = (
        plugin_overhead(rows["nv-flake8"], rows["nv-flake8+amp"])
        if "nv-flake8" in rows and "nv-flake8+amp" in rows
        else None
    )
    amp_rows = [r for k, r in rows.items() if r.runs and k in ("default", "library", "warm")]
    peak = max((r.peak_mib for r in amp_rows), default=None)
    entries = [
        (
            "default mode ≤ 2x ruff",
            fmt(default, "{:.2f}x"),
            None if default is None else default <= TARGET_DEFAULT_RATIO,
        ),
        (
            "library mode ≤ 5x ruff",
            fmt(library, "{:.2f}x"),
            None if library is None else library <= TARGET_LIBRARY_RATIO,
        ),
        (
            "warm-cache re-run < 0.3 s",
            fmt(warm, "{:.3f} s"),
            None if warm is None else warm < TARGET_WARM_SECONDS,
        ),
        (
            "flake8 plugin overhead < 10% on files without AMP vocabulary",
            fmt(None if overhead is None else overhead * 100, "{:+.1f}%"),
            None if overhead is None else overhead < TARGET_PLUGIN_OVERHEAD,
        ),
        (
            "peak memory < 500 MB (largest amp-lint process, any mode)",
            fmt(peak, "{:.0f} MiB"),
            None if peak is None else peak < TARGET_PEAK_MIB,
        ),
    ]
    lines = ["| target (from the issue) | measured | |", "|---|---|---|"]
    lines += [f"| {name} | {value} | {verdict(met)} |" for name, value, met in entries]
    return lines


def fmt(value: Optional[float], pattern: str) -> str:
    return "-" if value is None else pattern.format(value)


def plugin_overhead(without: RowResult, with_plugin: RowResult) -> Optional[float]:
    if not (without.runs and with_plugin.runs):
        return None
    return (with_plugin.wall_median - without.wall_median) / without.wall_median


def render_report(
    results: list[TreeResult], tools: Tools, args: argparse.Namespace, corpus_note: str, hiding: str
) -> str:
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# amp-lint benchmark",
        "",
        f"Date: {now}. Runs per row: {args.repeat}{' (--quick)' if args.quick else ''}. "
        f"Corpus: {corpus_note}.",
        "",
        "Invocation: `" + " ".join([Path(sys.executable).name, *sys.argv]) + "`",
        "",
        "## Machine and tools",
        "",
        *machine_lines(tools),
        "",
        "## Commands",
        "",
        "TREE is the package folder; NO_VOCAB_COPY is a copy (same relative paths) of the "
        "tree's files that contain none of amp-lint's vocabulary "
        "(`amp_lint.sources.files.round_zero_vocabulary`); CACHE is a fresh "
        "temporary folder per tree. Each command runs in a scratch folder with stdout and "
        "stderr written to files. `<flake8 without AMP>` is the same flake8 with amp-lint's "
        f"entry point dropped from its plugin finder ({hiding}).",
        "",
        *command_lines(results),
        "",
        "Columns: wall = the command's elapsed time; CPU s = user + system of the command "
        "and every process it waited for; peak RSS = the largest single process, max over "
        "runs; ÷ ruff = wall median ÷ the ruff row's wall median on the same tree; findings = "
        "ruff's count, flake8's output lines (AMP lines in brackets), amp-lint's JSON array "
        "length.",
        "",
    ]
    for result in results:
        lines += tree_section(result, args.reference_findings)
    return "\n".join(lines)


# ----------------------------------------------------------------------------- main


def obtain_trees(args: argparse.Namespace, workdir: Path) -> tuple[dict[str, Path], str]:
    names = [name.strip() for name in args.trees.split(",") if name.strip()]
    if not names:
        raise BenchError("--trees names no package")
    if args.corpus is not None:
        return corpus_trees(args.corpus, names), f"existing folder {args.corpus}"
    trees = download_trees(names, workdir)
    pins = ", ".join(f"{n}=={PINNED_VERSIONS.get(n, 'latest')}" for n in names)
    return trees, f"wheels from the package index ({pins})"


def run(args: argparse.Namespace, workdir: Path) -> str:
    tools = find_tools()
    hiding = check_plugin_hiding(tools)
    roots, corpus_note = obtain_trees(args, workdir)
    results = []
    for name, root in roots.items():
        print(f"preparing {name} ({root})", file=sys.stderr)
        tree = prepare_tree(name, root, workdir, args.quick)
        wanted = set(args.rows.split(",")) if args.rows else set()
        results.append(run_tree(tree, tools, workdir, args.repeat, args.findings_dir, wanted))
    return render_report(results, tools, args, corpus_note, hiding)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    try:
        with tempfile.TemporaryDirectory(prefix="amp-lint-bench-") as temp:
            report = run(args, Path(temp))
    except BenchError as error:
        print(f"bench.py: error: {error}", file=sys.stderr)
        return 2
    print(report)
    if args.output is not None:
        args.output.write_text(report + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
