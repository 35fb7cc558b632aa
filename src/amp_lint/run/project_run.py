"""Linting the files of one run as a project, in rounds: the run's options, its entry points
(lint_project, lint_sources) and its result. The rounds themselves are rounds.py's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from amp_lint.analysis.project.memo import ProjectMemo
from amp_lint.run.cache import ResultCache
from amp_lint.run.notebook_run import NotebookSources
from amp_lint.run.progress import Progress
from amp_lint.run.rounds import Rounds
from amp_lint.run.run_summary import RunSummary
from amp_lint.run.runner import JobRunner, Outcome
from amp_lint.settings.config import Config


@dataclass
class RunOptions:
    fix: bool = False  # --fix or --diff
    unsafe: bool = False
    cache_directory: Path | None = None  # None: no cache
    first_pass: bool = True
    # Give each fix its text edits (Fix.text_edits): asked for by the JSON and SARIF formats.
    text_edits: bool = False
    jobs: int | None = None  # worker processes (--jobs); None: one per CPU
    # Paths whose source is an editor's unsaved text, not the disk's (the language server):
    # analyses reading another linted file read it from the run's sources.
    unsaved: frozenset[str] = frozenset()
    # How worker processes start (runner.JobRunner); None: the platform's default.
    start_method: str | None = None
    # With `fix`: fix only these files (the language server's document); None: every file.
    fix_only: frozenset[str] | None = None
    progress: Progress = field(default_factory=Progress)  # silent unless given a stream


@dataclass
class ProjectResult:
    outcomes: list[Outcome]
    parsed: int = 0  # files parsed with libcst, over all rounds (cache hits excluded)
    # What the run checked (warm_run.lint_paths sets it): for the line a clean run prints.
    summary: RunSummary = field(default_factory=RunSummary)


def lint_project(
    sources: dict[str, bytes],
    config: Config,
    options: RunOptions,
    memo: ProjectMemo | None = None,
) -> ProjectResult:
    """One Outcome per file with findings, fixes or an error, in the order of `sources`.
    `memo` carries facts about unchanged files from the previous run over the same project
    (project_memo.py)."""
    # Notebooks are analysed as the Python module of their code cells, reported as notebooks.
    notebooks = NotebookSources.split(sources)
    sources = notebooks.python
    memo = memo or ProjectMemo()
    unsaved = {path: sources[path] for path in options.unsaved if path in sources}
    project = memo.project(sources, unsaved)
    cache = ResultCache(options.cache_directory) if options.cache_directory else None
    run = Rounds(sources, config, project, cache, options.first_pass, options.text_edits, memo)
    run.progress = options.progress
    try:
        with JobRunner(config, project, options.jobs, options.start_method) as runner:
            run.runner = runner
            run.run()
            outcomes = run.outcomes()
            if options.fix:
                outcomes = run.fix(outcomes, unsafe=options.unsafe, only=options.fix_only)
    finally:
        options.progress.clear()
    return ProjectResult(notebooks.restore(outcomes), run.parsed)


def lint_sources(
    sources: dict[str, bytes],
    config: Config,
    options: RunOptions,
    report_error: Callable[[str], None],
    report_notice: Callable[[str], None] = lambda _: None,
) -> ProjectResult:
    result = lint_project(sources, config, options)
    report_outcomes(result.outcomes, report_error, report_notice)
    return result


def report_outcomes(
    outcomes: list[Outcome],
    report_error: Callable[[str], None],
    report_notice: Callable[[str], None],
) -> None:
    for outcome in outcomes:
        if outcome.notice:
            report_notice(outcome.notice)
        if outcome.error:
            report_error(outcome.error)
