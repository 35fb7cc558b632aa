"""The real command-line interfaces the tests drive: the installed `amp-lint` console script
and flake8 (with the amp-lint plugin registered by its entry point)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

AMP_LINT = Path(sys.executable).parent / "amp-lint"


def amp_lint(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(AMP_LINT), *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def flake8(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """flake8 with `--isolated`, so no user or project flake8 configuration leaks in."""
    return subprocess.run(
        [sys.executable, "-m", "flake8", "--isolated", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
