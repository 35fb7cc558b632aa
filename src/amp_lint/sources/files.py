"""Finding the files to lint, skipping the ones that cannot have findings, reading them."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

from amp_lint.reading import UnreadableFile, read_regular_file
from amp_lint.settings.config import Config
from amp_lint.sources.gitignore import WalkFilter, ignores_named_path

PYTHON_SUFFIXES = (".py", ".pyi")
# Walked as well: a Jupyter notebook is linted as the module of its code cells (notebooks.py).
LINTED_SUFFIXES = (*PYTHON_SUFFIXES, ".ipynb")

# Directories never walked into when a directory is given (an explicitly named file inside one
# is still linted). Virtual environments with other names are recognised by their pyvenv.cfg.
SKIPPED_DIRECTORY_NAMES = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        "__pycache__",
        "build",
        "dist",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".ipynb_checkpoints",  # Jupyter's autosaved copies of notebooks
        "node_modules",
        "site-packages",
    }
)
SKIPPED_DIRECTORY_SUFFIXES = (".egg-info",)

# Every rule needs one of these in the source: an autocast region, a GradScaler (which makes
# forward methods run under autocast), a custom_fwd/custom_bwd decorator, a half-precision
# dtype or conversion (`.half()`, `torch.half`; "float16" covers bfloat16), or a deprecated
# AMP namespace. A bare "half" would also admit every docstring that says "half precision"
# (449 instead of 206 of transformers' 2,860 files).
AMP_VOCABULARY = (
    b"autocast",
    b"GradScaler",
    b"custom_fwd",
    b"custom_bwd",
    b".half(",
    b"torch.half",
    b"float16",
    b"cuda.amp",
    b"cpu.amp",
    b"torch.amp",
    # A scaler handed in by the caller is known only by its use (`grad_scaler.step(opt)`).
    b"scaler.",
)


@dataclass
class Discovery:
    """The files to lint, in order, and one message per path argument that does not exist."""

    files: list[Path] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # os.stat of each file (following symlinks), where it could be taken: the warm-run index
    # (warm_run.py) tells unchanged files by it without reading them.
    stats: dict[str, os.stat_result] = field(default_factory=dict)
    # Files and directories left out by an `exclude` glob (a directory's files not counted).
    excluded: list[Path] = field(default_factory=list)


# One Config for every path, or a function giving the Config that applies in a directory
# (settings_discovery.ConfigResolver: each file's nearest pyproject.toml).
Settings = Union[Config, Callable[[Path], Config]]


def discover_python_files(paths: Iterable[Path], config: Settings) -> Discovery:
    """Python files named by `paths`: files as given, directories walked recursively.

    Config `exclude` globs apply to both, so that pre-commit, which names every file, honours
    them; the built-in skipped directories only apply while walking. Files are listed once,
    directories' contents in sorted order. A path that cannot be used (missing, a symlink
    loop, a directory that cannot be listed) gives one message in `errors`; the rest go on.
    """
    discovery = Discovery()
    seen: set[object] = set()
    for path in paths:
        problem = _unusable_path(path)
        if problem is not None:
            discovery.errors.append(f"{path}: {problem}")
            continue
        if _is_forced_out(path, config):
            continue
        if path.is_dir():
            candidates: Iterable[Path] = _walk(path, config, discovery)
        else:
            candidates = [] if _is_excluded(path, config, discovery) else [path]
        for candidate in candidates:
            try:
                status = os.stat(candidate)
            except OSError:  # reported when it is read
                identity: object = os.path.realpath(candidate)
            else:
                identity = (status.st_dev, status.st_ino)
                discovery.stats[str(candidate)] = status
            if identity not in seen:
                seen.add(identity)
                discovery.files.append(candidate)
    return discovery


def _unusable_path(path: Path) -> str | None:
    """Why a path named on the command line cannot be linted, or None."""
    try:
        status = os.stat(path)
    except OSError as error:
        if error.errno == errno.ELOOP:
            return "symlink loop"
        if error.errno in (errno.ENOENT, errno.ENOTDIR):
            return "no such file or directory"
        return error.strerror or str(error)
    if stat.S_ISDIR(status.st_mode) and not os.access(path, os.R_OK | os.X_OK):
        return "cannot list directory: Permission denied"
    return None


def _walk(directory: Path, config: Settings, discovery: Discovery) -> Iterator[Path]:
    def report(error: OSError) -> None:
        name = error.filename if error.filename is not None else directory
        discovery.errors.append(f"{name}: cannot list directory: {error.strerror or error}")

    git = _gitignore_filter(directory, config)
    # os.walk does not follow symlinked directories, so a symlink loop is never entered; a
    # symlink loop named `*.py` is listed as a file and reported when it is read.
    for parent, dir_names, file_names in os.walk(directory, onerror=report):
        parent_path = Path(parent)
        # Pruning in place stops os.walk from descending; sorting makes the order stable.
        dir_names[:] = sorted(
            name
            for name in dir_names
            if not _is_skipped_directory(parent_path / name, config, discovery)
            and not (git and git.ignores_directory(parent_path / name))
        )
        for name in sorted(file_names):
            if name.endswith(LINTED_SUFFIXES) and name not in LINTED_SUFFIXES:
                file_path = parent_path / name
                if not _is_excluded(file_path, config, discovery) and not (
                    git and git.ignores_file(file_path)
                ):
                    yield file_path


def _gitignore_filter(directory: Path, config: Settings) -> WalkFilter | None:
    settings = config(directory) if callable(config) else config
    return WalkFilter.for_walk(directory) if settings.respect_gitignore else None


def _is_forced_out(path: Path, config: Settings) -> bool:
    """With force-exclude, a path named on the command line that git ignores is left out, as
    ruff leaves it out (`exclude` globs apply to named files in any case)."""
    settings = config(path.parent) if callable(config) else config
    return settings.force_exclude and settings.respect_gitignore and ignores_named_path(path)


def _is_skipped_directory(directory: Path, config: Settings, discovery: Discovery) -> bool:
    name = directory.name
    return (
        name in SKIPPED_DIRECTORY_NAMES
        or name.endswith(SKIPPED_DIRECTORY_SUFFIXES)
        or _is_virtual_environment(directory)
        or _is_excluded(directory, config, discovery)
    )


def _is_virtual_environment(directory: Path) -> bool:
    try:
        return (directory / "pyvenv.cfg").is_file()
    except OSError:  # a directory that cannot be searched: the walk reports it
        return False


def _is_excluded(path: Path, config: Settings, discovery: Discovery) -> bool:
    """Whether an `exclude` glob of the settings that apply where the path is (those of its
    directory's nearest config, as in ruff) leaves it out; recorded in `discovery`."""
    settings = config(path.parent) if callable(config) else config
    excluded = bool(settings.exclude or settings.extend_exclude) and settings.is_excluded(str(path))
    if excluded:
        discovery.excluded.append(path)
    return excluded


# Framework settings that enter autocast for the user: Lightning's `precision=`, accelerate's
# `mixed_precision=`, Hugging Face's `fp16=True` / `bf16=True`.
FRAMEWORK_VOCABULARY = (b"precision", b"fp16", b"bf16")
# Library mode analyses forwards, framework steps, public functions and plain classes: a
# half value there comes from a layer or op autocast runs in half (first_pass.LIBRARY_WORDS).
LIBRARY_VOCABULARY = (
    b"forward",
    b"_step",
    b"compute_loss",
    b"mm",
    b"einsum",
    b"inear",
    b"onv",
    b" @ ",
)
# Configured framework settings name these classes.
_CONFIGURED_FRAMEWORK_CLASSES = (b"LightningModule", b"Trainer", b"PreTrainedModel")


def round_zero_vocabulary(config: Config) -> tuple[bytes, ...]:
    """Files analysed from their own roots must contain one of these words."""
    words = AMP_VOCABULARY + FRAMEWORK_VOCABULARY + _configured_words(config)
    if config.assume_autocast is not None:
        words += LIBRARY_VOCABULARY
    if config.lightning_precision or config.transformers_trainer_precision:
        words += _CONFIGURED_FRAMEWORK_CLASSES
    return words


def _configured_words(config: Config) -> tuple[bytes, ...]:
    """Configured callables and autocast functions, by their last dotted component, which
    is how they appear at call sites."""
    names = (*config.autocast_functions, *config.fp32_only_callables)
    return tuple(word for word in (name.rsplit(".", 1)[-1].encode() for name in names) if word)


def has_amp_vocabulary(source: bytes, config: Config) -> bool:
    """Whether the source mentions anything a rule needs; files without it have no findings.

    A byte search, so it costs far less than parsing.
    """
    return any(word in source for word in round_zero_vocabulary(config))


# No Python file worth linting is this large (the largest of 13,039 files in 28 real packages
# is 339 KB, torch 2.13's is 1.4 MB); engine.py's syntax-tree bound already refuses files of a
# few MB.
# The cap keeps a `*.py` link to /dev/zero or a multi-gigabyte data file out of memory.
MAX_SOURCE_BYTES = 16 * 1024 * 1024


UnreadableSource = UnreadableFile


def read_source(path: Path | str) -> bytes:
    """A source file's bytes, refusing anything that is not a regular file of at most
    MAX_SOURCE_BYTES: a FIFO named `*.py` would block forever, a device would never end.

    Raises OSError (UnreadableSource for those two refusals).
    """
    try:
        return read_regular_file(path, MAX_SOURCE_BYTES)
    except UnreadableFile as error:
        if not error.too_large:
            raise
        raise UnreadableSource(
            f"not analysed: larger than {MAX_SOURCE_BYTES // (1024 * 1024)} MB", too_large=True
        ) from None


# Writing fixes back
#
