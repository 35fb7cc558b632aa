"""The hooks in .pre-commit-hooks.yaml, run by the real pre-commit in a scratch git repository.

pre-commit builds a virtualenv and pip-installs amp-lint into it (libcst comes from the package
index), which takes some seconds; the environment is shared by the tests of this module.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRE_COMMIT = Path(sys.executable).parent / "pre-commit"
DEPRECATED = b"import torch\n\nwith torch.cuda.amp.autocast():\n    pass\n"
INSTALL_TIMEOUT_S = 300
# pip's words when the package index cannot be reached; anything else is a real failure.
OFFLINE_SIGNS = ("Could not find a version that satisfies", "Failed to establish a new connection")

pytestmark = pytest.mark.skipif(
    not PRE_COMMIT.exists() or shutil.which("git") is None, reason="needs pre-commit and git"
)


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=amp-lint", "-c", "user.email=amp-lint@example.invalid", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The working tree (tracked and untracked files, as git sees them) committed to a scratch
    repository: `pre-commit try-repo` on the project itself would leave out new files."""
    listing = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
    )
    if listing.returncode != 0:
        pytest.skip("the project is not a git checkout")
    copy = tmp_path_factory.mktemp("hook-repo")
    listed = listing.stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        # An unignored virtualenv (such as a CI one) is no part of the hook repository.
        if source.is_file() and not (ROOT / name.split("/")[0] / "pyvenv.cfg").exists():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    git(copy, "init", "-q")
    git(copy, "add", "-A")
    git(copy, "commit", "-q", "-m", "snapshot")
    return copy


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pre-commit-home")


@pytest.fixture
def user_repo(tmp_path: Path) -> Iterator[Path]:
    git(tmp_path, "init", "-q")
    yield tmp_path


def try_repo(
    hook_repo: Path, home: Path, cwd: Path, hook: str, *files: str
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PRE_COMMIT_HOME": str(home)}
    try:
        result = subprocess.run(
            [str(PRE_COMMIT), "try-repo", str(hook_repo), hook, "--files", *files],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        pytest.skip(f"pre-commit took over {INSTALL_TIMEOUT_S} s to install the hook")
    output = result.stdout + result.stderr
    if any(sign in output for sign in OFFLINE_SIGNS):
        pytest.skip("pre-commit could not install the hook's dependencies (no package index)")
    return result


def test_check_hook_reports_findings(
    hook_repo: Path, pre_commit_home: Path, user_repo: Path
) -> None:
    (user_repo / "train.py").write_bytes(DEPRECATED)
    git(user_repo, "add", "train.py")
    result = try_repo(hook_repo, pre_commit_home, user_repo, "amp-lint", "train.py")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "train.py:3:6: AMP401" in result.stdout
    assert (user_repo / "train.py").read_bytes() == DEPRECATED


def test_fix_hook_fixes_the_file(hook_repo: Path, pre_commit_home: Path, user_repo: Path) -> None:
    (user_repo / "train.py").write_bytes(DEPRECATED)
    git(user_repo, "add", "train.py")
    result = try_repo(hook_repo, pre_commit_home, user_repo, "amp-lint-fix", "train.py")
    # pre-commit fails a hook that modified files, so that the fix is reviewed and staged.
    assert result.returncode == 1, result.stdout + result.stderr
    assert "files were modified by this hook" in result.stdout
    assert b"torch.cuda.amp" not in (user_repo / "train.py").read_bytes()


def test_no_python_files_passes(hook_repo: Path, pre_commit_home: Path, user_repo: Path) -> None:
    (user_repo / "README.md").write_text("autocast notes\n")
    git(user_repo, "add", "README.md")
    for hook in ("amp-lint", "amp-lint-fix"):
        result = try_repo(hook_repo, pre_commit_home, user_repo, hook, "README.md")
        assert result.returncode == 0, result.stdout + result.stderr
