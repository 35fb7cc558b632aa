"""The hooks in .pre-commit-hooks.yaml, run by the real pre-commit in scratch git repositories.

Two kinds of test:

* without the network (always run): pre-commit validates the manifest, then runs each hook as a
  `repo: local` hook with `language: system` whose settings are copied from the manifest and
  whose entry is the `amp-lint` installed beside this Python. That is the manifest's own
  behaviour (which files are passed, serial or not, when the hook is skipped) with the code in
  this checkout, and needs no package index.
* with the network (opt-in: `AMP_LINT_TEST_NETWORK=1`, marker `network`): `pre-commit try-repo`
  on a snapshot of this checkout, and `pre-commit run` with the README's configuration (`repo`
  a path to the snapshot, `rev` its commit); pre-commit builds a virtualenv and pip-installs
  amp-lint and libcst from the package index, as a user's pre-commit does (minutes).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from runners import AMP_LINT

# PyYAML comes with pre-commit; without it there is nothing here to run.
yaml = pytest.importorskip("yaml", reason="needs pre-commit (and its PyYAML)")

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / ".pre-commit-hooks.yaml"
PRE_COMMIT = Path(sys.executable).parent / "pre-commit"
DEPRECATED = b"import torch\n\nwith torch.cuda.amp.autocast():\n    pass\n"
# An autocast region in train.py whose float16 scores reach a hazard in models/attn.py.
TRAIN = (
    "import torch\n\nfrom models.attn import attend\n\n\n"
    "def step(model, q, k):\n"
    '    with torch.autocast("cuda", dtype=torch.float16):\n'
    "        return attend(model(q) @ k)\n"
)
ATTN = "def attend(scores, mask=None):\n    return scores.masked_fill(mask, -1e9)\n"
CROSS_FILE_FINDING = "models/attn.py:2:12: AMP101"
INSTALL_TIMEOUT_S = 300
RUN_TIMEOUT_S = 120
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


def manifest_hooks() -> dict[str, dict[str, Any]]:
    hooks: list[dict[str, Any]] = yaml.safe_load(MANIFEST.read_text())
    return {hook["id"]: hook for hook in hooks}


def pre_commit(
    cwd: Path, home: Path, *args: str, timeout: int = RUN_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    """The real pre-commit, with its own store (parallel test runs must not share one)."""
    env = {**os.environ, "PRE_COMMIT_HOME": str(home), "PRE_COMMIT_COLOR": "never"}
    return subprocess.run(
        [str(PRE_COMMIT), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def output_of(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout + result.stderr


@pytest.fixture
def user_repo(tmp_path: Path) -> Iterator[Path]:
    repo = tmp_path / "user-repo"
    repo.mkdir()
    git(repo, "init", "-q")
    yield repo


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "pre-commit-home"


# The manifest, checked by pre-commit itself.


def test_manifest_is_valid_for_pre_commit() -> None:
    result = subprocess.run(
        [str(PRE_COMMIT), "validate-manifest", str(MANIFEST)],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    assert result.returncode == 0, output_of(result)


def test_every_hook_runs_serially() -> None:
    """One amp-lint process per hook: parallel batches would split a region from its hazard."""
    hooks = manifest_hooks()
    assert {"amp-lint", "amp-lint-fix", "amp-lint-project", "amp-lint-project-fix"} <= set(hooks)
    assert all(hook.get("require_serial") is True for hook in hooks.values())


def test_project_hooks_lint_the_repository_not_the_staged_files() -> None:
    for hook_id in ("amp-lint-project", "amp-lint-project-fix"):
        hook = manifest_hooks()[hook_id]
        assert hook["pass_filenames"] is False
        assert not hook.get("always_run", False)
        assert {"python", "pyi"} <= set(hook["types_or"])


def test_entries_are_amp_lint_commands() -> None:
    for hook in manifest_hooks().values():
        program, *arguments = hook["entry"].split()
        assert program == "amp-lint"
        result = subprocess.run(
            [str(AMP_LINT), *arguments, "--help"], capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0, f"{hook['id']}: {output_of(result)}"


# The manifest's hooks, run by pre-commit without the network.


def local_config(*hook_ids: str) -> str:
    """A `repo: local` configuration running the manifest's hooks with this checkout's
    amp-lint: every setting from the manifest except how the command is installed."""
    hooks = []
    for hook_id in hook_ids:
        hook = dict(manifest_hooks()[hook_id])
        program, _, arguments = hook["entry"].partition(" ")
        assert program == "amp-lint"
        hook["entry"] = f"{AMP_LINT} {arguments}".strip()
        hook["language"] = "system"
        hooks.append(hook)
    config = {"repos": [{"repo": "local", "hooks": hooks}]}
    return str(yaml.safe_dump(config, sort_keys=False))


def write(repo: Path, name: str, text: str) -> None:
    (repo / name).parent.mkdir(parents=True, exist_ok=True)
    (repo / name).write_text(text)


def configure(repo: Path, *hook_ids: str) -> None:
    write(repo, ".pre-commit-config.yaml", local_config(*hook_ids))
    git(repo, "add", ".pre-commit-config.yaml")


def commit_project(repo: Path, *hook_ids: str) -> None:
    """A committed project whose region (train.py) and hazard (models/attn.py) are apart."""
    configure(repo, *hook_ids)
    write(repo, "train.py", TRAIN)
    write(repo, "models/__init__.py", "")
    write(repo, "models/attn.py", ATTN)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--no-verify", "-m", "project")


def test_per_file_hook_reports_a_staged_file(user_repo: Path, home: Path) -> None:
    configure(user_repo, "amp-lint")
    (user_repo / "train.py").write_bytes(DEPRECATED)
    git(user_repo, "add", "train.py")
    result = pre_commit(user_repo, home, "run", "amp-lint")
    assert result.returncode == 1, output_of(result)
    assert "train.py:3:6: AMP401" in result.stdout
    assert (user_repo / "train.py").read_bytes() == DEPRECATED


def test_per_file_hook_follows_calls_between_staged_files(user_repo: Path, home: Path) -> None:
    """Both files staged, among enough others that pre-commit would split a parallel hook's
    files into batches: the serial hook gets them all in one run and sees the chain."""
    configure(user_repo, "amp-lint")
    write(user_repo, "train.py", TRAIN)
    write(user_repo, "models/__init__.py", "")
    write(user_repo, "models/attn.py", ATTN)
    for index in range(16):
        write(user_repo, f"models/layer{index}.py", f"WIDTH_{index} = {index}\n")
    git(user_repo, "add", "-A")
    result = pre_commit(user_repo, home, "run", "amp-lint")
    assert result.returncode == 1, output_of(result)
    # models/attn.py has no finding on its own: this one comes from train.py's region.
    assert CROSS_FILE_FINDING in result.stdout


def test_project_hook_finds_the_hazard_in_an_unstaged_file(user_repo: Path, home: Path) -> None:
    """Only train.py changes; the hazard is in a committed file the per-file hook never sees."""
    commit_project(user_repo, "amp-lint", "amp-lint-project")
    write(user_repo, "train.py", TRAIN + "\n\nSTEPS = 10\n")
    git(user_repo, "add", "train.py")

    per_file = pre_commit(user_repo, home, "run", "amp-lint")
    assert per_file.returncode == 0, output_of(per_file)
    assert CROSS_FILE_FINDING not in per_file.stdout

    project = pre_commit(user_repo, home, "run", "amp-lint-project")
    assert project.returncode == 1, output_of(project)
    assert CROSS_FILE_FINDING in project.stdout


def test_project_hook_is_skipped_without_a_python_change(user_repo: Path, home: Path) -> None:
    commit_project(user_repo, "amp-lint-project")
    write(user_repo, "README.md", "autocast notes\n")
    git(user_repo, "add", "README.md")
    result = pre_commit(user_repo, home, "run", "amp-lint-project")
    assert result.returncode == 0, output_of(result)
    assert "Skipped" in result.stdout


def test_project_fix_hook_fixes_the_other_file(user_repo: Path, home: Path) -> None:
    commit_project(user_repo, "amp-lint-project-fix")
    write(user_repo, "train.py", TRAIN + "\n\nSTEPS = 10\n")
    git(user_repo, "add", "train.py")
    result = pre_commit(user_repo, home, "run", "amp-lint-project-fix", "--show-diff-on-failure")
    # Its fix is unsafe (it changes the fill value): --fix alone reports it and writes nothing.
    assert result.returncode == 1, output_of(result)
    assert CROSS_FILE_FINDING in result.stdout
    assert (user_repo / "models/attn.py").read_text() == ATTN


def test_project_hook_with_unsafe_fixes_rewrites_the_other_file(
    user_repo: Path, home: Path
) -> None:
    commit_project(user_repo)
    config = yaml.safe_load(local_config("amp-lint-project-fix"))
    config["repos"][0]["hooks"][0]["args"] = ["--unsafe-fixes"]
    write(user_repo, ".pre-commit-config.yaml", yaml.safe_dump(config))
    write(user_repo, "train.py", TRAIN + "\n\nSTEPS = 10\n")
    git(user_repo, "add", "train.py", ".pre-commit-config.yaml")
    result = pre_commit(user_repo, home, "run", "amp-lint-project-fix")
    assert result.returncode == 1, output_of(result)
    assert "files were modified by this hook" in result.stdout
    assert "-1e9" not in (user_repo / "models/attn.py").read_text()


# The hooks as users install them: pre-commit builds their virtualenv from the package index.


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
def installed_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One pre-commit store for this module's networked tests, so amp-lint is installed once
    per test process."""
    return tmp_path_factory.mktemp("pre-commit-home")


def installing_pre_commit(cwd: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """pre-commit run where it installs the hooks: skipped, not failed, without an index."""
    try:
        result = pre_commit(cwd, home, *args, timeout=INSTALL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.skip(f"pre-commit took over {INSTALL_TIMEOUT_S} s to install the hook")
    if any(sign in output_of(result) for sign in OFFLINE_SIGNS):
        pytest.skip("pre-commit could not install the hook's dependencies (no package index)")
    return result


def try_repo(
    hook_repo: Path, home: Path, cwd: Path, hook: str, *files: str
) -> subprocess.CompletedProcess[str]:
    selection = ["--files", *files] if files else []
    return installing_pre_commit(cwd, home, "try-repo", str(hook_repo), hook, *selection)


@pytest.mark.network
def test_installed_check_hook_reports_findings(
    hook_repo: Path, installed_home: Path, user_repo: Path
) -> None:
    (user_repo / "train.py").write_bytes(DEPRECATED)
    git(user_repo, "add", "train.py")
    result = try_repo(hook_repo, installed_home, user_repo, "amp-lint", "train.py")
    assert result.returncode == 1, output_of(result)
    assert "train.py:3:6: AMP401" in result.stdout
    assert (user_repo / "train.py").read_bytes() == DEPRECATED


@pytest.mark.network
def test_installed_fix_hook_fixes_the_file(
    hook_repo: Path, installed_home: Path, user_repo: Path
) -> None:
    (user_repo / "train.py").write_bytes(DEPRECATED)
    git(user_repo, "add", "train.py")
    result = try_repo(hook_repo, installed_home, user_repo, "amp-lint-fix", "train.py")
    # pre-commit fails a hook that modified files, so that the fix is reviewed and staged.
    assert result.returncode == 1, output_of(result)
    assert "files were modified by this hook" in result.stdout
    assert b"torch.cuda.amp" not in (user_repo / "train.py").read_bytes()


@pytest.mark.network
def test_installed_project_hook_follows_calls(
    hook_repo: Path, installed_home: Path, user_repo: Path
) -> None:
    write(user_repo, "train.py", TRAIN)
    write(user_repo, "models/__init__.py", "")
    write(user_repo, "models/attn.py", ATTN)
    git(user_repo, "add", "-A")
    git(user_repo, "commit", "-q", "--no-verify", "-m", "project")
    result = try_repo(hook_repo, installed_home, user_repo, "amp-lint-project", "train.py")
    assert result.returncode == 1, output_of(result)
    assert CROSS_FILE_FINDING in result.stdout


@pytest.mark.network
def test_installed_hooks_pass_without_python_files(
    hook_repo: Path, installed_home: Path, user_repo: Path
) -> None:
    (user_repo / "README.md").write_text("autocast notes\n")
    git(user_repo, "add", "README.md")
    for hook in ("amp-lint", "amp-lint-fix", "amp-lint-project"):
        result = try_repo(hook_repo, installed_home, user_repo, hook, "README.md")
        assert result.returncode == 0, output_of(result)


@pytest.mark.network
def test_readme_configuration_installs_from_a_clone(
    hook_repo: Path, installed_home: Path, user_repo: Path
) -> None:
    """The README's form: `repo` a path to a clone, `rev` one of its commits."""
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=hook_repo, capture_output=True, text=True, check=True
    ).stdout.strip()
    config = {
        "repos": [{"repo": str(hook_repo), "rev": commit, "hooks": [{"id": "amp-lint-project"}]}]
    }
    write(user_repo, ".pre-commit-config.yaml", yaml.safe_dump(config))
    write(user_repo, "train.py", TRAIN)
    write(user_repo, "models/__init__.py", "")
    write(user_repo, "models/attn.py", ATTN)
    git(user_repo, "add", "-A")
    result = installing_pre_commit(user_repo, installed_home, "run")
    assert result.returncode == 1, output_of(result)
    assert CROSS_FILE_FINDING in result.stdout
