"""Reading a configuration file (pyproject.toml, `--config FILE`): a regular file of at most
MAX_CONFIG_BYTES, UTF-8 as TOML requires, parsed; anything else is one ConfigError naming the
file, never a traceback or a hang (`--config /dev/zero`)."""

from __future__ import annotations

import os
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


# A chain of `extend`s longer than this is a mistake (or a loop through links).
MAX_EXTEND_DEPTH = 16


def amp_lint_table(path: Path, *, required: bool) -> dict[str, object] | None:
    """The `[tool.amp-lint]` table of the TOML file at `path` (None if it has none, unless
    `required`), with the settings of the file its `extend` names underneath, as ruff's
    `extend`: that file's keys apply unless this one sets them too (a key is replaced, not
    merged; globs and paths are read as if written here)."""
    return _table(path, required=required, chain=())


def _table(path: Path, *, required: bool, chain: tuple[Path, ...]) -> dict[str, object] | None:
    document = read_toml(path)
    tool = document.get("tool")
    table = tool.get("amp-lint") if isinstance(tool, dict) else None
    if table is None:
        if required:
            raise ConfigError(f"{path}: no [tool.amp-lint] table")
        return None
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: tool.amp-lint must be a table")
    base = table.get("extend")
    if base is None:
        return table
    if not isinstance(base, str) or not base:
        raise ConfigError(f"{path}: tool.amp-lint.extend must be a path (a string)")
    target = (path.parent / os.path.expandvars(os.path.expanduser(base))).resolve()
    here = path.resolve()
    if target in (*chain, here) or len(chain) >= MAX_EXTEND_DEPTH:
        names = " -> ".join(str(p) for p in (*chain, here, target))
        raise ConfigError(f"{path}: tool.amp-lint.extend goes round in a circle: {names}")
    if not target.exists():
        raise ConfigError(f"{path}: tool.amp-lint.extend names {target}, which does not exist")
    inherited = _table(target, required=True, chain=(*chain, here))
    assert inherited is not None  # required
    return {**inherited, **{key: value for key, value in table.items() if key != "extend"}}
