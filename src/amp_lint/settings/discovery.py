"""Which `[tool.amp-lint]` settings apply to each linted file, as ruff decides it.

The settings of a file are those of the nearest `pyproject.toml` with a `[tool.amp-lint]`
table at or above the file (not the current directory), so `amp-lint proj` and
`cd proj && amp-lint .` lint alike, and a nested project keeps its own settings.
`--config FILE` names the settings for every file instead. With no config at all, the
defaults apply, rooted at the current directory. Command-line flags (`--select`,
`--assume-autocast`, ...) are applied on top of each file's settings.

Files whose settings differ are linted as separate projects, one per config file
(warm_run.py): the project's root is the config's directory, its globs resolve against it,
its analysis settings apply to all of its files, and its result is cached under its own key.
Calls from one such project into another are therefore not followed: a nested
`pyproject.toml` marks a separate project, as it does for ruff, and one file analysed under two
sets of analysis settings would have no single answer.

A config file that cannot be read, or holds a bad key, is reported once (naming the file and
key), and the files it governs are not linted; the others are.

Lookups are memoized per directory, so a tree of thousands of files costs one `stat` per
directory and one read per config file.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from amp_lint.settings.config import (
    PYPROJECT,
    Config,
    load_config,
    read_amp_lint_table,
)
from amp_lint.settings.errors import ConfigError
from amp_lint.settings.torch_target import declared_floor_at, oldest_floor, project_root
from amp_lint.settings.torch_version import TorchVersion

Floor = tuple[TorchVersion, str]


@dataclass(frozen=True)
class Resolved:
    """The settings of one directory and where they come from."""

    config: Config
    source: Path | None  # the config file; None: the defaults
    error: str | None = None  # why `source` could not be used; its files are not linted


class ConfigResolver:
    """The settings that apply in each directory (called with a directory, it gives them)."""

    def __init__(
        self,
        cwd: Path,
        *,
        config_file: Path | None = None,
        load: Callable[[Path | None], Config] | None = None,
    ) -> None:
        """`load` gives the settings of a config file, or the defaults for None, with the
        command line's flags applied (config.load_config). Raises ConfigError if
        `config_file` is given and unusable: it governs every file."""
        self.cwd = Path(os.path.abspath(cwd))
        self.load = load or self._load_plain
        self._fixed: Resolved | None = None
        if config_file is not None:
            self._fixed = Resolved(self.load(config_file), Path(os.path.abspath(config_file)))
        self._nearest: dict[Path, Path | None] = {}
        # Each pyproject.toml looked at: its table (None: it has none) or why it is unusable.
        self._tables: dict[Path, dict[str, object] | ConfigError | None] = {}
        self._loaded: dict[Path | None, Resolved] = {}
        self._floors: dict[Path, Floor | None] = {}

    @classmethod
    def fixed(cls, config: Config, source: Path | None = None) -> ConfigResolver:
        """A resolver giving `config` for every directory."""
        resolver = cls(Path(config.root))
        resolver._fixed = Resolved(config, source)
        return resolver

    def __call__(self, directory: Path) -> Config:
        return self.resolve(directory).config

    def resolve(self, directory: Path) -> Resolved:
        """The settings for files in `directory`."""
        return self.resolve_directories([directory])

    def resolve_directories(self, directories: Iterable[Path]) -> Resolved:
        """The settings for files in `directories`, which share one config file (or none).
        Without one, the torch floor is the oldest that the files' own projects declare, so
        `amp-lint pkg/src/x.py` run from elsewhere reads pkg's requirements as
        `cd pkg && amp-lint src/x.py` does."""
        if self._fixed is not None:
            return self._fixed
        absolute = [Path(os.path.abspath(directory)) for directory in directories]
        source = self._nearest_config(absolute[0])
        if source not in self._loaded:
            self._loaded[source] = self._load(source)
        resolved = self._loaded[source]
        if source is not None or resolved.config.torch_version_source == "--torch-version":
            return resolved
        floor = oldest_floor([f for d in dict.fromkeys(absolute) if (f := self._floor(d))])
        if floor is None:
            return resolved
        config = replace(resolved.config, torch_version=floor[0], torch_version_source=floor[1])
        return replace(resolved, config=config)

    def _floor(self, directory: Path) -> Floor | None:
        """The torch floor declared by the project `directory` belongs to, memoized."""
        if directory not in self._floors:
            root = project_root(directory)
            self._floors[directory] = declared_floor_at(root) if root is not None else None
        return self._floors[directory]

    def resolve_file(self, path: Path) -> Resolved:
        return self.resolve(Path(os.path.abspath(path)).parent)

    def _nearest_config(self, directory: Path) -> Path | None:
        """The nearest pyproject.toml with `[tool.amp-lint]` at or above `directory`; every
        directory passed on the way up is memoized with the answer."""
        passed = []
        found: Path | None = None
        for candidate_dir in (directory, *directory.parents):
            if candidate_dir in self._nearest:
                found = self._nearest[candidate_dir]
                break
            passed.append(candidate_dir)
            candidate = candidate_dir / PYPROJECT
            if self._has_table(candidate):
                found = candidate
                break
        for passed_dir in passed:
            self._nearest[passed_dir] = found
        return found

    def _has_table(self, candidate: Path) -> bool:
        """Whether the file exists and has the table. One that cannot be read or parsed counts
        as having it: its error is reported, instead of the file being passed over."""
        try:
            if not candidate.is_file():
                return False
        except OSError:  # a directory above that this user cannot search
            return False
        try:
            self._tables[candidate] = read_amp_lint_table(candidate)
        except ConfigError as error:
            self._tables[candidate] = error
        return self._tables[candidate] is not None

    def _load_plain(self, source: Path | None) -> Config:
        return load_config(self.cwd, config_file=source, discover=False)

    def _load(self, source: Path | None) -> Resolved:
        if source is None:
            return Resolved(self.load(None), None)
        table = self._tables[source]
        try:
            if isinstance(table, ConfigError):
                raise table
            return Resolved(self.load(source), source)
        except ConfigError as error:
            # Its files are not linted; this only serves the walk's excludes below it.
            return Resolved(Config(root=str(source.parent)), source, str(error))

    def configs_seen(self) -> list[Resolved]:
        """Every settings looked up so far, in the order first looked up."""
        return [self._fixed] if self._fixed is not None else list(self._loaded.values())


def describe(resolved: Resolved) -> str:
    """Where settings come from, for messages: the config file, or the defaults."""
    if resolved.source is None:
        return "defaults (no pyproject.toml with [tool.amp-lint])"
    return str(resolved.source)


@dataclass
class FileGroup:
    """Files under one settings, linted together as one project."""

    resolved: Resolved
    files: list[Path]


def group_files(files: Iterable[Path], resolver: ConfigResolver) -> list[FileGroup]:
    """The files by the settings that apply to them, groups in order of their first file,
    files in their order."""
    groups: dict[Path | None, FileGroup] = {}
    for path in files:
        resolved = resolver.resolve_file(path)
        group = groups.setdefault(resolved.source, FileGroup(resolved, []))
        group.files.append(path)
    for group in groups.values():
        if group.resolved.source is None:  # its torch floor: the oldest its files' projects declare
            group.resolved = resolver.resolve_directories(
                dict.fromkeys(Path(os.path.abspath(path)).parent for path in group.files)
            )
    return list(groups.values())
