"""Where amp-lint spends its time on a tree: per phase, per rule, per file.

Runs the real `amp-lint check` pipeline in this process, serially (one worker: the phases
add up to the run's CPU time), with timers wrapped around the functions that make each
phase. Times are exclusive: the parse of a module loaded while interpreting a call counts as
parsing, not as interpretation, and a rule's work as that rule, not as the interpreter's.

    .venv/bin/python benchmarks/profile.py TREE [--library] [--top 15] [--output report.md]

Prints a Markdown report. A benchmark, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from amp_lint.analysis.interpreter import interpreter
from amp_lint.analysis.project import imports
from amp_lint.parse import first_pass
from amp_lint.rules import all_rules
from amp_lint.run import engine, project_run, runner, warm_run
from amp_lint.settings.config import load_config
from amp_lint.sources import files


class Timers:
    """Exclusive time per (phase, detail): a timer running inside another pauses it."""

    def __init__(self) -> None:
        self.exclusive: collections.Counter[tuple[str, str]] = collections.Counter()
        self.calls: collections.Counter[tuple[str, str]] = collections.Counter()
        self.stack: list[list[Any]] = []  # [key, started, time of children]

    @contextmanager
    def timing(self, phase: str, detail: str = "") -> Iterator[None]:
        key = (phase, detail)
        self.stack.append([key, time.perf_counter(), 0.0])
        try:
            yield
        finally:
            _, started, children = self.stack.pop()
            elapsed = time.perf_counter() - started
            self.exclusive[key] += elapsed - children
            self.calls[key] += 1
            if self.stack:
                self.stack[-1][2] += elapsed

    def wrap(self, owner: Any, name: str, phase: str, detail: Callable[..., str]) -> None:
        original = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            with self.timing(phase, detail(*args, **kwargs)):
                result = original(*args, **kwargs)
                # A generator does its work when iterated: iterate it here, or a rule's
                # `check_module` would be timed as whatever consumes it.
                return iter(list(result)) if isinstance(result, types.GeneratorType) else result

        setattr(owner, name, timed)

    def by_phase(self) -> dict[str, float]:
        totals: collections.Counter[str] = collections.Counter()
        for (phase, _), seconds in self.exclusive.items():
            totals[phase] += seconds
        return dict(totals)

    def details(self, phase: str) -> list[tuple[str, float, int]]:
        rows = [
            (detail, seconds, self.calls[(p, detail)])
            for (p, detail), seconds in self.exclusive.items()
            if p == phase
        ]
        return sorted(rows, key=lambda row: -row[1])


def instrument(timers: Timers) -> None:
    """Timers around the pipeline's phases, and one process: phases add up."""
    runner._usable_cpus = lambda: 1  # type: ignore[attr-defined]
    nothing = lambda *args, **kwargs: ""  # noqa: E731
    timers.wrap(warm_run, "discover_python_files", "discover files", nothing)
    timers.wrap(warm_run, "read_sources", "read files", nothing)
    timers.wrap(imports.ImportGraph, "_graph", "import graph", nothing)
    timers.wrap(first_pass, "own_code_may_have_findings", "first pass", nothing)
    timers.wrap(engine, "parse_source", "libcst parse", lambda source, path: path)
    timers.wrap(engine, "collect_names", "names and metadata", nothing)
    timers.wrap(engine.ProjectLoader, "_load", "load imported module", lambda self, path: path)
    timers.wrap(interpreter.Interpreter, "run", "interpret", lambda self, *a, **k: self.facts.path)
    timers.wrap(engine, "to_findings", "findings and positions", nothing)
    timers.wrap(interpreter.Interpreter, "__init__", "interpreter setup", nothing)
    timers.wrap(runner, "process_job", "other per-file work", lambda job, config: job.path)
    for rule_class in all_rules():
        code = rule_class.code
        timers.wrap(rule_class, "check_module", "rules", lambda *a, code=code, **k: code)
        timers.wrap(rule_class, "check_node", "rules", lambda *a, code=code, **k: code)


def prefilter_count(tree: Path, config: Any) -> tuple[int, int]:
    discovered = files.discover_python_files([tree], config)
    vocabulary = files.round_zero_vocabulary(config)
    kept = sum(1 for path in discovered.files if any(w in path.read_bytes() for w in vocabulary))
    return len(discovered.files), kept


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree", type=Path)
    parser.add_argument("--library", action="store_true", help="--assume-autocast float16")
    parser.add_argument("--top", type=int, default=15, help="rows of the per-file table")
    parser.add_argument("--output", type=Path, help="write the report here as well")
    args = parser.parse_args()

    config = load_config(Path.cwd())
    if args.library:
        config = replace(config, assume_autocast="float16")
    total_files, kept = prefilter_count(args.tree, config)
    timers = Timers()
    instrument(timers)
    options = project_run.RunOptions(cache_directory=None)
    started, cpu_started = time.perf_counter(), time.process_time()
    with timers.timing("other (rounds, prefilter, cache keys)"):
        result = warm_run.lint_paths([str(args.tree)], config, options, lambda _: None)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started

    findings = sum(len(outcome.remaining) for outcome in result.outcomes)
    lines = [
        f"# amp-lint profile: `{args.tree}` ({'library' if args.library else 'default'} mode)",
        "",
        f"{total_files} files, {kept} with AMP vocabulary, {result.parsed} analyses with "
        f"libcst; {findings} findings. One process: {wall:.2f} s wall, {cpu:.2f} s CPU.",
        "",
        "## Phases (exclusive seconds)",
        "",
        "| phase | seconds | share |",
        "|---|---|---|",
    ]
    phases = timers.by_phase()
    for phase, seconds in sorted(phases.items(), key=lambda item: -item[1]):
        lines.append(f"| {phase} | {seconds:.2f} | {seconds / wall:.0%} |")
    lines += ["", "## Rules (exclusive seconds, module checks and node checks)", ""]
    lines += ["| rule | seconds | calls |", "|---|---|---|"]
    lines += [f"| {code} | {s:.2f} | {n} |" for code, s, n in timers.details("rules")]
    parses = timers.details("libcst parse")
    repeated = sum(count - 1 for _, _, count in parses)
    lines += [
        "",
        f"libcst parsed {len(parses)} files {sum(c for *_, c in parses)} times "
        f"({repeated} repeats: later rounds and fixes parse a file again).",
    ]
    per_file: collections.Counter[str] = collections.Counter()
    for (phase, detail), seconds in timers.exclusive.items():
        if detail.endswith(".py") and phase != "load imported module":
            per_file[detail] += seconds
    lines += ["", f"## Files (top {args.top}: parse + interpret + rules + other, all rounds)", ""]
    lines += ["| file | seconds |", "|---|---|"]
    root = str(args.tree)
    for path, seconds in per_file.most_common(args.top):
        lines.append(f"| {path.removeprefix(root).lstrip('/')} | {seconds:.2f} |")
    report = "\n".join(lines) + "\n"
    sys.stdout.write(report)
    if args.output:
        args.output.write_text(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
