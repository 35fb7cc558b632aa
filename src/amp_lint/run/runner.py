"""The file processing behind `amp-lint check`: reading the files, linting or fixing each
one (in a process pool when there are enough), writing the fixes back, and the diff of a fix.
project_run.py decides which files to analyse in which context. Nothing here prints; errors
go to the caller's `report_error`, and the output and exit status are cli.py's.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import multiprocessing
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType

from amp_lint.analysis.project.index import (
    SINGLE_FILE,
    ClassAssumption,
    EntryContext,
    ProjectContext,
    ProjectIndex,
)
from amp_lint.findings import Finding
from amp_lint.parse.parse_guard import call_with_deep_stack
from amp_lint.parse.syntax_check import cpython_refusal
from amp_lint.run.crash_isolation import IsolatingRunner
from amp_lint.settings.config import Config
from amp_lint.sources.fix_writing import (
    ChangedSinceRead,
    remove_stale_temporary_files,
    write_atomically,
)

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
    # Give each fix the text edits it makes (Fix.text_edits), for JSON and SARIF output.
    text_edits: bool = False
    # Only say whether the file parses: a file without AMP vocabulary (syntax_check.py).
    syntax_only: bool = False


@dataclass
class Outcome:
    path: str
    source: bytes
    remaining: list[Finding] = field(default_factory=list)
    fixed: list[Finding] = field(default_factory=list)
    fixed_source: bytes | None = None  # set only when the fixes changed the bytes
    # With --fix: the findings of `source` itself, which remain if the fix is not written.
    unfixed: list[Finding] | None = None
    error: str | None = None
    notice: str | None = None  # a warning that fails nothing (a file too large to analyse)
    outgoing: list[EntryContext] = field(default_factory=list)
    assumptions: list[ClassAssumption] = field(default_factory=list)
    parsed: bool = False  # False when the first pass showed there was nothing to find
    dependencies: list[str] = field(default_factory=list)  # see FileAnalysis
    suppressed: list[Finding] = field(default_factory=list)  # by noqa comments, for AMP900
    held_back: list[tuple[str, str]] = field(default_factory=list)  # see FileAnalysis


# The project index of the run, set once per worker process (see JobRunner).
_worker_project: ProjectIndex | None = None


def _set_worker_project(project: ProjectIndex | None) -> None:
    global _worker_project
    _worker_project = project


def process_job(job: Job, config: Config) -> Outcome:
    """Lint or fix one file; never raises, so that one bad file cannot stop the others."""
    if job.syntax_only:
        return _check_syntax(job)
    # Imported here: the engine pulls in libcst and the rules, which costs more than linting a
    # tree of files without AMP vocabulary (the usual pre-commit run) takes in total.
    from amp_lint.run.engine import SourceError, SourceTooLarge

    outcome = Outcome(job.path, job.source)
    try:
        call_with_deep_stack(functools.partial(_lint_or_fix, job, config, outcome))
    except SourceTooLarge as error:
        outcome.notice = _one_line(str(error))
    except SourceError as error:
        outcome.error = _one_line(str(error))
    except RecursionError:
        # Deeper than even the deep stack allows (parse_guard.py): code CPython accepts does
        # not get here, so the file is skipped with a warning, as a too large one is.
        outcome.notice = f"{job.path}: not analysed: nested too deeply"
    except Exception as error:  # a bug in a rule must not hide the other files' findings
        outcome.error = (
            f"{job.path}: internal error, please report it: "
            f"{type(error).__name__}: {_one_line(str(error))}"
        )
    return outcome


def _check_syntax(job: Job) -> Outcome:
    # Without the source: the caller has it, and sending it back costs as much as the check.
    outcome = Outcome(job.path, b"")
    refusal = cpython_refusal(job.source, job.path)
    if refusal is None:
        return outcome
    # libcst decides what CPython refuses (syntax_check.py); imported only here, for the same
    # reason as in process_job.
    from amp_lint.run.engine import SourceError, SourceTooLarge, parse_source

    try:
        call_with_deep_stack(functools.partial(parse_source, job.source, job.path))
    except SourceTooLarge:
        outcome.error = refusal  # too large for libcst: CPython's verdict stands
    except SourceError as error:
        outcome.error = _one_line(str(error))
    except RecursionError:
        outcome.error = refusal
    return outcome


def _lint_or_fix(job: Job, config: Config, outcome: Outcome) -> None:
    from amp_lint.parse.first_pass import own_code_may_have_findings
    from amp_lint.run.engine import analyse_source, fix_source

    context = job.context
    if _worker_project is not None and context.project is None:
        context = replace(context, project=_worker_project)
    if job.first_pass and not own_code_may_have_findings(job.source, config):
        if not (context.entries or context.assumptions):
            return
        context = replace(context, own_roots=False)
    outcome.parsed = True
    if job.fix:
        result = fix_source(
            job.source,
            job.path,
            config,
            unsafe=job.unsafe,
            context=context,
            text_edits=job.text_edits,
        )
        outcome.remaining, outcome.fixed = result.remaining, result.fixed
        if result.source != job.source:
            outcome.fixed_source = result.source
    else:
        analysis = analyse_source(job.source, job.path, config, context, text_edits=job.text_edits)
        outcome.remaining = analysis.findings
        outcome.outgoing, outcome.assumptions = analysis.outgoing, analysis.assumptions
        outcome.dependencies = analysis.dependencies
        outcome.suppressed = analysis.suppressed
        outcome.held_back = analysis.held_back


def _one_line(message: str) -> str:
    return " ".join(message.split())


def run_jobs(jobs: list[Job], config: Config) -> list[Outcome]:
    """Outcomes in the order of `jobs`, from a process pool when there are enough files."""
    with JobRunner(config) as runner:
        return runner.run(jobs)


class JobRunner:
    """Runs batches of jobs, in one process pool for the whole run (started on the first
    batch big enough to need it), each worker holding the run's project index."""

    def __init__(
        self,
        config: Config,
        project: ProjectIndex | None = None,
        jobs: int | None = None,
        start_method: str | None = None,
    ) -> None:
        self.config = config
        self.project = project
        # How worker processes start (multiprocessing's start methods); None: the platform's
        # default. The language server asks for "spawn": forking while its stdin reader
        # thread holds the stdin lock leaves each child blocked closing stdin.
        self.start_method = start_method
        self.pool: ProcessPoolExecutor | None = None
        # --jobs: at most this many worker processes (1 works in this process); None: one
        # per usable CPU.
        self.workers = jobs or _usable_cpus()
        self.serial = self.workers == 1

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
        workers = min(len(jobs), self.workers)
        if len(jobs) > PARALLEL_THRESHOLD and workers > 1 and not self.serial:
            try:
                pool = self._pool()
                chunk = max(1, len(jobs) // (self.workers * 4))
                return _collect(pool.map(work, jobs, chunksize=chunk), outcomes, done)
            except BrokenProcessPool:
                # A worker died: the jobs not yet collected run again, isolated so that the
                # file that kills its process costs only itself (crash_isolation.py).
                self._discard_pool()
                isolating: IsolatingRunner[Job, Outcome] = IsolatingRunner(
                    work, self._new_pool, _crashed, workers
                )
                collected = len(outcomes)

                def done_after_collected(count: int) -> None:
                    if done is not None:
                        done(collected + count)

                return outcomes + isolating.run(jobs[collected:], done_after_collected)
            except (OSError, NotImplementedError):
                # Without usable multiprocessing here, run everything serially: workers write
                # nothing, so repeating their work is safe.
                self.serial = True
                outcomes.clear()
        _set_worker_project(self.project)
        return _collect(map(work, jobs), outcomes, done)

    def _pool(self) -> ProcessPoolExecutor:
        if self.pool is None:
            self.pool = self._new_pool(self.workers)
        return self.pool

    def _new_pool(self, workers: int) -> ProcessPoolExecutor:
        # Loaded before the pool starts, so that forked workers inherit the engine and the
        # rule modules instead of each importing them again.
        importlib.import_module("amp_lint.run.engine")
        importlib.import_module("amp_lint.rules").all_rules()
        context = multiprocessing.get_context(self.start_method) if self.start_method else None
        return ProcessPoolExecutor(
            max_workers=workers,
            mp_context=context,
            initializer=_set_worker_project,
            initargs=(self.project,),
        )

    def _discard_pool(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = None


def _crashed(job: Job) -> Outcome:
    return Outcome(
        job.path,
        job.source,
        error=(
            f"{job.path}: internal error, please report it: the process analysing this file "
            "died (a crash in the parser or the analysis); the other files were analysed"
        ),
    )


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


def write_fixes(
    outcomes: list[Outcome],
    report_error: Callable[[str], None],
    report_warning: Callable[[str], None],
) -> None:
    """Write each fixed file, if it still holds the bytes that were read. A file that
    changed meanwhile is left alone with a warning, one that cannot be written with an
    error; either way its findings are reported as remaining, none as fixed."""
    cleaned: set[Path] = set()
    for outcome in outcomes:
        if outcome.fixed_source is None:
            continue
        path = Path(outcome.path)
        directory = _real_parent(path)
        if directory is not None and directory not in cleaned:
            cleaned.add(directory)
            remove_stale_temporary_files(directory)
        try:
            write_atomically(path, outcome.fixed_source, expected=outcome.source)
        except ChangedSinceRead as error:
            report_warning(f"{outcome.path}: {error.strerror}")
            _not_fixed(outcome)
        except OSError as error:
            report_error(f"{outcome.path}: cannot write: {error.strerror or error}")
            _not_fixed(outcome)


def _real_parent(path: Path) -> Path | None:
    """The directory the fixed file's temporary copy goes to (a symlink is followed)."""
    try:
        return path.resolve().parent
    except (OSError, RuntimeError):
        return None


def _not_fixed(outcome: Outcome) -> None:
    """The file keeps its bytes, so it keeps the findings they have."""
    if outcome.unfixed is not None:
        outcome.remaining = list(outcome.unfixed)
    else:  # no record of the source's own findings: the fixed ones are still there
        outcome.remaining = sorted([*outcome.remaining, *outcome.fixed], key=lambda f: f.sort_key)
    outcome.fixed = []
    outcome.fixed_source = None


# Diffs


def unified_diff(path: str, old: bytes, new: bytes) -> bytes:
    """A `git apply`-able diff, on bytes so that any encoding and newline style survive; for
    a notebook, a diff of each changed cell's source."""
    if path.endswith(".ipynb"):
        from amp_lint.sources.notebook_writing import notebook_diff

        return notebook_diff(path, old, new)
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
