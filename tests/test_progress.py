"""Progress on stderr: drawn only on a terminal, erased before the summary, never with
--quiet or when stderr is a file or pipe. The real `amp-lint` runs with its stderr on a
pseudo-terminal; AMP_LINT_PROGRESS_AFTER=0 shows progress from the start instead of after
two seconds, so a small project shows it."""

from __future__ import annotations

import io
import os
import pty
import subprocess
from pathlib import Path

from runners import AMP_LINT, amp_lint

from amp_lint.run.progress import Progress

CROSS_FILE = Path(__file__).parent / "projects" / "cross_file"


def on_terminal(*args: str) -> tuple[str, str]:
    """(stdout, what the terminal on stderr received)."""
    leader, follower = pty.openpty()
    try:
        result = subprocess.run(
            [str(AMP_LINT), "check", "--no-cache", *args, "."],
            cwd=CROSS_FILE,
            stdout=subprocess.PIPE,
            stderr=follower,
            env={**os.environ, "AMP_LINT_PROGRESS_AFTER": "0"},
            timeout=120,
        )
        os.close(follower)
        received = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not chunk:
                break
            received += chunk
    finally:
        os.close(leader)
    return result.stdout.decode(), received.decode()


def test_progress_is_drawn_on_a_terminal_and_erased_before_the_summary() -> None:
    stdout, terminal = on_terminal()
    # Round 0 parses train.py only (the first pass); later rounds follow its calls.
    assert "\r\x1b[Kamp-lint: analysing: 0/1 files" in terminal
    assert "\r\x1b[Kamp-lint: analysing: 1/1 files" in terminal
    done = terminal.index("amp-lint: following calls (round 1): 2/2 files")
    erased = terminal.rindex("\r\x1b[K")
    assert done < erased < terminal.index("Found ")
    assert "AMP101" in stdout and "amp-lint:" not in stdout


def test_quiet_shows_no_progress_and_no_summary() -> None:
    stdout, terminal = on_terminal("--quiet")
    assert terminal == ""
    assert "AMP101" in stdout


def test_no_progress_when_stderr_is_not_a_terminal() -> None:
    result = subprocess.run(
        [str(AMP_LINT), "check", "--no-cache", "."],
        cwd=CROSS_FILE,
        capture_output=True,
        text=True,
        env={**os.environ, "AMP_LINT_PROGRESS_AFTER": "0"},
        timeout=120,
    )
    assert "analysing" not in result.stderr
    assert result.stderr.startswith("Found ")
    assert result.stdout == amp_lint(CROSS_FILE, "check", "--no-cache", ".").stdout


def test_count_goes_back_when_the_work_starts_again() -> None:
    # A pool that breaks mid-phase makes the runner redo the phase serially; the count shown
    # restarts instead of passing the total.
    stream = io.StringIO()
    progress = Progress(stream, delay=0)
    progress.phase("analysing", 3)
    progress.collected(3)
    progress.collected(1)
    assert stream.getvalue().endswith("amp-lint: analysing: 1/3 files")
    assert "4/3" not in stream.getvalue()
