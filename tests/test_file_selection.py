"""Which files `amp-lint check` lints, as ruff chooses them: .gitignore (respect-gitignore),
--exclude / --extend-exclude, --force-exclude, and --jobs, through the real command."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from runners import amp_lint, amp_lint_process

# One AMP101 finding (line 5), whose fix is unsafe.
BAD = """\
import torch

x = torch.randn(4).half()
with torch.autocast("cuda"):
    y = x.masked_fill(x > 0, -1e9)
"""

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def write(root: Path, name: str, text: str = BAD) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def linted(result: subprocess.CompletedProcess[str]) -> set[str]:
    """The files the findings are in."""
    assert result.returncode in (0, 1), result.stderr
    return {line.split(":", 1)[0] for line in result.stdout.splitlines() if line.strip()}


def check(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return amp_lint(root, "check", "--no-cache", *args)


@pytest.fixture
def repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git work tree whose ignore files leave out all but src/x.py and src/keep_gen.py."""
    home = tmp_path / "home"
    write(home, "git/ignore", "global_ignored.py\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    write(root, ".gitignore", "outputs/\nwandb/\n*_gen.py\n!keep_gen.py\n")
    write(root, "src/.gitignore", "local.py\n")
    with (root / ".git" / "info" / "exclude").open("a") as exclude:
        exclude.write("scratch.py\n")
    for name in (
        "src/x.py",
        "src/keep_gen.py",
        "src/x_gen.py",
        "src/local.py",
        "src/deeper/local.py",
        "outputs/run1/train.py",
        "wandb/latest/train.py",
        "scratch.py",
        "global_ignored.py",
        "local.py",  # src/.gitignore applies below src/ only
    ):
        write(root, name)
    return root


@needs_git
def test_gitignored_files_are_not_linted(repository: Path) -> None:
    result = check(repository, ".")
    assert linted(result) == {"src/keep_gen.py", "src/x.py", "local.py"}
    assert result.returncode == 1


@needs_git
def test_gitignore_applies_from_a_subdirectory(repository: Path) -> None:
    assert linted(check(repository / "src", ".")) == {"keep_gen.py", "x.py"}


@needs_git
def test_gitignored_files_are_not_fixed(repository: Path) -> None:
    before = {p: p.read_bytes() for p in repository.rglob("*.py")}
    result = check(repository, "--fix", "--unsafe-fixes", ".")
    assert result.returncode == 0, result.stdout + result.stderr
    changed = {p.relative_to(repository).as_posix() for p in before if p.read_bytes() != before[p]}
    assert changed == {"src/keep_gen.py", "src/x.py", "local.py"}


@needs_git
def test_a_named_file_is_linted_even_if_ignored(repository: Path) -> None:
    result = check(repository, "outputs/run1/train.py", "src/local.py")
    assert linted(result) == {"outputs/run1/train.py", "src/local.py"}


@needs_git
def test_a_named_ignored_directory_is_linted_whole(repository: Path) -> None:
    assert linted(check(repository, "outputs")) == {"outputs/run1/train.py"}


@needs_git
def test_force_exclude_leaves_out_named_ignored_files(repository: Path) -> None:
    result = check(repository, "--force-exclude", "outputs/run1/train.py", "src/x.py")
    assert linted(result) == {"src/x.py"}


@needs_git
def test_no_respect_gitignore_lints_everything(repository: Path) -> None:
    result = check(repository, "--no-respect-gitignore", ".")
    assert len(linted(result)) == 10


@needs_git
def test_respect_gitignore_can_be_turned_off_in_config(repository: Path) -> None:
    write(repository, "pyproject.toml", "[tool.amp-lint]\nrespect-gitignore = false\n")
    assert len(linted(check(repository, "."))) == 10
    # The flag wins over the config.
    assert len(linted(check(repository, "--respect-gitignore", "."))) == 3


def test_gitignore_outside_a_git_work_tree_means_nothing(tmp_path: Path) -> None:
    # As ruff's walker, which reads .gitignore files only inside a repository.
    write(tmp_path, ".gitignore", "outputs/\n")
    write(tmp_path, "outputs/train.py")
    assert linted(check(tmp_path, ".")) == {"outputs/train.py"}


def test_bad_respect_gitignore_value_is_a_config_error(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", '[tool.amp-lint]\nrespect-gitignore = "yes"\n')
    write(tmp_path, "a.py")
    result = check(tmp_path, ".")
    assert result.returncode == 2
    assert "respect-gitignore must be true or false" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture
def excluded_project(tmp_path: Path) -> Path:
    write(
        tmp_path,
        "pyproject.toml",
        '[tool.amp-lint]\nexclude = ["legacy"]\nextend-exclude = ["generated_*.py"]\n',
    )
    for name in ("legacy/old.py", "generated_model.py", "train.py", "eval.py", "notes/n.py"):
        write(tmp_path, name)
    return tmp_path


def test_configured_excludes(excluded_project: Path) -> None:
    assert linted(check(excluded_project, ".")) == {"train.py", "eval.py", "notes/n.py"}


def test_exclude_flag_replaces_exclude_but_keeps_extend_exclude(excluded_project: Path) -> None:
    result = check(excluded_project, "--exclude", "eval.py,notes", ".")
    assert linted(result) == {"legacy/old.py", "train.py"}


def test_extend_exclude_flag_adds(excluded_project: Path) -> None:
    result = check(
        excluded_project, "--extend-exclude", "eval.py", "--extend-exclude", "notes", "."
    )
    assert linted(result) == {"train.py"}


def test_many_files_give_the_same_output_with_any_number_of_jobs(tmp_path: Path) -> None:
    for number in range(12):  # more than runner.PARALLEL_THRESHOLD
        write(tmp_path, f"pkg/module_{number:02}.py")
    serial = check(tmp_path, "--jobs", "1", ".")
    # The process pool forks: a real process (tests/runners.py).
    parallel = amp_lint_process(tmp_path, "check", "--no-cache", "-j", "2", ".")
    assert serial.returncode == parallel.returncode == 1
    assert len(serial.stdout.splitlines()) == 12
    assert serial.stdout == parallel.stdout


@pytest.mark.parametrize("count", ["0", "-1", "many"])
def test_bad_job_counts_are_usage_errors(tmp_path: Path, count: str) -> None:
    write(tmp_path, "a.py")
    result = check(tmp_path, f"--jobs={count}", ".")
    assert result.returncode == 2
    assert "--jobs" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("pattern", "left_out"),
    [
        ("**/gen/*", {"gen/x.py", "a/gen/y.py"}),  # `**/` also matches no directory, as in ruff
        ("a/**/y.py", {"a/gen/y.py"}),
        ("a/**/z.py", {"a/z.py"}),
        ("gen", {"gen/x.py", "a/gen/y.py"}),  # a name matches at any depth
    ],
)
def test_double_star_globs_match_as_ruffs_do(
    tmp_path: Path, pattern: str, left_out: set[str]
) -> None:
    files = {"gen/x.py", "a/gen/y.py", "a/z.py", "top.py"}
    for name in files:
        write(tmp_path, name)
    assert linted(check(tmp_path, "--exclude", pattern, ".")) == files - left_out
