"""Bad input never crashes, hangs or fails the whole run (issue 13): each case goes through the
real `amp-lint` command and checks that the bad file gets one clear line naming it, that no
traceback or internal error is printed, and that the good file beside it is still linted."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import pytest

from amp_lint.run.crash_isolation import IsolatingRunner
from tests.runners import AMP_LINT, NOBODY, as_user, can_run_as_nobody
from tests.runners import amp_lint_process as amp_lint  # crashes and hangs: the real process

# A file with one finding (AMP101 on line 5), linted beside every bad input.
GOOD = """\
import torch
def f(y, m):
    with torch.autocast("cuda"):
        z = y.half()
        z.masked_fill(m, -1e9)
"""
FINDING = "good.py:5:9: AMP101"


def _named(cases: list[tuple[str, ...]]) -> list[Any]:
    """Parameters named by their first value: the others hold whole programs, too long for a
    test id (pytest puts the id in an environment variable; Linux refuses one over 128 KiB)."""
    return [pytest.param(*case, id=case[0]) for case in cases]


def _deep(expression: str) -> str:
    """A file whose finding sits inside `expression` ({} marks where)."""
    hazard = "z.masked_fill(m, -1e9)"
    return (
        "import torch\ndef f(y, m, a):\n    with torch.autocast('cuda'):\n"
        f"        z = y.half()\n        x = {expression.format(hazard)}\n"
    )


def _assert_clean_run(result: subprocess.CompletedProcess[str]) -> None:
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    assert "internal error" not in output, output
    assert result.returncode in (0, 1, 2), result.returncode


def _project(tmp_path: Path, bad_name: str, bad_source: str) -> Path:
    (tmp_path / "good.py").write_text(GOOD)
    (tmp_path / bad_name).write_text(bad_source)
    return tmp_path


@pytest.mark.parametrize(
    ("name", "expression"),
    _named(
        [
            ("plus_chain", " + ".join(["a"] * 350) + " + {}"),
            ("long_plus_chain", " + ".join(["a"] * 2_000) + " + {}"),
            ("method_chain", "{}" + ".float()" * 170),
            ("nested_brackets", "(" * 150 + "{}" + ")" * 150),
            ("unary_chain", "-" * 2_000 + "{}"),
            ("conditional_chain", "a if a else " * 2_000 + "{}"),
            ("subscript_chain", "{}" + "[0]" * 1_000),
        ]
    ),
)
def test_deep_code_that_python_accepts_is_analysed(
    tmp_path: Path, name: str, expression: str
) -> None:
    """Syntax trees thousands of levels deep (CPython accepts them) gave RecursionError."""
    source = _deep(expression)
    ast.parse(source)  # valid Python, so amp-lint must analyse it
    (tmp_path / f"{name}.py").write_text(source)
    result = amp_lint(tmp_path, "check", "--no-cache", f"{name}.py")
    _assert_clean_run(result)
    assert f"{name}.py:5:" in result.stdout and "AMP101" in result.stdout, result.stderr


@pytest.mark.parametrize(
    ("name", "expression", "reason"),
    _named(
        [
            # libcst's native parser died with SIGSEGV on these; CPython refuses them.
            ("brackets", "(" * 1_600 + "{}" + ")" * 1_600, "too many nested parentheses"),
            ("calls", "f(" * 3_000 + "{}" + ")" * 3_000, "too many nested parentheses"),
            ("unary", "-" * 20_000 + "{}", "too deeply nested"),
            ("lambdas", "lambda: " * 10_000 + "{}", "too deeply nested"),
            # libcst took minutes over this one (one term a line, inside brackets).
            ("chain", "(" + " +\n".join(["a"] * 20_000) + " + {})", "too deeply nested"),
        ]
    ),
)
def test_code_python_refuses_as_too_deep_is_one_line(
    tmp_path: Path, name: str, expression: str, reason: str
) -> None:
    project = _project(tmp_path, f"{name}.py", _deep(expression))
    result = amp_lint(project, "check", "--no-cache", ".")
    _assert_clean_run(result)
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and f"{name}.py" in errors[0] and reason in errors[0], errors
    assert result.returncode == 2
    assert FINDING in result.stdout


def test_a_worker_that_dies_costs_only_its_own_file(tmp_path: Path) -> None:
    """A file that kills its worker process (as libcst's parser did with SIGSEGV) used to
    break the pool, then the serial fall-back died on it too: no output for any file.

    No valid input crashes a worker any more (that is the point), so the crash is made by
    wrapping the worker's function, in a process that then runs the real command line."""
    for index in range(12):
        (tmp_path / f"ok_{index:02}.py").write_text(GOOD)
    (tmp_path / "crash.py").write_text(GOOD)
    script = """
import os, signal, sys
from amp_lint.cli import main as cli
from amp_lint.run import runner
original = runner.process_job
def process_job(job, config):
    if job.path.endswith("crash.py"):
        os.kill(os.getpid(), signal.SIGSEGV)
    return original(job, config)
process_job.__qualname__ = "process_job"
runner.process_job = process_job
sys.exit(cli.main(["check", "--no-cache", "."]))
"""
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "crash.py" in errors[0] and "died" in errors[0], errors
    assert result.stdout.count("AMP101") == 12, result.stdout


class _PoolThatBreaksOnSubmit(ProcessPoolExecutor):
    """A pool whose worker died between two submissions: `submit` itself raises (seen under
    load on Python 3.9, where the crash above then ended the run with a traceback)."""

    def submit(self, *args: Any, **kwargs: Any) -> Any:
        raise BrokenProcessPool("a child process terminated abruptly")


def test_a_pool_that_breaks_on_submit_costs_no_job() -> None:
    pools: list[int] = []

    def make_pool(workers: int) -> ProcessPoolExecutor:
        pools.append(workers)
        if len(pools) == 1:
            return _PoolThatBreaksOnSubmit(workers)
        return ProcessPoolExecutor(workers)

    runner = IsolatingRunner(abs, make_pool, crashed=lambda job: None, workers=2)
    assert runner.run([-1, -2, -3]) == [1, 2, 3]
    assert len(pools) == 2  # the broken pool, then one that ran every job


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifo_and_device_named_py_do_not_hang(tmp_path: Path) -> None:
    project = _project(tmp_path, "empty.py", "")
    os.mkfifo(project / "fifo.py")
    os.symlink("/dev/zero", project / "zero.py")
    result = amp_lint(project, "check", "--no-cache", ".")
    _assert_clean_run(result)
    assert "fifo.py: cannot read: not a regular file (a FIFO)" in result.stderr
    assert "zero.py: cannot read: not a regular file (a device)" in result.stderr
    assert FINDING in result.stdout and result.returncode == 2


def test_a_file_past_the_size_cap_is_a_warning(tmp_path: Path) -> None:
    huge = "x = 1\n" * (3 * 1024 * 1024)  # 18 MiB
    project = _project(tmp_path, "huge.py", "import torch  # autocast\n" + huge)
    result = amp_lint(project, "check", "--no-cache", ".")
    _assert_clean_run(result)
    assert "warning: huge.py: not analysed: larger than 16 MB" in result.stderr
    assert FINDING in result.stdout and result.returncode == 1


def test_symlink_loops(tmp_path: Path) -> None:
    project = _project(tmp_path, "empty.py", "")
    os.symlink("self.py", project / "self.py")
    os.symlink(".", project / "here")  # a directory loop: never entered
    result = amp_lint(project, "check", "--no-cache", ".")
    _assert_clean_run(result)
    assert "self.py: cannot read: Too many levels of symbolic links" in result.stderr
    assert FINDING in result.stdout
    named = amp_lint(project, "check", "--no-cache", "self.py", "good.py")
    _assert_clean_run(named)
    assert "self.py: symlink loop" in named.stderr and named.returncode == 2
    assert FINDING in named.stdout


@pytest.mark.parametrize("cache", ["--no-cache", "--cache-dir=cache"])
def test_a_file_name_that_is_not_utf8(tmp_path: Path, cache: str) -> None:
    (tmp_path / "good.py").write_text(GOOD)
    name = os.fsdecode(b"bad\xff.py")
    try:
        (tmp_path / name).write_text(GOOD)
    except (OSError, UnicodeEncodeError):
        pytest.skip("this file system refuses names that are not UTF-8")
    result = subprocess.run(
        [str(AMP_LINT), "check", cache, "."], cwd=tmp_path, capture_output=True, timeout=120
    )
    assert b"Traceback" not in result.stderr and result.returncode == 1, result.stderr
    # Printed as the bytes the name has on disk, as ls prints it.
    assert b"bad\xff.py:5:9: AMP101" in result.stdout
    assert b"good.py:5:9: AMP101" in result.stdout


def _as_nobody() -> list[str]:
    if not can_run_as_nobody():
        pytest.skip("needs root, setpriv and an amp-lint that user nobody can run")
    return as_user(NOBODY)


def test_directories_that_cannot_be_listed(tmp_path: Path) -> None:
    prefix = _as_nobody()
    tmp_path.chmod(0o755)
    project = _project(tmp_path, "empty.py", "")
    locked = project / "locked"
    locked.mkdir()
    (locked / "inside.py").write_text(GOOD)
    locked.chmod(0)
    command = [*prefix, str(AMP_LINT), "check", "--no-cache"]
    walked = subprocess.run(
        [*command, "."], cwd=project, capture_output=True, text=True, timeout=120
    )
    _assert_clean_run(walked)
    assert "locked: cannot list directory: Permission denied" in walked.stderr
    assert FINDING in walked.stdout and walked.returncode == 2
    named = subprocess.run(
        [*command, "locked"], cwd=project, capture_output=True, text=True, timeout=120
    )
    _assert_clean_run(named)
    assert "locked: cannot list directory: Permission denied" in named.stderr
    assert named.returncode == 2  # was 0: nothing linted, nothing said


def _cached_project(tmp_path: Path) -> tuple[Callable[[], subprocess.CompletedProcess[str]], Path]:
    """A project with two findings, and a run of it with its cache in the returned folder."""
    project = _project(tmp_path, "other.py", GOOD.replace("-1e9", "-1e10"))
    cache = tmp_path / "cache"

    def run() -> subprocess.CompletedProcess[str]:
        return amp_lint(project, "check", f"--cache-dir={cache}", "good.py", "other.py")

    return run, cache


def test_damaged_cache_entries_are_computed_again(tmp_path: Path) -> None:
    """Single-bit flips in cache entries gave AttributeError or silently wrong output."""
    run, cache = _cached_project(tmp_path)
    expected = run()
    assert expected.returncode == 1 and expected.stdout.count("AMP101") == 2
    entries = [path for path in cache.rglob("*") if path.is_file() and len(path.parts) > 2]
    entries = [path for path in entries if path.name not in ("CACHEDIR.TAG", ".gitignore")]
    assert entries
    for entry in entries:
        original = entry.read_bytes()
        for position in range(0, len(original), max(1, len(original) // 4)):
            damaged = bytearray(original)
            damaged[position] ^= 1 << (position % 8)
            entry.write_bytes(bytes(damaged))
            again = run()
            assert (again.stdout, again.returncode) == (expected.stdout, 1), again.stderr
            assert "Traceback" not in again.stderr
        entry.write_bytes(original)


def _cache_entries(cache: Path) -> list[Path]:
    return [
        path
        for path in cache.glob("*/??/*")
        if path.is_file() and path.name not in ("CACHEDIR.TAG", ".gitignore")
    ]


def _with_checksum(payload: bytes) -> bytes:
    """An entry the cache's checksum accepts: only the codec stands between it and a run."""
    import hashlib

    return hashlib.blake2b(payload, digest_size=16).digest() + payload


def test_a_crafted_cache_entry_runs_no_code(tmp_path: Path) -> None:
    """Entries are data: a pickle that would run a command, or JSON naming a class outside
    the cache's types, is a miss, recomputed, and nothing runs (pickle.loads ran it)."""
    import pickle

    run, cache = _cached_project(tmp_path)
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self) -> tuple[Any, tuple[str]]:
            return (os.system, (f"touch {marker}",))

    expected = run()
    assert expected.returncode == 1 and expected.stdout.count("AMP101") == 2
    crafted = [
        pickle.dumps(Payload()),
        b'{"$class":"Popen","fields":{"args":"touch ran"}}',
        b'{"$class":"Finding","fields":{"path":"x.py"}}',  # fields of no version
        b'{"$enum":"FixSafety","value":"neither"}',
    ]
    for payload in crafted:
        for entry in _cache_entries(cache):
            entry.write_bytes(_with_checksum(payload))
        again = run()
        assert not marker.exists()
        assert (again.stdout, again.returncode) == (expected.stdout, 1), again.stderr
        assert "Traceback" not in again.stderr


def test_cache_entries_that_are_not_files_neither_hang_nor_crash(tmp_path: Path) -> None:
    """A FIFO would block a read forever, a link to /dev/zero never end: each is a miss."""
    run, cache = _cached_project(tmp_path)
    expected = run()
    for make in (os.mkfifo, lambda path: os.symlink("/dev/zero", path)):
        for entry in _cache_entries(cache):
            entry.unlink()
            make(entry)
        again = run()  # a hang fails on the subprocess timeout
        assert (again.stdout, again.returncode) == (expected.stdout, 1), again.stderr
        assert "Traceback" not in again.stderr
        shutil.rmtree(cache)
        run()


@pytest.mark.parametrize(
    ("name", "source", "finding"),
    _named(
        [
            # Found by tests/test_fuzz.py: the int did not fit a float (OverflowError).
            (
                "huge_int_fill",
                "z.masked_fill(m, -10 ** 400)\n        w = z.masked_fill(m, -1e9)",
                ":6:",
            ),
            # Folded with Python's unbounded integers, this took hours.
            (
                "tower",
                "z.masked_fill(m, ((10 ** 1000) ** 1000) ** 1000) + z.masked_fill(m, -1e9)",
                ":5:",
            ),
            # A literal past CPython's 4,300-digit conversion limit (SyntaxError from libcst).
            (
                "long_literal",
                "z.masked_fill(m, " + "9" * 5_000 + ") + z.masked_fill(m, -1e9)",
                ":5:",
            ),
            # Escapes libcst accepts and Python refuses (SyntaxError from libcst).
            ("bad_escape", 'torch.einsum("\\N{NO SUCH NAME}", z) + z.masked_fill(m, -1e9)', ":5:"),
            ("bad_device", 'z.to("\\N{NO SUCH NAME}").masked_fill(m, -1e9)', None),
        ]
    ),
)
def test_literals_that_cannot_be_read_exactly(
    tmp_path: Path, name: str, source: str, finding: str | None
) -> None:
    """Literals whose value Python cannot compute cheaply (or at all) have no value."""
    text = (
        "import torch\ndef f(y, m):\n    with torch.autocast('cuda'):\n"
        f"        z = y.half()\n        x = {source}\n"
    )
    (tmp_path / f"{name}.py").write_text(text)
    result = amp_lint(tmp_path, "check", "--no-cache", f"{name}.py")
    _assert_clean_run(result)
    if finding is not None:
        assert f"{name}.py{finding}" in result.stdout and "AMP101" in result.stdout, result


def _helper_chain(count: int) -> str:
    """`opt.step()` reached through `count` helpers, each calling the next."""
    helpers = "".join(f"def h{i}(model, opt):\n    h{i + 1}(model, opt)\n" for i in range(count))
    return (
        f"import torch\n{helpers}def h{count}(model, opt):\n    opt.step()\n"
        "def train(model, opt, x):\n    with torch.autocast('cuda'):\n"
        "        loss = model(x)\n        h0(model, opt)\n        loss = model(x)\n"
    )


def _method_chain(count: int) -> str:
    """A hazard reached through `count` methods, each calling the next on `self`."""
    methods = "".join(
        f"    def m{i}(self, x):\n        return self.m{i + 1}(x)\n" for i in range(count)
    )
    return (
        f"import torch\nfrom torch import nn\nclass M(nn.Module):\n{methods}"
        f"    def m{count}(self, x):\n        return x.masked_fill(self.mask, -1e9)\n"
        "    def forward(self, x):\n        with torch.autocast('cuda'):\n"
        "            return self.m0(x.half())\n"
    )


@pytest.mark.parametrize(
    ("name", "source", "finding"),
    _named(
        [
            # AMP307's summary of what a helper does recursed once per helper (RecursionError).
            ("helper_chain", _helper_chain(1_000), ":2007:9: AMP307"),
            # Call-graph walks recursed once per method (RecursionError); the interpreter follows
            # calls 10 deep, so the hazard itself is out of reach.
            ("method_chain", _method_chain(3_000), None),
        ]
    ),
)
def test_long_call_chains(tmp_path: Path, name: str, source: str, finding: str | None) -> None:
    (tmp_path / f"{name}.py").write_text(source)
    result = amp_lint(tmp_path, "check", "--no-cache", f"{name}.py")
    _assert_clean_run(result)
    assert result.stderr.startswith(("Checked 1 file", "Found")), result.stderr
    if finding is not None:
        assert f"{name}.py{finding}" in result.stdout, result.stdout


# Inputs that crashed or hung the whole run: each is one line naming it and exit status 2.


def _one_error_line(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1, result.stderr
    assert all(word in errors[0] for word in words), errors[0]


def test_a_pyproject_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_bytes(b'[tool.amp-lint]\nselect = ["AMP1"]\n# caf\xe9\n')
    (tmp_path / "train.py").write_text(GOOD)
    result = amp_lint(tmp_path, "check", "--no-cache", "train.py")
    _one_error_line(result, "pyproject.toml", "not UTF-8")


@pytest.mark.parametrize("kind", ["device", "fifo", "directory"])
def test_a_config_that_is_not_a_regular_file_is_one_line(tmp_path: Path, kind: str) -> None:
    (tmp_path / "train.py").write_text(GOOD)
    config = {"device": Path("/dev/zero"), "fifo": tmp_path / "c.toml", "directory": tmp_path}
    kind_word = {"device": "a device", "fifo": "a FIFO", "directory": "directory"}[kind]
    if kind == "fifo":
        os.mkfifo(config[kind])
    result = amp_lint(tmp_path, "check", "--no-cache", "--config", str(config[kind]), "train.py")
    _one_error_line(result, str(config[kind]), kind_word)


def _shell(cwd: Path, redirections: str, *args: str) -> subprocess.CompletedProcess[str]:
    """amp-lint started by a shell with `redirections` applied to it (closing a stream)."""
    command = " ".join([str(AMP_LINT), *args, redirections])
    return subprocess.run(
        ["sh", "-c", command], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_standard_input_closed_is_one_line(tmp_path: Path) -> None:
    _one_error_line(_shell(tmp_path, "<&-", "check", "--no-cache", "-"), "standard input")


def test_standard_output_closed_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(GOOD)
    result = subprocess.run(
        ["sh", "-c", f"exec 3>&2; {AMP_LINT} check --no-cache train.py 2>&3 >&-"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    _one_error_line(result, "standard output is closed")


def test_standard_input_that_never_ends_is_one_line(tmp_path: Path) -> None:
    with open("/dev/zero", "rb") as endless:
        result = subprocess.run(
            [str(AMP_LINT), "check", "--no-cache", "-"],
            cwd=tmp_path,
            stdin=endless,
            capture_output=True,
            text=True,
            timeout=120,
        )
    _one_error_line(result, "standard input", "larger than 16 MB")


@pytest.mark.parametrize(("typed", "meant"), [("chek", "check"), ("rulez", "rule")])
def test_a_mistyped_command_is_named(tmp_path: Path, typed: str, meant: str) -> None:
    (tmp_path / "train.py").write_text(GOOD)
    result = amp_lint(tmp_path, typed, "train.py")
    _one_error_line(result, f"unknown command `{typed}`", f"did you mean `{meant}`")
    # A path that exists is linted, whatever its name.
    (tmp_path / typed).mkdir()
    (tmp_path / typed / "train.py").write_text(GOOD)
    assert amp_lint(tmp_path, "--no-cache", typed).returncode == 1
