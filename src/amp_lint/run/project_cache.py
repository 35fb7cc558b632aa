"""What a project's runs keep in the result cache, and where that cache is."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from amp_lint.analysis.project.index import ClassAssumption, EntryContext
from amp_lint.findings import Finding
from amp_lint.run.cache import DEFAULT_DIRECTORY
from amp_lint.run.cache_codec import cached_type
from amp_lint.run.runner import Job, Outcome
from amp_lint.settings.config import Config


def default_cache_directory(config: Config) -> Path:
    return Path(config.root) / (config.cache_dir or DEFAULT_DIRECTORY)


def cache_directory(
    config: Config, *, disabled: bool = False, given: str | None = None
) -> Path | None:
    """`given` (--cache-dir), else AMP_LINT_CACHE_DIR, else the default; None when `disabled`
    (--no-cache) or AMP_LINT_NO_CACHE is set."""
    if disabled or os.environ.get("AMP_LINT_NO_CACHE"):
        return None
    if given is not None:
        return Path(given)
    if os.environ.get("AMP_LINT_CACHE_DIR"):
        return Path(os.environ["AMP_LINT_CACHE_DIR"])
    return default_cache_directory(config)


@cached_type
@dataclass(frozen=True)
class CachedResult:
    """An Outcome without the source it was computed from (the key holds its digest)."""

    remaining: tuple[Finding, ...]
    outgoing: tuple[EntryContext, ...]
    assumptions: tuple[ClassAssumption, ...]
    parsed: bool
    dependencies: tuple[tuple[str, str], ...]  # (path, digest of its source)
    notice: str | None = None
    suppressed: tuple[Finding, ...] = ()
    held_back: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, outcome: Outcome, dependencies: tuple[tuple[str, str], ...]) -> CachedResult:
        return cls(
            tuple(outcome.remaining),
            tuple(outcome.outgoing),
            tuple(outcome.assumptions),
            outcome.parsed,
            dependencies,
            outcome.notice,
            tuple(outcome.suppressed),
            tuple(outcome.held_back),
        )

    def outcome(self, job: Job) -> Outcome:
        return Outcome(
            job.path,
            job.source,
            remaining=list(self.remaining),
            outgoing=list(self.outgoing),
            assumptions=list(self.assumptions),
            parsed=self.parsed,
            dependencies=[path for path, _ in self.dependencies],
            notice=self.notice,
            suppressed=list(self.suppressed),
            held_back=list(self.held_back),
        )
