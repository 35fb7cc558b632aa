"""What git ignores, as ruff's `respect-gitignore` leaves it out of a directory walk.

Inside a git work tree (a `.git` directory or file at or above the walked directory), a path is
ignored by the last pattern matching it in, from the lowest precedence to the highest: git's
global excludes file, `.git/info/exclude`, then each `.gitignore` from the work tree's root
down to the path's directory, each read relative to its own directory. Negations (`!keep.py`)
and directory patterns (`outputs/`) work as in git; as in git, nothing under an ignored
directory is looked at, since the walk never enters it. Outside a work tree `.gitignore`
files mean nothing (ruff's walker requires a repository too). A nested repository (a
submodule) starts over with its own files.

Patterns are matched by the `pathspec` library's GitIgnoreSpec, which follows git's rules.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pathspec

GITIGNORE = ".gitignore"


@dataclass(frozen=True)
class _PatternFile:
    base: Path  # the directory its patterns are relative to
    spec: pathspec.GitIgnoreSpec


class IgnoreRules:
    """The ignore files that apply in one directory, lowest precedence first."""

    def __init__(self, directory: Path, files: tuple[_PatternFile, ...]) -> None:
        self.directory = directory
        self._files = files

    @classmethod
    def for_directory(cls, directory: Path) -> IgnoreRules | None:
        """The rules in force in `directory`, or None outside a git work tree."""
        directory = Path(os.path.abspath(directory))
        root = work_tree_root(directory)
        if root is None:
            return None
        rules = cls.for_work_tree(root)
        for level in _levels_below(root, directory):
            rules = rules.entering(level)
        return rules

    @classmethod
    def for_work_tree(cls, root: Path) -> IgnoreRules:
        files = [_read(_global_excludes_file(), root), _read(_info_exclude(root), root)]
        rules = cls(root, tuple(found for found in files if found is not None))
        return rules.entering(root, fresh=False)

    def entering(self, directory: Path, *, fresh: bool = True) -> IgnoreRules:
        """The rules in a subdirectory: its own `.gitignore` added, or a new repository's."""
        if fresh and directory != self.directory and _is_work_tree_root(directory):
            return IgnoreRules.for_work_tree(directory)
        own = _read(directory / GITIGNORE, directory)
        files = self._files if own is None else (*self._files, own)
        return IgnoreRules(directory, files)

    def ignores(self, path: Path, *, is_directory: bool) -> bool:
        """Whether git would ignore `path` (absolute, inside the work tree)."""
        for pattern_file in reversed(self._files):
            try:
                relative = path.relative_to(pattern_file.base).as_posix()
            except ValueError:
                continue
            if is_directory:
                relative += "/"
            verdict = pattern_file.spec.check_file(relative).include
            if verdict is not None:
                return verdict
        return False


def work_tree_root(directory: Path) -> Path | None:
    for candidate in (directory, *directory.parents):
        if _is_work_tree_root(candidate):
            return candidate
    return None


def _is_work_tree_root(directory: Path) -> bool:
    try:
        return os.path.lexists(directory / ".git")
    except OSError:
        return False


def _levels_below(root: Path, directory: Path) -> list[Path]:
    """The directories from just below `root` down to `directory` itself."""
    levels = []
    current = directory
    while current != root and current != current.parent:
        levels.append(current)
        current = current.parent
    return levels[::-1]


def _info_exclude(root: Path) -> Path:
    git = root / ".git"
    if git.is_file():  # a linked work tree or a submodule: `gitdir: <path>`
        pointed = _read_text(git)
        if pointed.startswith("gitdir:"):
            git = root / pointed[len("gitdir:") :].strip()  # an absolute path stays absolute
            # Linked work trees share the main repository's info/exclude.
            common = _read_text(git / "commondir")
            if common:
                git = git / common
    return git / "info" / "exclude"


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="surrogateescape").strip()
    except (OSError, ValueError):
        return ""


def _global_excludes_file() -> Path:
    """git's default `core.excludesFile` ($XDG_CONFIG_HOME/git/ignore); a path configured in
    ~/.gitconfig instead is not read (that would mean parsing git's configuration)."""
    config_home = os.environ.get("XDG_CONFIG_HOME") or os.path.join(
        os.path.expanduser("~"), ".config"
    )
    return Path(config_home) / "git" / "ignore"


def _read(path: Path, base: Path) -> _PatternFile | None:
    """An ignore file's patterns; None if it is missing, empty or unreadable (as git
    treats an unreadable ignore file: it ignores nothing)."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as file:
            lines = file.read().splitlines()
    except (OSError, ValueError):
        return None
    patterns = [line for line in lines if line.strip() and not line.startswith("#")]
    if not patterns:
        return None
    return _PatternFile(base, pathspec.GitIgnoreSpec.from_lines(patterns))


class WalkFilter:
    """The ignore rules of a directory walk, read once per directory entered."""

    def __init__(self, root: Path, rules: IgnoreRules) -> None:
        self._rules = {Path(os.path.abspath(root)): rules}

    @classmethod
    def for_walk(cls, root: Path) -> WalkFilter | None:
        """None outside a work tree, or when `root` itself is ignored: a directory named on
        the command line is linted whole, as a named file is (with --force-exclude it is
        not walked at all)."""
        absolute = Path(os.path.abspath(root))
        if _is_work_tree_root(absolute):
            return cls(absolute, IgnoreRules.for_work_tree(absolute))
        parent_rules = IgnoreRules.for_directory(absolute.parent)
        if parent_rules is None or parent_rules.ignores(absolute, is_directory=True):
            return None
        return cls(absolute, parent_rules.entering(absolute))

    def ignores_directory(self, path: Path) -> bool:
        """Whether to leave the directory out; if not, its rules are read for the walk."""
        absolute = Path(os.path.abspath(path))
        rules = self._rules_of(absolute.parent)
        if rules is None:
            return False
        if rules.ignores(absolute, is_directory=True):
            return True
        self._rules[absolute] = rules.entering(absolute)
        return False

    def ignores_file(self, path: Path) -> bool:
        absolute = Path(os.path.abspath(path))
        rules = self._rules_of(absolute.parent)
        return rules is not None and rules.ignores(absolute, is_directory=False)

    def _rules_of(self, directory: Path) -> IgnoreRules | None:
        return self._rules.get(directory)


def ignores_named_path(path: Path) -> bool:
    """Whether git ignores a path named on the command line (for --force-exclude)."""
    absolute = Path(os.path.abspath(path))
    rules = IgnoreRules.for_directory(absolute.parent)
    return rules is not None and rules.ignores(absolute, is_directory=absolute.is_dir())
