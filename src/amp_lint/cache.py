"""Results of earlier runs, so that an unchanged file is not parsed or analysed again.

A result is keyed by everything it depends on: amp-lint's version, the configuration, the
file's path and bytes, the set of linted paths (imports resolve against it) and the context
the file was analysed in (the calls other files make into it). One small file per key,
written atomically, so that concurrent runs and interrupted runs never see half a result;
a result that cannot be read is treated as missing. Nothing here imports libcst: a run
whose results are all cached never loads it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import tempfile
from pathlib import Path

from amp_lint import __version__

DEFAULT_DIRECTORY = ".amp_lint_cache"
# Bumped when the pickled classes change shape, or the entry layout does, so old entries are
# never misread.
_FORMAT = "2"
# Each entry starts with a checksum of the rest: a damaged entry (a flipped bit unpickles as
# another valid object often enough) is treated as missing and computed again.
_CHECKSUM_BYTES = 16
_README = (
    b"Signature: 8a477f597d28d172789f06886806bc55\n"
    b"# This directory is amp-lint's cache; it is safe to delete. See https://bford.info/cachedir/\n"
)


class ResultCache:
    def __init__(self, directory: Path) -> None:
        self.directory = directory / f"{__version__}-{_FORMAT}-{code_fingerprint()}"
        self.root = directory

    def get(self, key: str) -> object | None:
        try:
            data = self._path(key).read_bytes()
        except OSError:
            return None
        checksum, payload = data[:_CHECKSUM_BYTES], data[_CHECKSUM_BYTES:]
        if checksum != _checksum(payload):  # missing, truncated, damaged
            return None
        try:
            value: object = pickle.loads(payload)
        except Exception:  # written by a version whose classes differ
            return None
        return value

    def put(self, key: str, value: object) -> None:
        """Best effort: a cache that cannot be written only makes the next run slower."""
        path = self._path(key)
        with contextlib.suppress(OSError, pickle.PicklingError):
            path.parent.mkdir(parents=True, exist_ok=True)
            self._mark_directory()
            descriptor, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            try:
                payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
                with os.fdopen(descriptor, "wb") as file:
                    file.write(_checksum(payload) + payload)
                os.replace(temporary, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / key[2:]

    def _mark_directory(self) -> None:
        """Tell backup tools and git to leave the cache alone, as ruff and pytest do."""
        tag = self.root / "CACHEDIR.TAG"
        if not tag.exists():
            tag.write_bytes(_README)
            (self.root / ".gitignore").write_text("# Created by amp-lint\n*\n")


def _checksum(payload: bytes) -> bytes:
    return hashlib.blake2b(payload, digest_size=_CHECKSUM_BYTES).digest()


def code_fingerprint() -> str:
    """Changes whenever amp-lint's own code or data does (an edited rule, a development
    install), not only with the version number."""
    package = Path(__file__).parent
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
