"""`amp-lint --fix` never loses data: an edit saved during the run, a file its user may not
write, its owner, group, extended attributes and hard links, a write that fails, temporary
files of interrupted runs, the last line break of a file, and a fix of a large file in a few
analyses. Everything runs the real `amp-lint` command.

An edit "saved during the run" is made deterministic without a test-only path in amp-lint: a
`sitecustomize` module on PYTHONPATH (which every Python process, console scripts included,
imports at start-up) installs an audit hook (PEP 578) that appends to the file when amp-lint
creates its temporary copy, or opens the file for writing in place, that is, after the file
was read and analysed and before it is replaced. The hook only watches; it patches nothing.

The permission tests run amp-lint as an unprivileged user (`setpriv` to nobody) when the
tests run as root, and are skipped otherwise.
"""

from __future__ import annotations

import ast
import errno
import os
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.runners import AMP_LINT, NOBODY, amp_lint_bytes, as_user, can_run_as_nobody

# AMP401 fires on line 3 (a safe fix: `torch.amp.autocast("cuda")`).
DEPRECATED = b"import torch\n\nwith torch.cuda.amp.autocast():\n    pass\n"
FIXED = b'import torch\n\nwith torch.amp.autocast("cuda"):\n    pass\n'
FINDING = "x.py:3:6: AMP401"

EDIT = b"# saved while amp-lint ran\n"

SITECUSTOMIZE = """
import os
import sys

_target = os.environ.get("AMP_LINT_TEST_EDIT")
if _target:
    _name = os.path.basename(_target)
    _done = []

    def _edit_during_the_write(event, args):
        if _done:
            return
        copying = event == "tempfile.mkstemp" and os.path.basename(args[0]).startswith(
            "." + _name + "."
        )
        in_place = (
            event == "open"
            and isinstance(args[0], str)
            and os.path.basename(args[0]) == _name
            and isinstance(args[1], str)
            and "+" in args[1]
        )
        if copying or in_place:
            _done.append(True)
            with open(_target, "ab") as file:
                file.write(os.environb[b"AMP_LINT_TEST_EDIT_BYTES"])
            open(os.environ["AMP_LINT_TEST_EDIT_MARK"], "w").close()

    sys.addaudithook(_edit_during_the_write)
"""


def amp_lint(
    cwd: Path, *args: str, env: dict[str, str] | None = None, user: int | None = None
) -> subprocess.CompletedProcess[bytes]:
    if env is None and user is None:
        return amp_lint_bytes(cwd, "--no-cache", *args)
    # Another user, or an environment that injects code (an audit hook): the real process.
    command = [str(AMP_LINT), "--no-cache", *args]
    if user is not None:
        command = [*as_user(user), *command]
    return subprocess.run(
        command,
        cwd=cwd,
        capture_output=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def out(result: subprocess.CompletedProcess[bytes]) -> list[str]:
    return [" ".join(line.split(" ")[:2]) for line in result.stdout.decode().splitlines()]


def err(result: subprocess.CompletedProcess[bytes]) -> list[str]:
    return result.stderr.decode().splitlines()


def write(directory: Path, name: str, data: bytes) -> Path:
    path = directory / name
    path.write_bytes(data)
    return path


# An edit saved during the run


@pytest.fixture
def editing_hook(tmp_path: Path) -> Path:
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE)
    return folder


def edit_during_fix(hook: Path, target: Path) -> dict[str, str]:
    return {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")])),
        "AMP_LINT_TEST_EDIT": str(target),
        "AMP_LINT_TEST_EDIT_BYTES": EDIT.decode(),
        "AMP_LINT_TEST_EDIT_MARK": str(hook / "edited"),
    }


def test_the_hook_edits_the_file_amp_lint_writes(tmp_path: Path, editing_hook: Path) -> None:
    # Without it the next tests would pass for the wrong reason.
    project = tmp_path / "project"
    project.mkdir()
    path = write(project, "x.py", DEPRECATED)
    environment = edit_during_fix(editing_hook, path)
    assert amp_lint(project, "x.py", env=environment).returncode == 1
    assert not (editing_hook / "edited").exists()  # a lint alone writes nothing: no edit
    assert path.read_bytes() == DEPRECATED
    amp_lint(project, "--fix", "x.py", env=environment)
    assert (editing_hook / "edited").exists()


def test_an_edit_saved_during_the_run_is_kept(tmp_path: Path, editing_hook: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    path = write(project, "x.py", DEPRECATED)
    other = write(project, "y.py", DEPRECATED)
    result = amp_lint(project, "--fix", "x.py", "y.py", env=edit_during_fix(editing_hook, path))
    assert path.read_bytes() == DEPRECATED + EDIT
    assert other.read_bytes() == FIXED  # the other file is fixed as usual
    assert "amp-lint: warning: x.py: changed during the run, not fixed" in err(result)
    assert out(result) == [FINDING]  # still there, and the exit status says so
    assert err(result)[-1] == "Fixed 1 finding, 1 remaining."
    assert result.returncode == 1
    assert sorted(p.name for p in project.iterdir()) == ["x.py", "y.py"]


def test_an_edit_saved_during_an_in_place_write_is_kept(tmp_path: Path, editing_hook: Path) -> None:
    # A file with another hard link is written in place; the edit is seen there too.
    project = tmp_path / "project"
    project.mkdir()
    path = write(project, "x.py", DEPRECATED)
    os.link(path, project / "link.txt")
    result = amp_lint(project, "--fix", "x.py", env=edit_during_fix(editing_hook, path))
    assert path.read_bytes() == DEPRECATED + EDIT
    assert "amp-lint: warning: x.py: changed during the run, not fixed" in err(result)
    assert (out(result), result.returncode) == ([FINDING], 1)


def test_a_file_removed_during_the_run_is_not_recreated(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    hook = tmp_path / "site"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        "import os, sys\n"
        "def _hook(event, args):\n"
        "    if event == 'tempfile.mkstemp' and os.path.exists('x.py'):\n"
        "        os.unlink('x.py')\n"
        "sys.addaudithook(_hook)\n"
    )
    write(project, "x.py", DEPRECATED)
    path = os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")]))
    result = amp_lint(project, "--fix", "x.py", env={"PYTHONPATH": path})
    assert sorted(p.name for p in project.iterdir()) == []
    assert "amp-lint: warning: x.py: changed during the run, not fixed" in err(result)
    assert result.returncode == 1


# Permissions, owner, extended attributes, hard links


needs_nobody = pytest.mark.skipif(
    not can_run_as_nobody(),
    reason="needs root, setpriv and an amp-lint that user nobody can run",
)
needs_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root"
)


@pytest.fixture
def shared_directory() -> Iterator[Path]:
    """A directory anyone may write (pytest's tmp_path is private to its user)."""
    directory = Path(tempfile.mkdtemp(prefix="amp-lint-fix-safety-"))
    directory.chmod(0o777)
    try:
        yield directory
    finally:
        shutil.rmtree(directory)


def test_a_read_only_file_is_not_replaced(tmp_path: Path) -> None:
    # The directory is writable, so a rename could replace the file; its mode says no.
    path = write(tmp_path, "x.py", DEPRECATED)
    path.chmod(0o444)
    result = amp_lint(tmp_path, "--fix", "x.py")
    assert path.read_bytes() == DEPRECATED
    assert stat.S_IMODE(path.stat().st_mode) == 0o444
    assert "amp-lint: error: x.py: cannot write: the file is read-only" in err(result)
    # The finding that was fixed in memory is still reported: the file still has it.
    assert out(result) == [FINDING]
    assert err(result)[-1] == "Fixed 0 findings, 1 remaining."
    assert result.returncode == 2


@needs_nobody
def test_another_users_file_is_not_replaced(shared_directory: Path) -> None:
    path = write(shared_directory, "x.py", DEPRECATED)
    path.chmod(0o644)  # root's, readable by nobody, not writable
    result = amp_lint(shared_directory, "--fix", "x.py", user=NOBODY)
    assert path.read_bytes() == DEPRECATED
    assert path.stat().st_uid == 0
    assert "amp-lint: error: x.py: cannot write: Permission denied" in err(result)
    assert (out(result), result.returncode) == ([FINDING], 2)
    assert sorted(p.name for p in shared_directory.iterdir()) == ["x.py"]


@needs_nobody
def test_a_failed_write_still_reports_the_findings(shared_directory: Path) -> None:
    # nobody may write the file but not create files beside it, and the fix is written in
    # place; when that fails too (a read-only file), the findings stay in the report.
    folder = shared_directory / "locked"
    folder.mkdir()
    writable = write(folder, "x.py", DEPRECATED)
    os.chown(writable, NOBODY, NOBODY)
    folder.chmod(0o755)
    result = amp_lint(folder, "--fix", "x.py", user=NOBODY)
    assert (result.returncode, writable.read_bytes()) == (0, FIXED), err(result)
    assert writable.stat().st_uid == NOBODY
    writable.write_bytes(DEPRECATED)
    writable.chmod(0o444)
    result = amp_lint(folder, "--fix", "x.py", user=NOBODY)
    assert writable.read_bytes() == DEPRECATED
    assert (out(result), result.returncode) == ([FINDING], 2)
    assert "amp-lint: error: x.py: cannot write: the file is read-only" in err(result)


@needs_nobody
def test_a_group_writable_file_keeps_its_owner(shared_directory: Path) -> None:
    # nobody may write root's file through its group: the fix goes into the file itself, not
    # into a copy that nobody would own.
    path = write(shared_directory, "x.py", DEPRECATED)
    os.chown(path, 0, NOBODY)
    path.chmod(0o664)
    result = amp_lint(shared_directory, "--fix", "x.py", user=NOBODY)
    assert (result.returncode, path.read_bytes()) == (0, FIXED), err(result)
    status = path.stat()
    assert (status.st_uid, status.st_gid, stat.S_IMODE(status.st_mode)) == (0, NOBODY, 0o664)
    assert sorted(p.name for p in shared_directory.iterdir()) == ["x.py"]


@needs_root
def test_root_keeps_the_owner_of_the_file_it_fixes(tmp_path: Path) -> None:
    path = write(tmp_path, "x.py", DEPRECATED)
    os.chown(path, NOBODY, NOBODY)
    path.chmod(0o640)
    result = amp_lint(tmp_path, "--fix", "x.py")
    assert (result.returncode, path.read_bytes()) == (0, FIXED), err(result)
    status = path.stat()
    assert (status.st_uid, status.st_gid, stat.S_IMODE(status.st_mode)) == (
        NOBODY,
        NOBODY,
        0o640,
    )


def test_extended_attributes_are_kept(tmp_path: Path) -> None:
    path = write(tmp_path, "x.py", DEPRECATED)
    try:
        os.setxattr(path, "user.amp_lint_test", b"kept")
    except (AttributeError, OSError) as error:
        if isinstance(error, OSError) and error.errno not in (errno.ENOTSUP, errno.EPERM):
            raise
        pytest.skip("no user extended attributes here")
    inode = path.stat().st_ino
    result = amp_lint(tmp_path, "--fix", "x.py")
    assert (result.returncode, path.read_bytes()) == (0, FIXED), err(result)
    assert path.stat().st_ino != inode  # replaced atomically, not written in place
    assert os.getxattr(path, "user.amp_lint_test") == b"kept"


def test_hard_links_stay_linked(tmp_path: Path) -> None:
    path = write(tmp_path, "x.py", DEPRECATED)
    other = tmp_path / "other_name.txt"
    os.link(path, other)
    path.chmod(0o640)
    result = amp_lint(tmp_path, "--fix", "x.py")
    assert (result.returncode, path.read_bytes()) == (0, FIXED), err(result)
    assert other.read_bytes() == FIXED
    assert path.stat().st_ino == other.stat().st_ino
    assert path.stat().st_nlink == 2
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert amp_lint(tmp_path, "--fix", "x.py").returncode == 0
    assert path.read_bytes() == FIXED


# Temporary files of interrupted runs


def _temporary(directory: Path, name: str, age_seconds: float) -> Path:
    path = write(directory, name, b"half a fix")
    moment = time.time() - age_seconds
    os.utime(path, (moment, moment))
    return path


def test_temporary_files_of_interrupted_runs_are_removed(tmp_path: Path) -> None:
    project = tmp_path / "project"
    untouched = tmp_path / "untouched"
    project.mkdir()
    untouched.mkdir()
    write(project, "x.py", DEPRECATED)
    dead = 2**22 + 1  # above any pid_max: no process has it
    alive = os.getpid()
    stale = [
        _temporary(project, f".x.py.{dead}-abcd_123.amp-lint.tmp", 120),
        _temporary(project, f".other.py.{dead}-zzzzzzzz.amp-lint.tmp", 120),
        _temporary(project, f".x.py.{alive}-abcdefgh.amp-lint.tmp", 2 * 3600),
        _temporary(project, ".x.py.k2j4h5g6.amp-lint.tmp", 2 * 3600),  # older versions
    ]
    kept = [
        # A live run's, or too recent to tell (a run elsewhere may share the pid).
        _temporary(project, f".x.py.{alive}-hgfedcba.amp-lint.tmp", 0),
        _temporary(project, f".x.py.{alive}-bcdefghi.amp-lint.tmp", 120),
        _temporary(project, f".x.py.{dead}-cdefghij.amp-lint.tmp", 5),
        _temporary(project, ".x.py.k2j4h5g7.amp-lint.tmp", 120),
        # Not amp-lint's names.
        _temporary(project, "notes.amp-lint.tmp", 2 * 3600),
        _temporary(project, ".x.py.ABCDEFGH.amp-lint.tmp", 2 * 3600),
        _temporary(project, ".x.py.abcdefgh.tmp", 2 * 3600),
        # Not in a directory this run writes to.
        _temporary(untouched, f".y.py.{dead}-abcdefgh.amp-lint.tmp", 2 * 3600),
    ]
    directory = project / f".d.py.{dead}-abcdefgh.amp-lint.tmp"
    directory.mkdir()
    result = amp_lint(project, "--fix", "x.py")
    assert (result.returncode, (project / "x.py").read_bytes()) == (0, FIXED), err(result)
    assert [path.name for path in stale if path.exists()] == []
    assert [path.name for path in kept if not path.exists()] == []
    assert directory.is_dir()


def test_a_lint_without_fixes_removes_nothing(tmp_path: Path) -> None:
    write(tmp_path, "x.py", DEPRECATED)
    old = _temporary(tmp_path, f".x.py.{2**22 + 1}-abcdefgh.amp-lint.tmp", 2 * 3600)
    assert amp_lint(tmp_path, "x.py").returncode == 1
    assert old.exists()


# Line breaks


@pytest.mark.parametrize(
    ("name", "newline", "final"),
    [
        ("cr", b"\r", True),
        ("cr_no_final_newline", b"\r", False),
        ("crlf", b"\r\n", True),
        ("crlf_no_final_newline", b"\r\n", False),
        ("lf_no_final_newline", b"\n", False),
    ],
)
def test_fix_keeps_every_line_break(tmp_path: Path, name: str, newline: bytes, final: bool) -> None:
    lines = [b"import torch", b"", b"with torch.cuda.amp.autocast():", b"    pass", b"# end"]
    source = newline.join(lines) + (newline if final else b"")
    path = write(tmp_path, "x.py", source)
    result = amp_lint(tmp_path, "--fix", "x.py")
    assert result.returncode == 0, err(result)
    expected = source.replace(b"torch.cuda.amp.autocast()", b'torch.amp.autocast("cuda")')
    assert path.read_bytes() == expected
    assert amp_lint(tmp_path, "--fix", "x.py").returncode == 0
    assert path.read_bytes() == expected


def test_fix_keeps_mixed_line_breaks(tmp_path: Path) -> None:
    source = (
        b"import torch\r\n\nwith torch.cuda.amp.autocast():\r    pass\n"
        b"with torch.cuda.amp.autocast():\r\n    x = 1\r"
    )
    path = write(tmp_path, "x.py", source)
    result = amp_lint(tmp_path, "--fix", "x.py")
    assert result.returncode == 0, err(result)
    expected = source.replace(b"torch.cuda.amp.autocast()", b'torch.amp.autocast("cuda")')
    assert path.read_bytes() == expected


# A large file: every fix applied at once, the result right and stable


STRESS_HEADER = "import torch\nfrom torch.cuda.amp import autocast\n"
STRESS_BEFORE = """
def sums{i}(x, w):
    with torch.autocast("cpu", dtype=torch.float16):
        h = (x @ w).half()
        return h.sum()


def fills{i}(x, w, pad):
    with torch.autocast("cuda"):
        h = x @ w
        return h.masked_fill(pad, -1e9)


def deprecated{i}(x, w):
    with autocast():
        h = x @ w
        return h.var(0)
"""
STRESS_AFTER = """
def sums{i}(x, w):
    with torch.autocast("cpu", dtype=torch.float16):
        h = (x @ w).half()
        return h.float().sum()


def fills{i}(x, w, pad):
    with torch.autocast("cuda"):
        h = x @ w
        return h.masked_fill(pad, torch.finfo(h.dtype).min)


def deprecated{i}(x, w):
    with torch.amp.autocast("cuda"):
        h = x @ w
        return h.to(torch.promote_types(h.dtype, torch.float32)).var(0)
"""


def test_a_file_with_hundreds_of_fixes(tmp_path: Path) -> None:
    count = 120
    before = STRESS_HEADER + "".join(STRESS_BEFORE.format(i=i) for i in range(count))
    after = "import torch\n" + "".join(STRESS_AFTER.format(i=i) for i in range(count))
    path = write(tmp_path, "big.py", before.encode())
    result = amp_lint(tmp_path, "--fix", "--unsafe-fixes", "big.py")
    assert result.returncode == 0, err(result)
    assert err(result) == [f"Fixed {4 * count} findings, 0 remaining."]
    assert path.read_text() == after
    ast.parse(after)
    again = amp_lint(tmp_path, "--fix", "--unsafe-fixes", "big.py")
    assert (again.returncode, again.stdout) == (0, b"")
    assert err(again) == ["Checked 1 file; no findings."]
    assert path.read_text() == after


def test_an_import_still_used_is_not_removed(tmp_path: Path) -> None:
    # The rewritten calls no longer use `autocast`, but a reference that is not called does,
    # and so does a string naming it (here `__all__`).
    for kept_use in ("REFERENCE = autocast\n", '__all__ = ["autocast"]\n'):
        source = STRESS_HEADER + kept_use + STRESS_BEFORE.format(i=0)
        path = write(tmp_path, "x.py", source.encode())
        amp_lint(tmp_path, "--fix", "--unsafe-fixes", "x.py")
        fixed = path.read_text()
        assert "from torch.cuda.amp import autocast\n" in fixed, kept_use
        assert 'with torch.amp.autocast("cuda"):' in fixed
