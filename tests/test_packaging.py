"""What a user installs, checked without building it: every file the package needs is named
by pyproject.toml's package data, and the version is in one place. `.ci/package` builds the
wheel and the sdist and installs them for real (it needs the package index)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from amp_lint import __version__

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "amp_lint"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))


def test_package_data_names_every_data_file() -> None:
    """Files that are not Python modules reach the wheel only through package data: the op
    tables did not, and every installed copy failed on the first autocast region."""
    globs = PYPROJECT["tool"]["setuptools"]["package-data"]["amp_lint"]
    data = [
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_file() and path.suffix not in (".py", ".pyc") and "__pycache__" not in path.parts
    ]
    cases = [
        path.relative_to(PACKAGE).as_posix()
        for path in (PACKAGE / "verify" / "cases").glob("*.fixed.py")
    ]
    assert data, "no data files found: the test would pass vacuously"
    unshipped = [name for name in [*data, *cases] if not any(_ships(name, g) for g in globs)]
    assert unshipped == []


def _ships(name: str, glob: str) -> bool:
    """setuptools' package-data glob: `*` stays within one folder (`data/*.toml` is not
    `data/autocast_ops/torch-2.4.toml`), as fnmatch's does not."""
    pattern = "".join(
        "[^/]*" if part == "*" else re.escape(part) for part in re.split(r"(\*)", glob)
    )
    return re.fullmatch(pattern, name) is not None


def test_the_version_is_read_from_the_package_and_named_by_the_changelog() -> None:
    assert "version" in PYPROJECT["project"]["dynamic"]
    assert "version" not in PYPROJECT["project"]
    dynamic = PYPROJECT["tool"]["setuptools"]["dynamic"]["version"]
    assert dynamic == {"attr": "amp_lint.__version__"}
    changelog = (ROOT / "CHANGELOG.md").read_text("utf-8")
    newest = re.search(r"^## (\d+\.\d+\.\d+)", changelog, re.MULTILINE)
    assert newest is not None and newest.group(1) == __version__


def test_the_metadata_a_package_index_shows() -> None:
    project = PYPROJECT["project"]
    assert project["readme"] == "README.md" and project["license"] == "MIT"
    assert any(
        c.startswith("Programming Language :: Python :: 3.9") for c in project["classifiers"]
    )
    assert {"Homepage", "Changelog", "Issues"} <= set(project["urls"])
