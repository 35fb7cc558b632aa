"""Where else a project declares the oldest torch it supports, read when its pyproject.toml
`[project] dependencies` say nothing: dependencies pyproject.toml reads from files
(`dynamic = ["dependencies"]`), setup.cfg's `install_requires`, setup.py's `install_requires`
(a literal list, read without running the file), a `requirements.txt` and the files of a
`requirements/` folder. AMP401's fixes must not use APIs newer than that torch: a project
declaring `torch>=2.2` in setup.py got `torch.amp.custom_fwd` (2.4) from a "safe" fix."""

from __future__ import annotations

import ast
import configparser
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from amp_lint.reading import read_regular_file
from amp_lint.settings.errors import ConfigError
from amp_lint.settings.toml_files import MAX_CONFIG_BYTES, read_toml
from amp_lint.settings.torch_version import (
    TorchVersion,
    requirement_lines,
    requirements_floor,
)

Floor = tuple[TorchVersion, str]


def declared_torch_floor(directory: Path, pyproject: Path | None) -> Floor | None:
    """The first of these that bounds torch from below, in this order: pyproject.toml's
    dynamic dependency files, setup.cfg, setup.py, requirements.txt, requirements/*.txt."""
    readers: list[Callable[[], Floor | None]] = [
        lambda: _dynamic_dependencies(pyproject) if pyproject is not None else None,
        lambda: _setup_cfg(directory / "setup.cfg"),
        lambda: _setup_py(directory / "setup.py"),
        lambda: _requirements_file(directory / "requirements.txt"),
        lambda: _requirements_folder(directory / "requirements"),
    ]
    for reader in readers:
        floor = reader()
        if floor is not None:
            return floor
    return None


def _text(path: Path) -> str | None:
    # A stat first: most projects have few of these files, and a warm run opens nothing it
    # need not (setup.py is also a linted file).
    if not os.path.isfile(path):
        return None
    try:
        return read_regular_file(path, MAX_CONFIG_BYTES).decode("utf-8", "replace")
    except OSError:
        return None


def _dynamic_dependencies(pyproject: Path) -> Floor | None:
    """`[tool.setuptools.dynamic] dependencies = {file = ["requirements.txt"]}`."""
    try:
        document = read_toml(pyproject)
    except ConfigError:
        return None
    project = document.get("project")
    if not isinstance(project, dict) or "dependencies" not in project.get("dynamic", []):
        return None
    tool = document.get("tool")
    setuptools = tool.get("setuptools") if isinstance(tool, dict) else None
    dynamic = setuptools.get("dynamic") if isinstance(setuptools, dict) else None
    entry = dynamic.get("dependencies") if isinstance(dynamic, dict) else None
    files = entry.get("file") if isinstance(entry, dict) else None
    names = [files] if isinstance(files, str) else files if isinstance(files, list) else []
    lines = [
        line
        for name in names
        if isinstance(name, str)
        for line in requirement_lines(_text(pyproject.parent / name) or "")
    ]
    where = f"dynamic dependencies of {pyproject} ({', '.join(map(str, names))})"
    return requirements_floor(lines, where)


def _setup_cfg(path: Path) -> Floor | None:
    text = _text(path)
    if text is None:
        return None
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text, source=str(path))
        requires = parser.get("options", "install_requires", fallback="")
    except configparser.Error:
        return None
    return requirements_floor(requirement_lines(requires), f"install_requires of {path}")


def _setup_py(path: Path) -> Floor | None:
    text = _text(path)
    if text is None:
        return None
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return None
    lists = {
        target.id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    for value in _install_requires(tree):
        if isinstance(value, ast.Name):
            value = lists.get(value.id, value)
        if isinstance(value, (ast.List, ast.Tuple)):
            strings = [
                item.value
                for item in value.elts
                if isinstance(item, ast.Constant) and isinstance(item.value, str)
            ]
            return requirements_floor(strings, f"install_requires of {path}")
    return None


def _install_requires(tree: ast.Module) -> Iterator[ast.expr]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                if keyword.arg == "install_requires":
                    yield keyword.value


def _requirements_file(path: Path) -> Floor | None:
    text = _text(path)
    return None if text is None else requirements_floor(requirement_lines(text), str(path))


def _requirements_folder(folder: Path) -> Floor | None:
    """The oldest bound over the folder's files that name torch; none if one of them names
    torch without a bound (then the project's floor cannot be told)."""
    try:
        files = sorted(folder.glob("*.txt")) if folder.is_dir() else []
    except OSError:
        return None
    lines: list[str] = []
    for path in files[:64]:
        lines += requirement_lines(_text(path) or "")
    return requirements_floor(lines, f"{folder}/*.txt")
