"""The real command-line interfaces the tests drive: `amp-lint` and flake8 (with the amp-lint
plugin registered by its entry point).

Most tests run them in this process (`amp_lint`, `amp_lint_bytes`, `flake8`): the same `main`
the console scripts call, with the arguments, working directory, standard streams and exit
status of a real run, but without paying the interpreter's start and the imports (most of
a small run's time) for each call. Tests about the process itself (exit on a signal, closed
or special standard streams, another user, an injected audit hook, the console script and
the entry points as installed) run the real commands: `amp_lint_process`, `flake8_process`.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from unittest import mock

AMP_LINT = Path(sys.executable).parent / "amp-lint"


def amp_lint(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`amp-lint ARGS` run in `cwd`, in this process; output as text."""
    return _as_text(amp_lint_bytes(cwd, *args))


def amp_lint_bytes(
    cwd: Path, *args: str, stdin: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    """`amp-lint ARGS` run in `cwd`, in this process; output as bytes, `stdin` as its input."""
    from amp_lint.cli.main import main

    return _in_process(main, ["amp-lint", *args], cwd, stdin)


def amp_lint_process(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed `amp-lint` console script, as its own process."""
    return subprocess.run(
        [str(AMP_LINT), *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def flake8(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """flake8 with `--isolated` (no user or project flake8 configuration leaks in), in this
    process: flake8's own `main`, which finds the plugin through its entry point."""
    from flake8.main.cli import main

    from amp_lint import flake8_plugin

    # The plugin keeps one settings resolver per process, rooted at the working directory
    # flake8 started in: each in-process run is a new flake8 process for it.
    flake8_plugin._resolver.cache_clear()
    return _as_text(_in_process(main, ["flake8", "--isolated", *args], cwd, None))


def flake8_process(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """flake8 with `--isolated`, as its own process."""
    return subprocess.run(
        [sys.executable, "-m", "flake8", "--isolated", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _in_process(
    main: Callable[[list[str]], int | None], argv: list[str], cwd: Path, stdin: bytes | None
) -> subprocess.CompletedProcess[bytes]:
    from amp_lint.run import runner
    from amp_lint.run.cache import ResultCache

    # What a new process starts without: the caches it has considered pruning (once each
    # per process).
    ResultCache._considered.clear()
    out, err = io.BytesIO(), io.BytesIO()
    # Serial: forking a process pool from a test worker (which has threads of its own) can
    # crash the children; the tests of parallel runs use the real command.
    serial = mock.patch.object(runner, "PARALLEL_THRESHOLD", sys.maxsize)
    with serial, _process_state(argv, cwd, stdin or b"", out, err):
        try:
            status = main(argv[1:])
        except SystemExit as exit_request:
            code = exit_request.code
            status = code if isinstance(code, int) else (0 if code is None else 1)
        sys.stdout.flush()
        sys.stderr.flush()
    return subprocess.CompletedProcess(argv, status or 0, out.getvalue(), err.getvalue())


@contextlib.contextmanager
def _process_state(
    argv: list[str], cwd: Path, stdin: bytes, out: io.BytesIO, err: io.BytesIO
) -> Iterator[None]:
    """What a new process would have: this working directory, these streams (pipes, not
    terminals, as `capture_output` gives), its own argv."""
    saved = (os.getcwd(), sys.stdin, sys.stdout, sys.stderr, sys.argv)
    os.chdir(cwd)
    sys.argv = argv
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    sys.stderr = io.TextIOWrapper(err, encoding="utf-8", write_through=True)
    try:
        yield
    finally:
        # Detach so that the buffers outlive the wrappers (which would close them).
        for stream in (sys.stdin, sys.stdout, sys.stderr):
            with contextlib.suppress(ValueError):
                stream.flush()
            stream.detach()
        os.chdir(saved[0])
        sys.stdin, sys.stdout, sys.stderr, sys.argv = saved[1:]


def _as_text(result: subprocess.CompletedProcess[bytes]) -> subprocess.CompletedProcess[str]:
    """Decoded as `subprocess.run(text=True)` decodes: UTF-8 (this machine's locale) with
    universal newlines."""

    def decode(data: bytes) -> str:
        return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")

    return subprocess.CompletedProcess(
        result.args, result.returncode, decode(result.stdout), decode(result.stderr)
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
