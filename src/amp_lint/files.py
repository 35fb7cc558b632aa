"""Finding the files to lint, skipping the ones that cannot have findings, writing fixes back."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from amp_lint.config import Config

PYTHON_SUFFIXES = (".py", ".pyi")

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


def discover_python_files(paths: Iterable[Path], config: Config) -> Discovery:
    """Python files named by `paths`: files as given, directories walked recursively.

    Config `exclude` globs apply to both, so that pre-commit, which names every file, honours
    them; the built-in skipped directories only apply while walking. Files are listed once,
    directories' contents in sorted order.
    """
    discovery = Discovery()
    seen: set[object] = set()
    for path in paths:
        if path.is_dir():
            candidates: Iterable[Path] = _walk(path, config)
        elif path.exists():
            candidates = [] if _is_excluded(path, config) else [path]
        else:
            discovery.errors.append(f"{path}: no such file or directory")
            continue
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


def _walk(directory: Path, config: Config) -> Iterator[Path]:
    for parent, dir_names, file_names in os.walk(directory):
        parent_path = Path(parent)
        # Pruning in place stops os.walk from descending; sorting makes the order stable.
        dir_names[:] = sorted(
            name for name in dir_names if not _is_skipped_directory(parent_path / name, config)
        )
        for name in sorted(file_names):
            if name.endswith(PYTHON_SUFFIXES) and name not in PYTHON_SUFFIXES:
                file_path = parent_path / name
                if not _is_excluded(file_path, config):
                    yield file_path


def _is_skipped_directory(directory: Path, config: Config) -> bool:
    name = directory.name
    return (
        name in SKIPPED_DIRECTORY_NAMES
        or name.endswith(SKIPPED_DIRECTORY_SUFFIXES)
        or (directory / "pyvenv.cfg").is_file()
        or _is_excluded(directory, config)
    )


def _is_excluded(path: Path, config: Config) -> bool:
    return bool(config.exclude) and config.is_excluded(str(path))


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


def write_atomically(path: Path, data: bytes) -> None:
    """Replace the file's contents so that readers see the old or the new bytes, never half.

    The temporary file lives in the same directory (os.replace cannot cross file systems) and
    gets the original permission bits. A symlink is followed, so the link itself survives.
    """
    target = path.resolve()
    mode = stat.S_IMODE(target.stat().st_mode)
    descriptor, temporary_name = tempfile.mkstemp(
        dir=target.parent, prefix=f".{target.name}.", suffix=".amp-lint.tmp"
    )
    try:
        with os.fdopen(descriptor, "wb") as temporary:
            temporary.write(data)
            temporary.flush()
            os.fsync(temporary.fileno())
        os.chmod(temporary_name, mode)
        os.replace(temporary_name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary_name)
        raise
    _fsync_directory(target.parent)


def _fsync_directory(directory: Path) -> None:
    """Make the rename durable; not possible (nor needed) on every platform."""
    with contextlib.suppress(OSError, AttributeError):
        descriptor = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
