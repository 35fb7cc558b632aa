"""The torch release a configuration targets (see torch_version.py): `--torch-version`, else
`torch-version` in `[tool.amp-lint]`, else the lower bound of torch the project declares:
`[project] dependencies`, then the other places declared_torch.py reads.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from amp_lint.settings.declared_torch import declared_torch_floor
from amp_lint.settings.errors import ConfigError
from amp_lint.settings.torch_version import (
    SETTING_FORM,
    TorchVersion,
    dependency_torch_version,
    nearest_pyproject,
    parse_torch_version,
)

if TYPE_CHECKING:
    from amp_lint.settings.config import Config


def with_torch_version(config: Config, command_line: str | None, project: Path) -> Config:
    """`--torch-version`, else the configured value, else the lower bound of torch in the
    `[project] dependencies` of the config file (or, without one, of the nearest
    pyproject.toml), as ruff falls back on `requires-python` for `target-version`."""
    if command_line is not None:
        version = parse_torch_version(command_line)
        if version is None:
            raise ConfigError(
                f"--torch-version: {command_line!r} is not a torch version ({SETTING_FORM})"
            )
        return replace(config, torch_version=version, torch_version_source="--torch-version")
    if config.torch_version is not None:
        return config
    pyproject = project if is_file(project) else nearest_pyproject(project)
    detected = dependency_torch_version(pyproject) if pyproject is not None else None
    if detected is None:
        # ML projects often declare torch elsewhere (setup.py, setup.cfg, requirements
        # files), beside the pyproject.toml or in the directory checked.
        directory = pyproject.parent if pyproject is not None else project
        detected = declared_torch_floor(directory, pyproject)
    if detected is None:
        return config
    return replace(config, torch_version=detected[0], torch_version_source=detected[1])


# What marks a directory as a project's root for the torch it declares.
_PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", "requirements.txt", "requirements")


def project_root(directory: Path) -> Path | None:
    """The nearest directory at or above `directory` holding a project declaration
    (pyproject.toml, setup.py, setup.cfg, requirements.txt or a requirements/ folder)."""
    for candidate in (directory, *directory.parents):
        if any(_exists(candidate / marker) for marker in _PROJECT_MARKERS):
            return candidate
    return None


def declared_floor_at(root: Path) -> tuple[TorchVersion, str] | None:
    """The torch floor a project root declares: its pyproject.toml's `[project]
    dependencies`, then the other places declared_torch.py reads."""
    pyproject = root / "pyproject.toml"
    pyproject_or_none = pyproject if is_file(pyproject) else None
    detected = dependency_torch_version(pyproject) if pyproject_or_none is not None else None
    return detected or declared_torch_floor(root, pyproject_or_none)


def oldest_floor(
    floors: list[tuple[TorchVersion, str]],
) -> tuple[TorchVersion, str] | None:
    """Fixes must run on every project linted together: the oldest of their floors."""
    return min(floors, key=lambda floor: floor[0]) if floors else None


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:  # a directory above that this user cannot search
        return False


def torch_version_setting(table: dict[str, object]) -> TorchVersion | None:
    value = table.get("torch-version")
    return parse_torch_version(value) if isinstance(value, str) else None


def is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # a directory above that this user cannot search: no file of ours there
        return False
