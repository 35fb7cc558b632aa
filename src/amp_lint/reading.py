"""Reading a file the way every stage must: a regular file only (a FIFO would block forever,
`/dev/zero` never ends, a socket cannot be read), never waiting to open it, and no more than a
bound. Sources, configuration files, requirements files and cache entries all come through
here; standard input, which may be anything, is read with the same bound."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO


class UnreadableFile(OSError):
    """A path that is not a regular file, or one past its bound; `strerror` says which."""

    def __init__(self, reason: str, *, too_large: bool = False) -> None:
        super().__init__(errno.EINVAL, reason)
        self.too_large = too_large


def read_regular_file(path: Path | str, limit: int, *, follow_symlinks: bool = True) -> bytes:
    """The bytes of the regular file at `path`, at most `limit` of them.

    Raises OSError: UnreadableFile for a path that is not a regular file or is larger than
    `limit`; ELOOP for a symbolic link when `follow_symlinks` is false."""
    # Non-blocking, so that opening a FIFO returns at once instead of waiting for a writer.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    descriptor = os.open(path, flags)
    with os.fdopen(descriptor, "rb") as file:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise UnreadableFile(f"not a regular file ({file_kind(status.st_mode)})")
        if hasattr(os, "set_blocking"):
            os.set_blocking(descriptor, True)
        data = file.read(limit + 1)
    if len(data) > limit:
        raise UnreadableFile(f"larger than {_size(limit)}", too_large=True)
    return data


def read_stream(stream: BinaryIO, limit: int) -> bytes:
    """At most `limit` bytes of an open stream (standard input); UnreadableFile past that."""
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise UnreadableFile(f"larger than {_size(limit)}", too_large=True)
    return data


def file_kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a file"


def _size(limit: int) -> str:
    megabytes = limit / (1024 * 1024)
    return f"{megabytes:g} MB" if megabytes >= 1 else f"{limit // 1024} KB"
