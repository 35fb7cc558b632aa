"""Finding the files to lint, skipping the ones that cannot have findings, writing fixes back."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import tempfile
import time
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
        if path.is_dir():
            candidates: Iterable[Path] = _walk(path, config, discovery.errors)
        else:
            candidates = [] if _is_excluded(path, config) else [path]
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


def _walk(directory: Path, config: Config, errors: list[str]) -> Iterator[Path]:
    def report(error: OSError) -> None:
        name = error.filename if error.filename is not None else directory
        errors.append(f"{name}: cannot list directory: {error.strerror or error}")

    # os.walk does not follow symlinked directories, so a symlink loop is never entered; a
    # symlink loop named `*.py` is listed as a file and reported when it is read.
    for parent, dir_names, file_names in os.walk(directory, onerror=report):
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
        or _is_virtual_environment(directory)
        or _is_excluded(directory, config)
    )


def _is_virtual_environment(directory: Path) -> bool:
    try:
        return (directory / "pyvenv.cfg").is_file()
    except OSError:  # a directory that cannot be searched: the walk reports it
        return False


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


# No Python file worth linting is this large (the largest of 13,039 files in 28 real packages
# is 339 KB, torch 2.13's is 1.4 MB); engine.py's syntax-tree bound already refuses files of a
# few MB.
# The cap keeps a `*.py` link to /dev/zero or a multi-gigabyte data file out of memory.
MAX_SOURCE_BYTES = 16 * 1024 * 1024


class UnreadableSource(OSError):
    """A path that is not a regular file, or one past MAX_SOURCE_BYTES; `strerror` says which."""

    def __init__(self, reason: str, *, too_large: bool = False) -> None:
        super().__init__(errno.EINVAL, reason)
        self.too_large = too_large


def read_source(path: Path | str) -> bytes:
    """A source file's bytes, refusing anything that is not a regular file of at most
    MAX_SOURCE_BYTES: a FIFO named `*.py` would block forever, a device would never end.

    Raises OSError (UnreadableSource for those two refusals).
    """
    # Non-blocking, so that opening a FIFO returns at once instead of waiting for a writer.
    non_blocking = getattr(os, "O_NONBLOCK", 0)
    descriptor = os.open(path, os.O_RDONLY | non_blocking)
    with os.fdopen(descriptor, "rb") as file:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise UnreadableSource(f"not a regular file ({_file_kind(status.st_mode)})")
        if non_blocking:
            os.set_blocking(descriptor, True)
        data = file.read(MAX_SOURCE_BYTES + 1)
    if len(data) > MAX_SOURCE_BYTES:
        raise UnreadableSource(
            f"not analysed: larger than {MAX_SOURCE_BYTES // (1024 * 1024)} MB", too_large=True
        )
    return data


def _file_kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a file"


# Writing fixes back
#
# A fix replaces the file only if it still holds the bytes that were read, and only in ways
# the file's owner allowed: its own write permission (a rename needs only the directory's),
# its owner, group, mode and extended attributes (ACLs among them), and its other hard links.
# When a temporary copy cannot carry all of that, the bytes are written into the file itself,
# as vim's `backupcopy=auto` does.

TEMPORARY_SUFFIX = ".amp-lint.tmp"
# `.NAME.PID-XXXXXXXX.amp-lint.tmp` (mkstemp's eight random characters); older versions wrote
# `.NAME.XXXXXXXX.amp-lint.tmp`, without the pid.
_TEMPORARY_NAME = re.compile(
    r"\.(?P<name>.+)\.(?:(?P<pid>[0-9]+)-)?[a-z0-9_]{8}" + re.escape(TEMPORARY_SUFFIX) + r"\Z",
    re.DOTALL,
)
# A write takes milliseconds; a temporary file this old belongs to no live write even when
# its pid is alive (reused) or unknown.
STALE_AFTER_SECONDS = 3600.0
# A file whose run is not alive is left this long: a run on another machine or in another
# pid namespace sharing the directory may use the same pid.
DEAD_RUN_GRACE_SECONDS = 60.0


class WriteRefused(OSError):
    """The file was left as it is; `strerror` says why, in words for a one-line message."""

    def __init__(self, reason: str, code: int = errno.EPERM) -> None:
        super().__init__(code, reason)


class ChangedSinceRead(WriteRefused):
    """The file no longer holds the bytes the fixes were computed from."""

    def __init__(self) -> None:
        super().__init__("changed during the run, not fixed", errno.EAGAIN)


def write_atomically(path: Path, data: bytes, *, expected: bytes | None = None) -> None:
    """Replace the file's contents so that readers see the old or the new bytes, never half.

    With `expected`, the file is written only while it still holds those bytes (an edit saved
    during the run is never overwritten): ChangedSinceRead otherwise, also when it is gone.
    A file its user may not write is refused (WriteRefused), even in a directory they may
    write. The temporary file lives in the same directory (os.replace cannot cross file
    systems) and gets the file's mode, owner, group and extended attributes; a symlink is
    followed, so the link itself survives. A file with other hard links, or whose owner or
    attributes the copy cannot keep, is written in place instead (not atomic, but the file
    stays the same file). Raises OSError.
    """
    target = path.resolve()
    try:
        status = os.stat(target)
    except FileNotFoundError:
        if expected is not None:
            raise ChangedSinceRead() from None
        raise
    if not stat.S_ISREG(status.st_mode):
        raise WriteRefused("not a regular file", errno.EINVAL)
    # No write bit at all: read-only on purpose, which root, whom access() lets through,
    # respects as well.
    if not status.st_mode & 0o222:
        raise WriteRefused("the file is read-only", errno.EACCES)
    if not _writable(target):
        raise WriteRefused("Permission denied", errno.EACCES)
    if status.st_nlink > 1:
        _write_in_place(target, data, expected)
        return
    try:
        descriptor, temporary_name = tempfile.mkstemp(
            dir=target.parent, prefix=f".{target.name}.{os.getpid()}-", suffix=TEMPORARY_SUFFIX
        )
    except PermissionError:  # a writable file in a directory its user may not add to
        _write_in_place(target, data, expected)
        return
    replaced = False
    try:
        with os.fdopen(descriptor, "wb") as temporary:
            temporary.write(data)
            temporary.flush()
            kept = _copy_metadata(temporary.fileno(), temporary_name, target, status)
            if kept:
                os.fsync(temporary.fileno())
        # The last moment to see an edit saved during the run, just before the rename.
        if kept and expected is not None and not _holds(target, expected):
            raise ChangedSinceRead()
        if kept:
            os.replace(temporary_name, target)
            replaced = True
    except FileNotFoundError:
        if expected is not None and not os.path.lexists(target):
            raise ChangedSinceRead() from None  # removed meanwhile: not brought back
        raise
    finally:
        if not replaced:
            with contextlib.suppress(OSError):
                os.unlink(temporary_name)
    if replaced:
        _fsync_directory(target.parent)
    else:
        _write_in_place(target, data, expected)


def _writable(target: Path) -> bool:
    effective = os.access in os.supports_effective_ids
    return os.access(target, os.W_OK, effective_ids=effective)


def _holds(target: Path, expected: bytes) -> bool:
    try:
        with open(target, "rb") as current:
            return current.read(len(expected) + 1) == expected
    except FileNotFoundError:
        return False


def _copy_metadata(
    descriptor: int, temporary_name: str, target: Path, status: os.stat_result
) -> bool:
    """Give the temporary file the target's owner, group, extended attributes and mode, in
    that order (a change of owner clears set-id bits; a mode change rewrites an ACL's mask).
    False if one of them cannot be kept."""
    if hasattr(os, "fchown") and (status.st_uid, status.st_gid) != _owner(descriptor):
        try:
            os.fchown(descriptor, status.st_uid, status.st_gid)
        except PermissionError:
            return False
    if not _copy_extended_attributes(descriptor, target):
        return False
    mode = stat.S_IMODE(status.st_mode)
    if hasattr(os, "fchmod"):
        os.fchmod(descriptor, mode)
    else:  # Windows before Python 3.13
        os.chmod(temporary_name, mode)
    return True


def _owner(descriptor: int) -> tuple[int, int]:
    status = os.fstat(descriptor)
    return status.st_uid, status.st_gid


def _copy_extended_attributes(descriptor: int, target: Path) -> bool:
    if not hasattr(os, "listxattr"):
        return True
    try:
        names = os.listxattr(target)
    except OSError as error:
        if error.errno in (errno.ENOTSUP, errno.ENODATA):
            return True  # the file system keeps none
        raise
    for name in names:
        try:
            os.setxattr(descriptor, name, os.getxattr(target, name))
        except OSError as error:
            if error.errno == errno.ENODATA:  # removed meanwhile
                continue
            return False  # EPERM (a security.* or trusted.* name), ENOTSUP: cannot copy
    return True


def _write_in_place(target: Path, data: bytes, expected: bytes | None) -> None:
    """Overwrite the file through its own descriptor (its permission is checked by open).
    If writing fails part way, its old bytes are put back, which needs no more space."""
    with open(target, "r+b") as file:
        old = file.read()
        if expected is not None and old != expected:
            raise ChangedSinceRead()
        try:
            file.seek(0)
            file.write(data)
            file.truncate()
            file.flush()
            os.fsync(file.fileno())
        except OSError:
            with contextlib.suppress(OSError):
                file.seek(0)
                file.write(old)
                file.truncate()
                file.flush()
            raise


def remove_stale_temporary_files(directory: Path) -> list[Path]:
    """Remove the temporary files that interrupted runs of amp-lint left in `directory`: only
    names of amp-lint's own pattern, only regular files of this user (any, for root), only
    when the run that made one is not alive (by its pid) or the file is over an hour old.
    Returns the paths removed; a directory that cannot be listed is left alone."""
    removed: list[Path] = []
    now = time.time()
    euid = os.geteuid() if hasattr(os, "geteuid") else None
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        match = _TEMPORARY_NAME.match(entry.name)
        if match is None:
            continue
        try:
            status = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISREG(status.st_mode) or euid not in (None, 0, status.st_uid):
            continue
        age = now - status.st_mtime
        pid = match.group("pid")
        dead = pid is not None and not _process_alive(int(pid))
        if age > STALE_AFTER_SECONDS or (dead and age > DEAD_RUN_GRACE_SECONDS):
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
    return removed


def _process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    if pid <= 0 or not hasattr(os, "kill") or os.name != "posix":
        return True  # cannot tell: the age decides
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # no such process; no such pid at all
        return False
    except OSError:  # EPERM: alive, another user's
        return True
    return True


def _fsync_directory(directory: Path) -> None:
    """Make the rename durable; not possible (nor needed) on every platform."""
    with contextlib.suppress(OSError, AttributeError):
        descriptor = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
