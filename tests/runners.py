"""The real command-line interfaces the tests drive: the installed `amp-lint` console script
and flake8 (with the amp-lint plugin registered by its entry point)."""

from __future__ import annotations

import functools
import os
import shutil
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


NOBODY = 65534


def as_user(user: int) -> list[str]:
    """The prefix that runs a command as `user` (with no groups); needs root and setpriv."""
    return [
        shutil.which("setpriv") or "setpriv",
        f"--reuid={user}",
        f"--regid={user}",
        "--clear-groups",
    ]


@functools.cache
def can_run_as_nobody() -> bool:
    """Root, setpriv, and an amp-lint the user nobody can start (an interpreter under /root,
    as pyenv's are, cannot be)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("setpriv") is None:
        return False
    try:
        done = subprocess.run(
            [*as_user(NOBODY), str(AMP_LINT), "--version"], capture_output=True, timeout=60
        )
    except OSError:
        return False
    return done.returncode == 0
