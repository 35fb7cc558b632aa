"""Writing fixes back: only over the bytes that were read, only as the file's owner allowed,
never half a file; and removing the temporary files of runs that were interrupted."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import tempfile
import time
from pathlib import Path

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
