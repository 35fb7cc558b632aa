"""A warm run (the cache on, nothing changed) reads no linted file and prints what a cold run
prints; any change a stat can see (content, same-size content with the old mtime, config,
a new file) is seen. Driven through `amp_lint.cli.main.main` in a real process whose file opens
are recorded by an audit hook (`open` is an audited event), so "reads nothing" is observed,
not inferred from timing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from runners import amp_lint

PROJECTS = Path(__file__).parent / "projects"
CROSS_FILE = PROJECTS / "cross_file"

# Runs the real CLI; prints the linted project's files it opened as JSON on the last line
# of stderr.
LAUNCHER = """
import json, os, sys
project = os.path.realpath(sys.argv[1])
opened = set()
def record(event, args):
    if event == "open" and isinstance(args[0], (str, os.PathLike)):
        path = os.path.realpath(os.fspath(args[0]))
        if path.startswith(project + os.sep) and path.endswith(".py"):
            opened.add(os.path.relpath(path, project))
sys.addaudithook(record)
from amp_lint.cli.main import main
status = main(sys.argv[2:])
sys.stdout.flush()
print(json.dumps(sorted(opened)), file=sys.stderr)
sys.exit(status)
"""


def run(
    project: Path, cache: Path, *args: str
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            LAUNCHER,
            str(project),
            "check",
            "--cache-dir",
            str(cache),
            *args,
            ".",
        ],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    *messages, opened = result.stderr.splitlines()
    result.stderr = "\n".join(messages)
    return result, json.loads(opened)


def age(project: Path, seconds: float = 86_400.0) -> None:
    """Files last modified a day ago: far outside the window (2 s) in which a stat is not
    trusted, so no run is slow enough to reach it."""
    past = time.time() - seconds
    for path in project.rglob("*.py"):
        os.utime(path, (past, past))


def copy(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(CROSS_FILE, project)
    age(project)
    return project


def test_warm_run_reads_no_file_and_prints_the_same(tmp_path: Path) -> None:
    project = copy(tmp_path)
    cold = amp_lint(project, "check", "--no-cache", ".")
    first, opened_first = run(project, tmp_path / "c")
    assert (first.stdout, first.returncode) == (cold.stdout, cold.returncode)
    assert "models/masking.py" in opened_first  # the check below can fail
    warm, opened = run(project, tmp_path / "c")
    assert opened == []
    assert (warm.stdout, warm.stderr, warm.returncode) == (
        first.stdout,
        first.stderr,
        first.returncode,
    )


def test_same_size_edit_with_the_old_mtime_is_seen(tmp_path: Path) -> None:
    project = copy(tmp_path)
    first, _ = run(project, tmp_path / "c")
    masking = project / "models" / "masking.py"
    status = masking.stat()
    text = masking.read_text()
    assert "-1e9" in text
    masking.write_text(text.replace("-1e9", "-1e4"))  # fits float16: the finding goes
    os.utime(masking, ns=(status.st_atime_ns, status.st_mtime_ns))
    assert masking.stat().st_size == status.st_size
    edited, _ = run(project, tmp_path / "c")  # the change time gives it away
    assert "models/masking.py:2:12: AMP101" in first.stdout
    assert "models/masking.py:2:12: AMP101" not in edited.stdout
    assert edited.stdout == amp_lint(project, "check", "--no-cache", ".").stdout


def test_recently_modified_files_are_read_until_their_stat_can_be_trusted(
    tmp_path: Path,
) -> None:
    project = copy(tmp_path)
    # Modified "just now" as the run sees it, however long the runs below take: an mtime a
    # day ahead of the clock is inside the window in which a stat is not trusted for the
    # whole test (a `touch` was, only while the runs took under 2 s: they did not under load).
    future = time.time() + 86_400
    os.utime(project / "models" / "masking.py", (future, future))
    run(project, tmp_path / "c")
    _, opened = run(project, tmp_path / "c")
    assert opened == ["models/masking.py"]  # same bytes, so the remembered run is used
    age(project)
    run(project, tmp_path / "c")
    assert run(project, tmp_path / "c")[1] == []


def test_config_and_new_files_change_the_result(tmp_path: Path) -> None:
    project = copy(tmp_path)
    first, _ = run(project, tmp_path / "c")
    assert "AMP101" in first.stdout
    (project / "pyproject.toml").write_text('[tool.amp-lint]\nignore = ["AMP101"]\n')
    ignored, _ = run(project, tmp_path / "c")
    assert "AMP101" not in ignored.stdout
    (project / "pyproject.toml").unlink()
    (project / "extra.py").write_text(
        "import torch\n\nwith torch.autocast('cuda'):\n    x = torch.ones(2).half()\n"
        "    x.masked_fill_(x > 0, -1e9)\n"
    )
    added, _ = run(project, tmp_path / "c")
    assert "extra.py:5:" in added.stdout
    assert added.stdout == amp_lint(project, "check", "--no-cache", ".").stdout


def test_errors_are_reported_on_every_warm_run(tmp_path: Path) -> None:
    project = copy(tmp_path)
    (project / "broken.py").write_text("import torch\nwith torch.autocast('cuda'):\n  x = (\n")
    age(project)
    first, _ = run(project, tmp_path / "c")
    warm, opened = run(project, tmp_path / "c")
    assert opened == []
    assert "broken.py" in first.stderr
    assert (warm.stdout, warm.stderr, warm.returncode) == (
        first.stdout,
        first.stderr,
        first.returncode,
    )
    assert warm.returncode == 2
