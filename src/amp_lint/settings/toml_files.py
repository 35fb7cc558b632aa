"""Reading a configuration file (pyproject.toml, `--config FILE`): a regular file of at most
MAX_CONFIG_BYTES, UTF-8 as TOML requires, parsed; anything else is one ConfigError naming the
file, never a traceback or a hang (`--config /dev/zero`)."""

from __future__ import annotations

import sys
from pathlib import Path

from amp_lint.reading import read_regular_file
from amp_lint.settings.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.9 and 3.10
    import tomli as tomllib

# The largest pyproject.toml of the 28 corpus packages' sdists is under 20 KB.
MAX_CONFIG_BYTES = 1024 * 1024


def read_toml(path: Path) -> dict[str, object]:
    """The TOML document at `path`; ConfigError (naming the file and why) if unusable."""
    try:
        data = read_regular_file(path, MAX_CONFIG_BYTES)
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror or error}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"{path}: not UTF-8 (byte {error.start + 1}); TOML files are UTF-8"
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: invalid TOML: {error}") from None
