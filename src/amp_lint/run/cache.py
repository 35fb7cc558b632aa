"""Results of earlier runs, so that an unchanged file is not parsed or analysed again.

A result is keyed by everything it depends on: amp-lint's version, the configuration, the
file's path and bytes, the set of linted paths (imports resolve against it) and the context
the file was analysed in (the calls other files make into it). One small file per key,
written atomically, so that concurrent runs and interrupted runs never see half a result;
a result that cannot be read is treated as missing. Nothing here imports libcst: a run
whose results are all cached never loads it.

Every edit adds entries, so the cache is pruned (see `prune`): an entry's modification time
is its last use (a read sets it), and entries unused for ENTRY_MAX_AGE go, then the least
recently used ones while there are more than MAX_ENTRIES or MAX_BYTES of them, and the
directories of other amp-lint versions that nothing used for as long. Pruning reads the
whole cache, so only a run that analysed files does it (warm_run.py), at its end, and only
when the last pruning is a day old or the cache is over its entry bound (estimated from one
shard directory). A warm run, which reads one entry, never prunes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from amp_lint import __version__
from amp_lint.reading import read_regular_file
from amp_lint.run.cache_codec import CacheCodecError, decode, encode

DEFAULT_DIRECTORY = ".amp_lint_cache"
# Bumped when the entry layout changes, so old entries are never misread (entries name their
# types and fields: cache_codec.py refuses one whose fields differ from this version's).
_FORMAT = "4"
# Each entry starts with a checksum of the rest: a damaged entry (a flipped bit may still
# decode as other valid data) is treated as missing and computed again.
_CHECKSUM_BYTES = 16
_README = (
    b"Signature: 8a477f597d28d172789f06886806bc55\n"
    b"# This directory is amp-lint's cache; it is safe to delete. See https://bford.info/cachedir/\n"
)
MARKER = "CACHEDIR.TAG"
# What one version of amp-lint keeps its entries in: version, format, code fingerprint.
VERSION_DIRECTORY = re.compile(r"^[^/\\]+-[0-9]+-[0-9a-f]{12}$")
_SHARD = re.compile(r"^[0-9a-f]{2}$")
_STAMP = "last-pruned"  # in a version directory: its modification time is the last pruning

DAY = 24 * 60 * 60
ENTRY_MAX_AGE = 7 * DAY
PRUNE_INTERVAL = DAY
MAX_ENTRIES = 50_000
MAX_BYTES = 256 * 1024 * 1024
# One entry: a whole run's findings on torch's own package come to a few MB.
MAX_ENTRY_BYTES = 64 * 1024 * 1024
# Pruning for size goes down to this fraction of the bounds, so the next run need not prune.
_PRUNED_TO = 0.75
# An interrupted write's temporary file this old is no one's.
_TEMPORARY_MAX_AGE = 60 * 60


@dataclass(frozen=True)
class PruneResult:
    entries: int = 0
    bytes: int = 0
    versions: int = 0  # directories of other amp-lint versions removed


class ResultCache:
    # The cache directories (version directories) this process has considered pruning:
    # once per run is enough, and a run opens several ResultCaches on the same directory.
    _considered: ClassVar[set[Path]] = set()

    def __init__(self, directory: Path) -> None:
        self.directory = directory / f"{__version__}-{_FORMAT}-{code_fingerprint()}"
        self.root = directory

    def get(self, key: str) -> object | None:
        path = self._path(key)
        try:
            # A regular file, not through a link, of a bounded size: an entry replaced by a
            # FIFO, a device or a link to one is a miss, not a hang.
            data = read_regular_file(path, MAX_ENTRY_BYTES, follow_symlinks=False)
        except OSError:
            return None
        checksum, payload = data[:_CHECKSUM_BYTES], data[_CHECKSUM_BYTES:]
        if checksum != _checksum(payload):  # missing, truncated, damaged
            return None
        try:
            value = decode(payload)
        except CacheCodecError:  # not data of this version's types: never evaluated
            return None
        with contextlib.suppress(OSError):  # its last use, which pruning goes by
            os.utime(path)
        return value

    def put(self, key: str, value: object) -> None:
        """Best effort: a cache that cannot be written only makes the next run slower."""
        path = self._path(key)
        with contextlib.suppress(OSError, CacheCodecError):
            path.parent.mkdir(parents=True, exist_ok=True)
            self._mark_directory()
            descriptor, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            try:
                payload = encode(value)
                with os.fdopen(descriptor, "wb") as file:
                    file.write(_checksum(payload) + payload)
                os.replace(temporary, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / key[2:]

    def prune_if_due(self) -> None:
        """Called at the end of a run that analysed files (so the entries it read are marked
        used): prune when the last pruning is PRUNE_INTERVAL old or the entries seem too many,
        a shard holding about 1/256 of them. Once per process; best effort."""
        if self.directory in ResultCache._considered:
            return
        ResultCache._considered.add(self.directory)
        stamp = self.directory / _STAMP
        with contextlib.suppress(OSError):
            if not stamp.exists():
                stamp.touch()  # a new cache: nothing to prune yet
                return
            crowded = len(_children(self.directory / "00")) * 256 > MAX_ENTRIES
            if crowded or time.time() - stamp.stat().st_mtime >= PRUNE_INTERVAL:
                self.prune()

    def prune(self, now: float | None = None) -> PruneResult:
        """Delete entries unused for ENTRY_MAX_AGE, then the least recently used while over
        MAX_ENTRIES or MAX_BYTES, and other versions' directories unused for ENTRY_MAX_AGE."""
        now = time.time() if now is None else now
        (self.directory / _STAMP).touch()
        entries = sorted(_entries(self.directory, now), reverse=True)  # newest first
        too_many = len(entries) > MAX_ENTRIES or sum(size for _, size, _ in entries) > MAX_BYTES
        kept_count = kept_bytes = removed_count = removed_bytes = 0
        for used, size, path in entries:
            fits = not too_many or (
                kept_count < MAX_ENTRIES * _PRUNED_TO
                and kept_bytes + size <= MAX_BYTES * _PRUNED_TO
            )
            if fits and now - used <= ENTRY_MAX_AGE:
                kept_count += 1
                kept_bytes += size
                continue
            with contextlib.suppress(OSError):
                path.unlink()
                removed_count += 1
                removed_bytes += size
        return PruneResult(removed_count, removed_bytes, self._prune_other_versions(now))

    def _prune_other_versions(self, now: float) -> int:
        removed = 0
        for directory in _version_directories(self.root):
            if directory.name == self.directory.name:
                continue
            if now - _last_used(directory) > ENTRY_MAX_AGE + PRUNE_INTERVAL:
                shutil.rmtree(directory, ignore_errors=True)
                removed += 1
        return removed

    def _mark_directory(self) -> None:
        """Tell backup tools and git to leave the cache alone, as ruff and pytest do."""
        tag = self.root / "CACHEDIR.TAG"
        if not tag.exists():
            tag.write_bytes(_README)
            (self.root / ".gitignore").write_text("# Created by amp-lint\n*\n")


def is_amp_lint_cache(root: Path) -> bool:
    """Whether `root` holds the CACHEDIR.TAG amp-lint writes into a cache it creates."""
    try:
        tag = (root / MARKER).read_bytes()
    except OSError:
        return False
    return tag.startswith(_README.splitlines()[0]) and b"amp-lint" in tag


def remove_cache(root: Path) -> list[Path]:
    """Delete what amp-lint keeps in the cache directory `root` (its tag, .gitignore and
    version directories), then `root` if that left it empty; what else is there stays (a
    `cache-dir` pointed at a directory holding other things loses none of them). Returns what
    was removed; raises OSError when something could not be."""
    removed = []
    for directory in _version_directories(root):
        shutil.rmtree(directory)
        removed.append(directory)
    for name in (MARKER, ".gitignore"):
        path = root / name
        if name == ".gitignore" and not _is_our_gitignore(path):
            continue
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed.append(path)
    with contextlib.suppress(OSError):  # not empty: other things live there
        root.rmdir()
        removed = [root]
    return removed


def _is_our_gitignore(path: Path) -> bool:
    try:
        return path.read_text().startswith("# Created by amp-lint")
    except (OSError, UnicodeDecodeError):
        return False


def _version_directories(root: Path) -> list[Path]:
    try:
        children = list(os.scandir(root))
    except OSError:
        return []
    return [
        Path(child.path)
        for child in children
        if VERSION_DIRECTORY.match(child.name) and child.is_dir(follow_symlinks=False)
    ]


def _last_used(directory: Path) -> float:
    """When a version's entries were last pruned (a version in use is pruned daily), or
    for a directory from before pruning, when it last changed."""
    for candidate in (directory / _STAMP, directory):
        with contextlib.suppress(OSError):
            return candidate.stat().st_mtime
    return 0.0


def _entries(directory: Path, now: float) -> list[tuple[float, int, Path]]:
    """(last use, size, path) of each entry; stale temporary files are deleted on the way."""
    found = []
    for shard in _children(directory):
        if not _SHARD.match(shard.name) or not shard.is_dir(follow_symlinks=False):
            continue
        for entry in _children(Path(shard.path)):
            try:
                status = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if entry.name.endswith(".tmp"):
                if now - status.st_mtime > _TEMPORARY_MAX_AGE:
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)
                continue
            found.append((status.st_mtime, status.st_size, Path(entry.path)))
    return found


def _children(directory: Path) -> list[os.DirEntry[str]]:
    try:
        return list(os.scandir(directory))
    except OSError:
        return []


def _checksum(payload: bytes) -> bytes:
    return hashlib.blake2b(payload, digest_size=_CHECKSUM_BYTES).digest()


def code_fingerprint() -> str:
    """Changes whenever amp-lint's own code or data does (an edited rule, a development
    install), not only with the version number."""
    package = Path(__file__).parents[1]
    stamps = []
    for path in sorted(package.rglob("*")):
        if path.suffix in (".py", ".toml") and "verify" not in path.parts:
            status = path.stat()
            stamps.append(f"{path.relative_to(package)}:{status.st_size}:{status.st_mtime_ns}")
    return digest(*stamps)[:12]


def digest(*parts: bytes | str) -> str:
    hasher = hashlib.blake2b(digest_size=20)
    for part in parts:
        # A file name that is not UTF-8 reaches here as lone surrogates; surrogateescape gives
        # back its bytes.
        data = part.encode("utf-8", "surrogateescape") if isinstance(part, str) else part
        hasher.update(len(data).to_bytes(8, "little"))
        hasher.update(data)
    return hasher.hexdigest()
