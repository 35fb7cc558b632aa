"""The language server's view of a workspace: the files under its folders as last read from
disk, overlaid by the editor's open documents, linted as `amp-lint check FOLDER` lints them.

Each group of files under one config file is its own project (settings_discovery.py), with
the same result cache as the command line. A run lints every file again; what makes that
cheap after an edit is the cache (a file's result is reused while it and every file its
analysis read are unchanged, so an edit re-analyses the edited file and the files whose
findings depended on it) and a ProjectMemo per project (facts about unchanged files). A
file's bytes object is kept while its text is unchanged, which is how the memo knows.

No pygls here: the server (server.py) takes snapshots on its event loop and lints them in a
worker thread.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from amp_lint.analysis.project.memo import ProjectMemo
from amp_lint.findings import Finding
from amp_lint.run.project_cache import cache_directory
from amp_lint.run.project_run import RunOptions, lint_project
from amp_lint.run.warm_run import read_sources
from amp_lint.settings.discovery import ConfigResolver, Resolved
from amp_lint.sources.files import LINTED_SUFFIXES, discover_python_files
from amp_lint.sources.gitignore import ignores_named_path


@dataclass(frozen=True)
class FileResult:
    """What the last run found in one file."""

    findings: tuple[Finding, ...] = ()
    error: str | None = None  # the file could not be analysed (it does not parse)
    notice: str | None = None  # analysed in part or not at all (too large)
    fixed_source: bytes | None = None  # from a fix run: the file with its fixes applied


@dataclass(frozen=True)
class Snapshot:
    """What one run sees: each project's files and their bytes, and which of them are the
    editor's unsaved text rather than the disk's."""

    projects: tuple[tuple[Resolved, dict[str, bytes]], ...]
    unsaved: frozenset[str]


@dataclass
class WorkspaceProjects:
    folders: list[Path]
    # Where messages about the workspace go (a folder that cannot be read, a bad config).
    report: Callable[[str], None] = lambda _: None
    disk: dict[str, bytes] = field(default_factory=dict)
    documents: dict[str, bytes] = field(default_factory=dict)
    _resolver: ConfigResolver | None = None
    _memos: dict[Path | None, ProjectMemo] = field(default_factory=dict)
    _lintable: dict[str, bool] = field(default_factory=dict)
    _reported: set[str] = field(default_factory=set)

    @property
    def resolver(self) -> ConfigResolver:
        if self._resolver is None:
            self._resolver = ConfigResolver(self.folders[0] if self.folders else Path.cwd())
        return self._resolver

    def load_disk(self) -> None:
        """Discover and read the folders' files again (at start, and when a config file or
        the set of files changed). Bytes equal to those held are kept as the same object."""
        self._resolver = None  # config files may have changed
        self._lintable.clear()
        self._reported.clear()
        discovery = discover_python_files(self.folders, self.resolver)
        for message in discovery.errors:
            self.report(message)
        read = read_sources(discovery, self.report, self.report)
        self.disk = {path: _same(self.disk.get(path), source) for path, source in read.items()}

    def reread(self, path: str) -> None:
        """A file saved or changed on disk: read it again; one deleted is dropped."""
        path = _normal(path)
        try:
            with open(path, "rb") as file:
                source = file.read()
        except OSError:
            self.disk.pop(path, None)
            return
        if path in self.disk or self._is_lintable(path):
            self.disk[path] = _same(self.disk.get(path), source)

    def open(self, path: str, source: bytes) -> None:
        path = _normal(path)
        self.documents[path] = _same(self.documents.get(path), source)

    def close(self, path: str) -> None:
        self.documents.pop(_normal(path), None)

    def snapshot(self) -> Snapshot:
        """The current files, grouped into projects by the config that applies to each."""
        paths = list(self.disk)
        paths += [
            path for path in self.documents if path not in self.disk and self._is_lintable(path)
        ]
        groups: dict[Path | None, tuple[Resolved, dict[str, bytes]]] = {}
        for path in paths:
            resolved = self.resolver.resolve_file(Path(path))
            if resolved.error is not None:
                self._report_once(f"{resolved.error} (its files are not linted)")
                continue
            source = self.documents.get(path)
            if source is None:
                source = self.disk[path]
            groups.setdefault(resolved.source, (resolved, {}))[1][path] = source
        unsaved = frozenset(
            path for path, text in self.documents.items() if self.disk.get(path) != text
        )
        return Snapshot(tuple(groups.values()), unsaved)

    def lint(
        self,
        snapshot: Snapshot,
        *,
        fix: str | None = None,
        unsafe: bool = False,
        jobs: int | None = None,
    ) -> dict[str, FileResult]:
        """Every file's result; with `fix`, that file's fixed source too (safe fixes only,
        unless `unsafe`). Runs in the server's worker thread."""
        results: dict[str, FileResult] = {}
        for resolved, sources in snapshot.projects:
            if fix is not None and fix not in sources:
                continue
            options = RunOptions(
                fix=fix is not None,
                unsafe=unsafe,
                fix_only=frozenset([fix]) if fix is not None else None,
                cache_directory=cache_directory(resolved.config),
                text_edits=True,
                jobs=jobs,
                unsaved=snapshot.unsaved,
                # Not fork: the server reads stdin in another thread (runner.JobRunner).
                start_method="spawn",
            )
            memo = self._memos.setdefault(resolved.source, ProjectMemo())
            outcomes = lint_project(sources, resolved.config, options, memo).outcomes
            results.update(dict.fromkeys(sources, FileResult()))
            for outcome in outcomes:
                findings = tuple(self._as_shown(finding) for finding in outcome.remaining)
                results[outcome.path] = FileResult(
                    findings, outcome.error, outcome.notice, outcome.fixed_source
                )
        return results

    def _as_shown(self, finding: Finding) -> Finding:
        """The finding with the paths its message names (a call chain, another file's
        definition) relative to the workspace folder, as `amp-lint check` prints them
        relative to where it runs; the editor shows the message in hover and problems."""
        texts = [finding.message, finding.summary]
        for folder in sorted(self.folders, key=lambda path: len(str(path)), reverse=True):
            prefix = f"{folder}{os.sep}"
            texts = [text.replace(prefix, "") for text in texts]
        if texts == [finding.message, finding.summary]:
            return finding
        return replace(finding, message=texts[0], summary=texts[1])

    def _report_once(self, message: str) -> None:
        """A bad config file is named once, not after every keystroke."""
        if message not in self._reported:
            self._reported.add(message)
            self.report(message)

    def _is_lintable(self, path: str) -> bool:
        """A file outside what discovery found (an open document, a new file): linted
        unless excluded by its settings' globs or, with respect-gitignore, by git."""
        known = self._lintable.get(path)
        if known is None:
            known = self._lintable[path] = self._decide_lintable(path)
        return known

    def _decide_lintable(self, path: str) -> bool:
        if not path.endswith(LINTED_SUFFIXES):
            return False
        resolved = self.resolver.resolve_file(Path(path))
        if resolved.error is not None:
            self._report_once(f"{resolved.error} (its files are not linted)")
            return False
        config = resolved.config
        if config.is_excluded(path):
            return False
        return not (config.respect_gitignore and ignores_named_path(Path(path)))


def _same(held: bytes | None, read: bytes) -> bytes:
    """`held` if it has the same bytes: the memo knows unchanged files by identity."""
    return held if held is not None and held == read else read


def _normal(path: str) -> str:
    return os.path.normpath(os.path.abspath(path))
