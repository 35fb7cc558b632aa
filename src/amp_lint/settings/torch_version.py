"""The oldest torch release a project supports: the `torch-version` setting, like ruff's
`target-version`.

It comes from `--torch-version`, else `torch-version` in `[tool.amp-lint]`, else the
project's own `[project] dependencies` when they bound torch from below (`torch>=2.1`), else
its `requirements.txt` (`torch==2.11.0`); unset, rules assume the newest torch. Rules
compare it as a tuple of ints, `(2, 1)` or `(2, 1, 0)`: `target >= (2, 4)` reads "every
supported torch has 2.4's API".
"""

from __future__ import annotations

import re
from pathlib import Path

from amp_lint.settings.errors import ConfigError
from amp_lint.settings.toml_files import read_toml

# (major, minor) or (major, minor, patch).
TorchVersion = tuple[int, ...]

SETTING_FORM = "X.Y or X.Y.Z, e.g. 2.1"
_SETTING = re.compile(r"^[0-9]+\.[0-9]+(\.[0-9]+)?$")

# One PEP 508 requirement: name, optional extras, then a URL (`@ ...`) or specifiers and a
# marker. Only what finding torch's lower bound needs is parsed.
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$", re.S)
_SPECIFIER = re.compile(r"^\s*(~=|===|==|!=|<=|>=|<|>)\s*(\S+)\s*$")
_RELEASE = re.compile(r"^v?([0-9]+(?:\.[0-9]+)*)")
# Specifier operators that bound the version from below. `>2.1` counts as 2.1: 2.1.1 behaves
# as 2.1 does, and a bound taken lower than it is only makes the rules more careful.
_LOWER_BOUNDS = frozenset(["~=", "==", "===", ">=", ">"])


def parse_torch_version(text: str) -> TorchVersion | None:
    """`"2.1"` -> (2, 1), `"2.1.0"` -> (2, 1, 0); None for anything else."""
    if not _SETTING.match(text.strip()):
        return None
    return tuple(int(part) for part in text.strip().split("."))


def format_torch_version(version: TorchVersion) -> str:
    return ".".join(str(part) for part in version)


def nearest_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above `start`, with or without an amp-lint table."""
    directory = start.resolve()
    for candidate_dir in (directory, *directory.parents):
        candidate = candidate_dir / "pyproject.toml"
        try:
            if candidate.is_file():
                return candidate
        except OSError:  # a directory above that this user cannot search
            continue
    return None


def dependency_torch_version(pyproject: Path) -> tuple[TorchVersion, str] | None:
    """The oldest torch `[project] dependencies` allow, with the requirement it was read
    from; None unless every torch requirement there bounds it from below (no torch, an
    unbounded `torch`, a URL, dynamic dependencies, an unreadable file: nothing is assumed)."""
    try:
        document = read_toml(pyproject)
    except ConfigError:
        return None
    project = document.get("project")
    dependencies = project.get("dependencies") if isinstance(project, dict) else None
    if not isinstance(dependencies, list):
        return None
    return requirements_floor(
        [text for text in dependencies if isinstance(text, str)],
        f"[project] dependencies of {pyproject}",
    )


def requirements_floor(requirements: list[str], where: str) -> tuple[TorchVersion, str] | None:
    """The oldest torch `requirements` (PEP 508 strings) allow, with `where` and the torch
    requirements they hold; None unless every torch requirement bounds it from below."""
    torch_requirements = [text for text in requirements if _names_torch(text)]
    bounds = [_lower_bound(text) for text in torch_requirements]
    if not bounds or any(bound is None for bound in bounds):
        return None
    oldest = min(bound for bound in bounds if bound is not None)
    written = ", ".join(" ".join(text.split()) for text in torch_requirements)
    return oldest, f"{where}: {written}"


def requirement_lines(text: str) -> list[str]:
    """The requirements of a pip requirements file's text: options (`-r`, `-e`,
    `--index-url`) and comments skipped; a file it includes is not followed."""
    lines = [line.split(" #", 1)[0].strip() for line in text.splitlines()]
    return [line for line in lines if line and not line.startswith(("#", "-"))]


def _names_torch(requirement: str) -> bool:
    match = _REQUIREMENT.match(requirement)
    return match is not None and re.sub(r"[-_.]+", "-", match.group(1)).lower() == "torch"


def _lower_bound(requirement: str) -> TorchVersion | None:
    match = _REQUIREMENT.match(requirement)
    assert match is not None
    rest = match.group(3).split(";", 1)[0].strip()
    if rest.startswith("@"):  # a URL: which release it is cannot be told
        return None
    rest = rest.strip("()")
    bounds: list[TorchVersion] = []
    for clause in filter(None, (part.strip() for part in rest.split(","))):
        specifier = _SPECIFIER.match(clause)
        if specifier is None:
            return None
        operator, version = specifier.groups()
        if operator not in _LOWER_BOUNDS:
            continue
        release = _RELEASE.match(version)
        if release is None or "!" in version:  # no release number, or an epoch
            return None
        parts = tuple(int(part) for part in release.group(1).split("."))
        # As the setting is written: `>=2` is 2.0, `>=2.1.0.post1` is 2.1.0.
        bounds.append((parts[0], 0) if len(parts) == 1 else parts[:3])
    return max(bounds) if bounds else None
