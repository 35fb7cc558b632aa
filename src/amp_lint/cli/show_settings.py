"""`--show-settings`: the settings a file is linted with, TOML-like, as `ruff check
--show-settings` prints them, with the autocast op table the torch-version target picks."""

from __future__ import annotations

from amp_lint.analysis.values.optables import (
    op_tables_for_release,
    table_release_for,
    tabulated_releases,
)
from amp_lint.settings.discovery import Resolved, describe
from amp_lint.settings.torch_version import TorchVersion

# `[tool.amp-lint]` keys and the Config fields they set, in the order --show-settings prints.
_SHOWN_KEYS = (
    ("select", "select"),
    ("ignore", "ignore"),
    ("per-file-ignores", "per_file_ignores"),
    ("exclude", "exclude"),
    ("fp32-only-callables", "fp32_only_callables"),
    ("autocast-functions", "autocast_functions"),
    ("forward-under-autocast", "forward_under_autocast"),
    ("assume-autocast", "assume_autocast"),
    ("assume-device", "assume_device"),
    ("lightning-precision", "lightning_precision"),
    ("transformers-trainer-precision", "transformers_trainer_precision"),
    ("cache-dir", "cache_dir"),
)


def show_settings(target: str, resolved: Resolved) -> str:
    """The resolved settings, TOML-like, as `ruff check --show-settings` prints them."""
    lines = [
        f"Resolved settings for: {target}",
        f"Settings path: {describe(resolved)}",
        f"root = {_toml(resolved.config.root)}",
    ]
    for key, field_name in _SHOWN_KEYS:
        value = getattr(resolved.config, field_name)
        lines.append(f"{key} = {'{}' if key == 'per-file-ignores' and not value else _toml(value)}")
    config = resolved.config
    if config.torch_version is not None:
        version = ".".join(str(part) for part in config.torch_version)
        lines.append(f'torch-version = "{version}"  # from {config.torch_version_source}')
    else:
        lines.append("torch-version = (not set: the newest torch)")
    lines.append(_op_table_line(config.torch_version))
    return "\n".join(lines) + "\n"


def _op_table_line(target: TorchVersion | None) -> str:
    """Which release's autocast op table the analysis reads for `target`."""
    table = op_tables_for_release(table_release_for(target))
    releases = tabulated_releases()
    span = f"tables {releases[0][0]}.{releases[0][1]} to {releases[-1][0]}.{releases[-1][1]}"
    if target is not None and tuple(target[:2]) < releases[0]:
        why = f"older than every table ({span}): the oldest is used"
    elif target is not None and tuple(target[:2]) not in releases:
        why = f"no table of its own ({span}): the nearest older one is used"
    else:
        why = span
    return f'autocast-op-table = "torch {table.torch_version}"  # {why}'


def _toml(value: object) -> str:
    if value is None:
        return "(not set)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, tuple) and value and all(isinstance(item, tuple) for item in value):
        pairs = ", ".join(f"{_toml(pattern)} = {_toml(codes)}" for pattern, codes in value)
        return "{ " + pairs + " }"
    if isinstance(value, tuple):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    return str(value)
