"""The project's own lint and type checks, so that `pytest` alone says whether a change is done."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def tool(name: str) -> str:
    beside_python = Path(sys.executable).parent / name
    found = str(beside_python) if beside_python.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed")
    return found


def test_ruff() -> None:
    result = subprocess.run(
        [tool("ruff"), "check", "src", "tests"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy() -> None:
    # Files and strictness come from [tool.mypy] in pyproject.toml.
    result = subprocess.run([tool("mypy")], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
