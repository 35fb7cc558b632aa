"""The result cache stays bounded (entries unused for a week go, as do other versions'
directories), and `amp-lint clean` removes it, refusing a directory that is not one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from runners import amp_lint

DAY = 24 * 60 * 60

TRAIN = """\
import torch

with torch.autocast("cuda"):
    scores = q @ k.transpose(-2, -1)
    scores = scores.masked_fill(pad, -1e9)
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project whose cache goes where `amp-lint check` puts it by default."""
    monkeypatch.delenv("AMP_LINT_CACHE_DIR", raising=False)
    monkeypatch.delenv("AMP_LINT_NO_CACHE", raising=False)
    root = tmp_path / "project"
    root.mkdir()
    (root / "pyproject.toml").write_text("[tool.amp-lint]\n")
    (root / "train.py").write_text(TRAIN)
    return root


def check(root: Path) -> None:
    result = amp_lint(root, "check", "-q", ".")
    assert result.returncode == 1, result.stdout + result.stderr


def entries(cache: Path) -> set[str]:
    """The cache's entries (files in a version directory's shards), by relative path."""
    return {
        str(path.relative_to(cache))
        for path in cache.glob("*/??/*")
        if path.is_file() and not path.name.endswith(".tmp")
    }


def age(directory: Path, seconds: float) -> None:
    """Everything under `directory` as if last used `seconds` earlier than it was."""
    for path in [directory, *directory.rglob("*")]:
        status = path.stat()
        os.utime(path, (status.st_atime - seconds, status.st_mtime - seconds))


def test_entries_unused_for_a_week_are_pruned(project: Path) -> None:
    cache = project / ".amp_lint_cache"
    check(project)
    first = entries(cache)
    assert first
    counts = []
    for edit in range(12):
        age(cache, DAY)  # a day passes between edits
        with (project / "train.py").open("a") as file:
            file.write(f"step_{edit} = {edit}\n")
        check(project)
        counts.append(len(entries(cache)))
        # amp-lint's code is part of the cache's key (its version directory): a file under
        # src/amp_lint edited while this test runs starts a second directory, whose entries
        # the first's pruning leaves alone (until that whole directory goes), and the counts
        # grow on for reasons that are not this test's.
        versions = sorted(path.name for path in cache.iterdir() if path.is_dir())
        assert len(versions) == 1, f"amp-lint's code changed during the test: {versions}"
    # Every edit adds all but one of a run's entries (the index is rewritten in place):
    # without pruning 13 runs' worth would be there, with it only the last 8 days'.
    added = len(first) - 1
    assert counts[-1] <= 1 + 8 * added, counts
    assert len(set(counts[-3:])) == 1, f"a steady state, no longer growing: {counts}"
    # What is left was used in the last week; of the first run's entries only the index of
    # the files' signatures, which every run rewrites, is.
    ages = [path.stat().st_mtime for path in cache.glob("*/??/*")]
    # Measured against the newest entry (written by the last run), not the wall clock.
    assert max(ages) - min(ages) <= 7 * DAY + 600
    assert len(first & entries(cache)) <= 1
    # An unchanged project's result, read again, is kept however old it was.
    age(cache, 5 * DAY)
    check(project)
    kept = entries(cache)
    age(cache, 3 * DAY)  # eight days after the edit, three after the last read
    (project / "other.py").write_text("import torch\n")
    check(project)
    assert kept & entries(cache)


def test_other_versions_directories_go_when_unused(project: Path) -> None:
    cache = project / ".amp_lint_cache"
    check(project)
    stale = cache / "0.0.1-1-0123456789ab"
    recent = cache / "0.0.2-1-ba9876543210"
    for directory in (stale, recent):
        (directory / "ab").mkdir(parents=True)
        (directory / "ab" / "cdef").write_bytes(b"an old entry")
    age(stale, 29 * DAY)
    age(cache, DAY)  # the last pruning a day ago: the next run that analyses prunes
    (project / "train.py").write_text(TRAIN + "x = 1\n")
    check(project)
    assert not stale.exists()
    assert (recent / "ab" / "cdef").exists()


def test_clean_removes_the_cache(project: Path) -> None:
    check(project)
    cache = project / ".amp_lint_cache"
    assert cache.is_dir()
    cleaned = amp_lint(project, "clean")
    assert cleaned.returncode == 0, cleaned.stderr
    assert str(cache) in cleaned.stdout
    assert not cache.exists()
    again = amp_lint(project, "clean")
    assert again.returncode == 0
    assert "No cache" in again.stdout
    assert (project / "train.py").read_text() == TRAIN


def test_clean_finds_the_configured_cache_from_a_subdirectory(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.amp-lint]\ncache-dir = "build/lint"\n')
    (project / "pkg").mkdir()
    check(project)
    cache = project / "build" / "lint"
    assert (cache / "CACHEDIR.TAG").is_file()
    cleaned = amp_lint(project / "pkg", "clean")
    assert cleaned.returncode == 0, cleaned.stderr
    assert not cache.exists()
    assert (project / "build").is_dir()


def test_clean_refuses_a_directory_that_is_not_a_cache(project: Path) -> None:
    precious = project / "data"
    precious.mkdir()
    (precious / "weights.pt").write_bytes(b"\x00" * 16)
    refused = amp_lint(project, "clean", "--cache-dir", "data")
    assert refused.returncode == 2
    assert refused.stderr.startswith("amp-lint: error: ")
    assert "data" in refused.stderr and "not an amp-lint cache" in refused.stderr
    assert (precious / "weights.pt").exists()


def test_clean_keeps_what_else_is_in_the_cache_directory(project: Path) -> None:
    """A cache directory pointed at a folder holding other files: only amp-lint's go."""
    shared = project / "shared"
    shared.mkdir()
    (shared / "notes.txt").write_text("keep me\n")
    result = amp_lint(project, "check", "-q", "--cache-dir", "shared", ".")
    assert result.returncode == 1, result.stderr
    assert (shared / "CACHEDIR.TAG").exists()
    cleaned = amp_lint(project, "clean", "--cache-dir", "shared")
    assert cleaned.returncode == 0, cleaned.stderr
    assert sorted(p.name for p in shared.iterdir()) == ["notes.txt"]


def test_a_warm_run_does_not_prune(project: Path) -> None:
    """Pruning reads the whole cache: an unchanged project's run writes nothing and so
    never prunes, however old the last pruning."""
    cache = project / ".amp_lint_cache"
    check(project)
    age(cache, 30 * DAY)
    before = entries(cache)
    check(project)
    assert entries(cache) == before
