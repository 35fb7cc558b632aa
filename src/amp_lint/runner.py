"""The file processing behind `amp-lint check`: reading the files, linting or fixing each
one (in a process pool when there are enough), writing the fixes back, and the diff of a fix.
project_run.py decides which files to analyse in which context. Nothing here prints; errors
go to the caller's `report_error`, and the output and exit status are cli.py's.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType

from amp_lint.analysis.project import (
    SINGLE_FILE,
    ClassAssumption,
    EntryContext,
    ProjectContext,
    ProjectIndex,
)
from amp_lint.config import Config
from amp_lint.files import write_atomically
from amp_lint.findings import Finding

# Below this many files a process pool costs more to start than it saves.
PARALLEL_THRESHOLD = 8


# Linting one file (runs in worker processes)


@dataclass(frozen=True)
class Job:
    path: str  # as the user wrote it or as discovered
    source: bytes
    fix: bool  # compute fixes (for --fix and --diff)
    unsafe: bool
    context: ProjectContext = SINGLE_FILE  # its `project` is set in the worker
    # Ask the first pass (first_pass.py) whether the file's own code can have findings.
    first_pass: bool = False


@dataclass
class Outcome:
    path: str
    source: bytes
    remaining: list[Finding] = field(default_factory=list)
    fixed: list[Finding] = field(default_factory=list)
    fixed_source: bytes | None = None  # set only when the fixes changed the bytes
    error: str | None = None
    notice: str | None = None  # a warning that fails nothing (a file too large to analyse)
    outgoing: list[EntryContext] = field(default_factory=list)
    assumptions: list[ClassAssumption] = field(default_factory=list)
    parsed: bool = False  # False when the first pass showed there was nothing to find
    dependencies: list[str] = field(default_factory=list)  # see FileAnalysis


# The project index of the run, set once per worker process (see JobRunner).
_worker_project: ProjectIndex | None = None


def _set_worker_project(project: ProjectIndex | None) -> None:
    global _worker_project
    _worker_project = project


def process_job(job: Job, config: Config) -> Outcome:
    """Lint or fix one file; never raises, so that one bad file cannot stop the others."""
    # Imported here: the engine pulls in libcst and the rules, which costs more than linting a
    # tree of files without AMP vocabulary (the usual pre-commit run) takes in total.
    from amp_lint.engine import SourceError, SourceTooLarge, analyse_source, fix_source
    from amp_lint.first_pass import own_code_may_have_findings

    outcome = Outcome(job.path, job.source)
    context = job.context
    if _worker_project is not None and context.project is None:
        context = replace(context, project=_worker_project)
    try:
        if job.first_pass and not own_code_may_have_findings(job.source, config):
            if not (context.entries or context.assumptions):
                return outcome
            context = replace(context, own_roots=False)
        outcome.parsed = True
        if job.fix:
            result = fix_source(job.source, job.path, config, unsafe=job.unsafe, context=context)
            outcome.remaining, outcome.fixed = result.remaining, result.fixed
            if result.source != job.source:
                outcome.fixed_source = result.source
        else:
            analysis = analyse_source(job.source, job.path, config, context)
            outcome.remaining = analysis.findings
            outcome.outgoing, outcome.assumptions = analysis.outgoing, analysis.assumptions
            outcome.dependencies = analysis.dependencies
    except SourceTooLarge as error:
        outcome.notice = _one_line(str(error))
    except SourceError as error:
        outcome.error = _one_line(str(error))
    except Exception as error:  # a bug in a rule must not hide the other files' findings
        outcome.error = (
            f"{job.path}: internal error, please report it: "
            f"{type(error).__name__}: {_one_line(str(error))}"
        )
    return outcome


def _one_line(message: str) -> str:
    return " ".join(message.split())


def run_jobs(jobs: list[Job], config: Config) -> list[Outcome]:
    """Outcomes in the order of `jobs`, from a process pool when there are enough files."""
    with JobRunner(config) as runner:
        return runner.run(jobs)


class JobRunner:
    """Runs batches of jobs, in one process pool for the whole run (started on the first
    batch big enough to need it), each worker holding the run's project index."""

    def __init__(self, config: Config, project: ProjectIndex | None = None) -> None:
        self.config = config
        self.project = project
        self.pool: ProcessPoolExecutor | None = None
        self.serial = False

    def __enter__(self) -> JobRunner:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self.pool is not None:
            self.pool.shutdown()

    def run(self, jobs: list[Job], done: Callable[[int], None] | None = None) -> list[Outcome]:
        """Outcomes in the order of `jobs`; `done` is told how many are collected as each one
        is (after a fall-back to serial work the count starts again from 0)."""
        if not jobs:
            return []
        work = functools.partial(process_job, config=self.config)
        outcomes: list[Outcome] = []
        workers = min(len(jobs), _usable_cpus())
        if len(jobs) > PARALLEL_THRESHOLD and workers > 1 and not self.serial:
            # Without usable multiprocessing here, or when a worker dies, run everything
            # again serially: workers write nothing, so repeating their work is safe.
            try:
                pool = self._pool()
                chunk = max(1, len(jobs) // (_usable_cpus() * 4))
                return _collect(pool.map(work, jobs, chunksize=chunk), outcomes, done)
            except (OSError, NotImplementedError, BrokenProcessPool):
                self.serial = True
                outcomes.clear()
        _set_worker_project(self.project)
        return _collect(map(work, jobs), outcomes, done)

    def _pool(self) -> ProcessPoolExecutor:
        if self.pool is None:
            # Loaded before the pool starts, so that forked workers inherit the engine and
            # the rule modules instead of each importing them again.
            importlib.import_module("amp_lint.engine")
            importlib.import_module("amp_lint.rules").all_rules()
            self.pool = ProcessPoolExecutor(
                max_workers=_usable_cpus(),
                initializer=_set_worker_project,
                initargs=(self.project,),
            )
        return self.pool


def _collect(
    results: Iterable[Outcome], outcomes: list[Outcome], done: Callable[[int], None] | None
) -> list[Outcome]:
    for outcome in results:
        outcomes.append(outcome)
        if done is not None:
            done(len(outcomes))
    return outcomes


def _usable_cpus() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


# Reading and writing files


def write_fixes(outcomes: list[Outcome], report_error: Callable[[str], None]) -> None:
    for outcome in outcomes:
        if outcome.fixed_source is None:
            continue
        try:
            write_atomically(Path(outcome.path), outcome.fixed_source)
        except OSError as error:
            report_error(f"{outcome.path}: cannot write: {error.strerror or error}")
            outcome.fixed = []


# Diffs


def unified_diff(path: str, old: bytes, new: bytes) -> bytes:
    """A `git apply`-able diff, on bytes so that any encoding and newline style survive."""
    name = os.fsencode(path)
    lines = difflib.diff_bytes(
        difflib.unified_diff, _diff_lines(old), _diff_lines(new), b"a/" + name, b"b/" + name
    )
    return b"".join(line if line.endswith((b"\n", b"\r")) else line + b"\n" for line in lines)


def _diff_lines(data: bytes) -> list[bytes]:
    lines = data.splitlines(keepends=True)
    if lines and not lines[-1].endswith((b"\n", b"\r")):
        lines[-1] += b"\n\\ No newline at end of file\n"
    return lines
