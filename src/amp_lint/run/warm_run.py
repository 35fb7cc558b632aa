"""Linting the files under the given paths, knowing which changed without reading them: a
warm run reads nothing.

After a run with the cache on, the index records each linted file's stat signature (size,
modification and change times, inode, device) beside the digest of its bytes, and the whole
run's result is stored under a key made of the configuration and every file's path and
digest. The next run takes one `stat()` per file: when every signature matches, that key is
known without reading a byte, and an unchanged project's result is one cache read away, as
in ruff. A file whose signature changed is read and digested again, and only then.

A file modified in the last seconds before the index is written is left out of it: on a
file system with coarse timestamps it could be edited again within the same tick, size
unchanged, and look untouched (git's "racily clean" entries).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from amp_lint.findings import Finding
from amp_lint.formats.text import plural
from amp_lint.run.cache import ResultCache, digest
from amp_lint.run.cache_codec import cached_type
from amp_lint.run.project_run import ProjectResult, RunOptions, lint_sources, report_outcomes
from amp_lint.run.run_summary import RunSummary, summarise
from amp_lint.run.runner import Outcome
from amp_lint.settings.config import Config
from amp_lint.settings.discovery import ConfigResolver, Resolved, describe, group_files
from amp_lint.sources.files import Discovery, UnreadableSource, discover_python_files, read_source

# Files modified this recently (nanoseconds) are not trusted by their signature.
_RACY_WINDOW_NS = 2_000_000_000

Signature = tuple[int, int, int, int, int]


def signature(status: os.stat_result) -> Signature:
    return (status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino, status.st_dev)


@cached_type
@dataclass
class SourceIndex:
    """Path -> (stat signature, digest of the bytes), as of the last run that read them."""

    entries: dict[str, tuple[Signature, str]] = field(default_factory=dict)

    @classmethod
    def load(cls, cache: ResultCache, key: str) -> SourceIndex:
        stored = cache.get(key)
        if isinstance(stored, SourceIndex) and isinstance(stored.entries, dict):
            return stored
        return cls()

    def digest(self, path: str, status: os.stat_result | None) -> str | None:
        """The digest of the file's bytes if it has not changed since they were read."""
        entry = self.entries.get(path)
        if entry is None or status is None or entry[0] != signature(status):
            return None
        return entry[1]

    def record(self, path: str, status: os.stat_result | None, source_digest: str) -> None:
        if status is None or time.time_ns() - status.st_mtime_ns < _RACY_WINDOW_NS:
            self.entries.pop(path, None)
        else:
            self.entries[path] = (signature(status), source_digest)

    def save(self, cache: ResultCache, key: str, paths: set[str]) -> None:
        """Kept to the files of this run, so that the index cannot grow without bound."""
        self.entries = {path: entry for path, entry in self.entries.items() if path in paths}
        cache.put(key, self)


def index_key(arguments: list[str], settings: Path | None = None) -> str:
    """One index per set of command-line paths (from this directory) and config file, so
    that runs on different projects sharing a cache directory keep theirs."""
    return digest("source-index", os.getcwd(), str(settings), *arguments)


def run_key(fingerprint: str, digests: list[tuple[str, str]]) -> str:
    """Everything a run's result depends on: the files, in order, by path and content, and
    the fingerprint of the configuration and options."""
    # "2": runs remembered before they had a summary are not found.
    return digest("run", "2", fingerprint, *(f"{path}\0{source}" for path, source in digests))


def lint_paths(
    paths: list[str],
    settings: Config | ConfigResolver,
    options: RunOptions,
    report_error: Callable[[str], None],
    report_notice: Callable[[str], None] = lambda _: None,
    *,
    cache_directory_for: Callable[[Config], Path | None] | None = None,
    verbose: Callable[[str], None] = lambda _: None,
) -> ProjectResult:
    """Discover, read and lint the files under `paths`, each group of files under the same
    config file as one project (settings_discovery.py). With the cache on and no fixes asked
    for, an unchanged project's result comes from the last run without reading any file.

    `cache_directory_for` gives each group's cache directory from its settings (default:
    `options.cache_directory` for all); `verbose` is told what was found and done."""
    started = time.perf_counter()
    resolver = settings if isinstance(settings, ConfigResolver) else ConfigResolver.fixed(settings)
    discovery = discover_python_files([Path(path) for path in paths], resolver)
    for message in discovery.errors:
        report_error(message)
    verbose(f"found {plural(len(discovery.files), 'file')}; {len(discovery.excluded)} excluded")
    result = ProjectResult([], summary=RunSummary(excluded=len(discovery.excluded)))
    for group in group_files(discovery.files, resolver):
        where = describe(group.resolved)
        verbose(f"settings from {where} for {_extent(group.files)}")
        if group.resolved.error is not None:
            report_error(f"{group.resolved.error} ({plural(len(group.files), 'file')} not linted)")
            result.summary += RunSummary(len(group.files), not_linted_for_config=len(group.files))
            continue
        cache_directory = (
            cache_directory_for(group.resolved.config)
            if cache_directory_for is not None
            else options.cache_directory
        )
        group_result = _lint_group(
            paths,
            Discovery(group.files, stats=discovery.stats),
            group.resolved,
            replace(options, cache_directory=cache_directory),
            _Reports(report_error, report_notice, _prefixed(verbose, where)),
        )
        result.outcomes += group_result.outcomes
        result.parsed += group_result.parsed
        result.summary += group_result.summary
    _say_totals(verbose, result.summary, started)
    return result


def _say_totals(verbose: Callable[[str], None], summary: RunSummary, started: float) -> None:
    verbose(
        f"{plural(summary.files, 'file')}: {summary.analysed} with AMP vocabulary, "
        f"{summary.without_amp_code} skipped without it, {summary.unreadable} unreadable, "
        f"{summary.not_linted_for_config} under a bad config"
    )
    verbose(f"done in {time.perf_counter() - started:.2f} s")


def _prefixed(verbose: Callable[[str], None], prefix: str) -> Callable[[str], None]:
    return lambda message: verbose(f"{prefix}: {message}")


@dataclass(frozen=True)
class _Reports:
    error: Callable[[str], None]
    notice: Callable[[str], None]
    verbose: Callable[[str], None]


def _extent(files: list[Path]) -> str:
    """`N files under DIR`, DIR the deepest directory holding them all."""
    try:
        common = os.path.commonpath([os.path.abspath(path.parent) for path in files])
    except ValueError:  # on different drives
        common = "several directories"
    return f"{plural(len(files), 'file')} under {common}"


def _lint_group(
    paths: list[str],
    discovery: Discovery,
    resolved: Resolved,
    options: RunOptions,
    reports: _Reports,
) -> ProjectResult:
    config = resolved.config
    cache = ResultCache(options.cache_directory) if options.cache_directory else None
    if cache is None or options.fix:
        sources = read_sources(discovery, reports.error, reports.notice)
        return _linted(sources, discovery, config, options, reports)
    key = index_key(paths, resolved.source)
    index = SourceIndex.load(cache, key)
    fingerprint = digest(repr(config), str(options.first_pass), str(options.text_edits))
    known, changed = _current_digests(discovery, index)
    if known is not None:
        remembered = cache.get(run_key(fingerprint, known))
        if isinstance(remembered, RememberedRun):
            reports.verbose(f"cache hit: {len(changed)} of {len(known)} files read")
            _save_index(index, cache, key, discovery, known)
            result = remembered.result()
            report_outcomes(result.outcomes, reports.error, reports.notice)
            return result
    sources = read_sources(discovery, reports.error, reports.notice, changed)
    result = _linted(sources, discovery, config, options, reports)
    # Digests of the bytes this run analysed, not the index's: a file may have changed
    # between its stat and its read.
    digests = [(path, digest(source)) for path, source in sources.items()]
    _save_index(index, cache, key, discovery, digests)
    if not any(_internal(outcome.error) for outcome in result.outcomes):
        cache.put(run_key(fingerprint, digests), RememberedRun.of(result))
    cache.prune_if_due()  # after a run that analysed, never after a warm one
    return result


def _linted(
    sources: dict[str, bytes],
    discovery: Discovery,
    config: Config,
    options: RunOptions,
    reports: _Reports,
) -> ProjectResult:
    result = lint_sources(sources, config, options, reports.error, reports.notice)
    result.summary = summarise(len(discovery.files), sources, config)
    reports.verbose(f"{plural(len(sources), 'file')} read, {result.parsed} parsed")
    return result


def _current_digests(
    discovery: Discovery, index: SourceIndex
) -> tuple[list[tuple[str, str]] | None, dict[str, bytes]]:
    """(path, digest) of every file, reading only those whose stat changed since the index
    was written (their bytes are returned too); None if one cannot be read."""
    changed: dict[str, bytes] = {}
    known = []
    for path in discovery.files:
        name = str(path)
        source_digest = index.digest(name, discovery.stats.get(name))
        if source_digest is None:
            try:
                changed[name] = read_source(path)
            except OSError:  # the full run reports it
                return None, changed
            source_digest = digest(changed[name])
        known.append((name, source_digest))
    return known, changed


def _save_index(
    index: SourceIndex,
    cache: ResultCache,
    key: str,
    discovery: Discovery,
    digests: list[tuple[str, str]],
) -> None:
    for path, source_digest in digests:
        index.record(path, discovery.stats.get(path), source_digest)
    index.save(cache, key, {path for path, _ in digests})


def read_sources(
    discovery: Discovery,
    report_error: Callable[[str], None],
    report_notice: Callable[[str], None],
    already_read: dict[str, bytes] | None = None,
) -> dict[str, bytes]:
    """The bytes of each discovered file, in discovery order. A file too large to analyse is a
    warning, as one whose syntax tree would be too large is; any other read failure an error."""
    sources = {}
    for path in discovery.files:
        if already_read and str(path) in already_read:
            sources[str(path)] = already_read[str(path)]
            continue
        try:
            sources[str(path)] = read_source(path)
        except OSError as error:
            if isinstance(error, UnreadableSource) and error.too_large:
                report_notice(f"{path}: {error.strerror}")
            else:
                report_error(f"{path}: cannot read: {error.strerror or error}")
    return sources


@cached_type
@dataclass(frozen=True)
class RememberedRun:
    """A whole run's findings, errors and warnings, without the sources (their digests are
    the key)."""

    outcomes: tuple[
        tuple[str, tuple[Finding, ...], str | None, str | None, tuple[tuple[str, str], ...]], ...
    ]
    summary: RunSummary = field(default_factory=RunSummary)

    @classmethod
    def of(cls, result: ProjectResult) -> RememberedRun:
        outcomes = tuple(
            (o.path, tuple(o.remaining), o.error, o.notice, tuple(o.held_back))
            for o in result.outcomes
        )
        return cls(outcomes, result.summary)

    def result(self) -> ProjectResult:
        outcomes = [
            Outcome(
                path,
                b"",
                remaining=list(remaining),
                error=error,
                notice=notice,
                held_back=list(held_back),
            )
            for path, remaining, error, notice, held_back in self.outcomes
        ]
        return ProjectResult(outcomes, parsed=0, summary=self.summary)


def _internal(error: str | None) -> bool:
    """An internal error may be a bug fixed by the next version; it is never remembered."""
    return error is not None and "internal error" in error
