"""The `amp-lint` command: its `main` in this process for most tests, and the console script
as a subprocess, the way users and pre-commit run it, for those about the process itself.

Most tests need a rule that fires; they use AMP401 (`torch.cuda.amp.autocast()` ->
`torch.amp.autocast("cuda")`, a safe fix) and compare codes and positions, not messages.
"""

from __future__ import annotations

import ast
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from runners import amp_lint_bytes

from amp_lint.run.runner import Job, process_job
from amp_lint.settings.config import Config
from amp_lint.sources.files import has_amp_vocabulary
from amp_lint.sources.fix_writing import write_atomically

AMP_LINT = Path(sys.executable).parent / "amp-lint"

# AMP401 fires on line 3, column 6 (1-based) of each of these.
DEPRECATED = b"import torch\n\nwith torch.cuda.amp.autocast():\n    pass\n"
CLEAN = b'import torch\n\nwith torch.autocast("cuda"):\n    pass\n'
NO_AMP = b"import torch\n\nx = torch.ones(3).sum()\n"
LEGACY_IGNORED = b'[tool.amp-lint]\nper-file-ignores = {"legacy/*" = ["AMP4"]}\n'


def amp_lint(
    cwd: Path, *args: str, stdin: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    """`amp-lint ARGS` in this process (tests/runners.py); `amp_lint_process` is the console
    script, for the tests about the process itself."""
    return amp_lint_bytes(cwd, *args, stdin=stdin)


def amp_lint_process(
    cwd: Path, *args: str, stdin: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [str(AMP_LINT), *args], cwd=cwd, input=stdin, capture_output=True, timeout=120
    )


def out(result: subprocess.CompletedProcess[bytes]) -> list[str]:
    return result.stdout.decode().splitlines()


def err(result: subprocess.CompletedProcess[bytes]) -> list[str]:
    return result.stderr.decode().splitlines()


def positions(result: subprocess.CompletedProcess[bytes]) -> list[str]:
    """`path:line:col: CODE` of each output line, without the message."""
    return [" ".join(line.split(" ")[:2]) for line in out(result)]


def write(directory: Path, name: str, data: bytes) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write(tmp_path, "deprecated.py", DEPRECATED)
    write(tmp_path, "clean.py", CLEAN)
    return tmp_path


# exit codes and output


def test_findings_exit_1_with_flake8_style_lines(project: Path) -> None:
    result = amp_lint_process(project, "check", "deprecated.py", "clean.py")
    assert result.returncode == 1
    assert positions(result) == ["deprecated.py:3:6: AMP401"]
    assert re.fullmatch(r"deprecated\.py:3:6: AMP401 \S.*", out(result)[0])
    assert err(result) == ["Found 1 finding (1 fixable with --fix)."]


def test_clean_exit_0_says_what_it_checked(project: Path) -> None:
    # Not silent, as ruff's "All checks passed!": silence would look AMP-safe even when
    # nothing was analysed (tests/test_config_discovery.py); -q keeps it silent.
    result = amp_lint(project, "check", "clean.py")
    assert (result.returncode, result.stdout) == (0, b"")
    assert err(result) == ["Checked 1 file; no findings."]
    quiet = amp_lint(project, "check", "-q", "clean.py")
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, b"", b"")


def test_exit_zero(project: Path) -> None:
    result = amp_lint(project, "check", "--exit-zero", "deprecated.py")
    assert result.returncode == 0
    assert positions(result) == ["deprecated.py:3:6: AMP401"]


@pytest.mark.parametrize(
    "args",
    [["check", "--format", "xml"], ["check", "--select", "AMP,,4x"], ["check", "--bogus"]],
)
def test_usage_errors_exit_2(project: Path, args: list[str]) -> None:
    result = amp_lint(project, *args)
    assert result.returncode == 2
    assert result.stdout == b""


def test_missing_path_exit_2_and_others_still_linted(project: Path) -> None:
    result = amp_lint(project, "check", "nowhere.py", "deprecated.py")
    assert result.returncode == 2
    assert positions(result) == ["deprecated.py:3:6: AMP401"]
    assert err(result)[0] == "amp-lint: error: nowhere.py: no such file or directory"


def test_unparsable_file_is_one_error_line_and_others_are_linted(project: Path) -> None:
    write(project, "broken.py", b"import torch\nwith torch.autocast(:\n    pass\n")
    result = amp_lint(project, "check", "broken.py", "deprecated.py")
    assert result.returncode == 2
    assert positions(result) == ["deprecated.py:3:6: AMP401"]
    errors = [line for line in err(result) if line.startswith("amp-lint: error:")]
    assert len(errors) == 1
    assert errors[0].startswith("amp-lint: error: broken.py:")


def test_undecodable_file_is_an_error(project: Path) -> None:
    write(project, "binary.py", b"# autocast\nx = '\xff\xfe'\n")
    result = amp_lint(project, "check", "binary.py")
    assert result.returncode == 2
    assert [line for line in err(result) if "binary.py" in line]


def test_internal_error_names_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr("amp_lint.run.engine.analyse_source", explode)
    job = Job("pkg/m.py", DEPRECATED, fix=False, unsafe=False)
    outcome = process_job(job, Config())
    assert outcome.error is not None
    assert outcome.error.startswith("pkg/m.py: internal error")
    assert "\n" not in outcome.error


def test_json_format(project: Path) -> None:
    result = amp_lint(project, "check", "--format", "json", "deprecated.py", "clean.py")
    assert result.returncode == 1
    findings = json.loads(result.stdout)
    assert len(findings) == 1
    finding = findings[0]
    assert set(finding) == {
        "path",
        "line",
        "column",
        "end_line",
        "end_column",
        "code",
        "name",
        "message",
        "summary",
        "fix",
        "url",
        "via",
        "cell",
    }
    assert finding["cell"] is None and finding["via"] == []
    assert finding["url"].endswith("AMP401-deprecated-amp-api.md")
    assert (finding["path"], finding["line"], finding["column"]) == ("deprecated.py", 3, 6)
    assert finding["code"] == "AMP401"
    assert finding["fix"]["safety"] == "safe"
    assert finding["fix"]["title"]


def test_json_format_clean_is_empty_array(project: Path) -> None:
    result = amp_lint(project, "check", "--format", "json", "clean.py")
    assert result.returncode == 0
    assert json.loads(result.stdout) == []


def test_statistics(project: Path) -> None:
    write(project, "more.py", DEPRECATED)
    result = amp_lint(project, "check", "--statistics", ".")
    assert result.returncode == 1
    assert len(out(result)) == 1
    assert out(result)[0].split()[:2] == ["2", "AMP401"]
    assert "deprecated-amp-api" in out(result)[0]


def test_many_files_in_parallel_are_sorted(tmp_path: Path) -> None:
    for number in range(20):
        write(tmp_path, f"pkg/m{number:02d}.py", DEPRECATED)
    result = amp_lint_process(tmp_path, "check", "pkg")  # the process pool: a real process
    assert result.returncode == 1
    assert positions(result) == [f"pkg/m{n:02d}.py:3:6: AMP401" for n in range(20)]


# rule selection and configuration


@pytest.mark.parametrize(
    ("args", "found"),
    [
        (["--select", "AMP0"], False),
        (["--select", "AMP4"], True),
        (["--select", "AMP401"], True),
        (["--ignore", "AMP401"], False),
        (["--ignore", "AMP0,AMP4"], False),
        (["--select", "AMP0", "--extend-select", "AMP401"], True),
    ],
)
def test_select_and_ignore(project: Path, args: list[str], found: bool) -> None:
    result = amp_lint(project, "check", *args, "deprecated.py")
    assert result.returncode == (1 if found else 0)
    assert positions(result) == (["deprecated.py:3:6: AMP401"] if found else [])


@pytest.mark.parametrize(
    ("table", "found"),
    [
        ('select = ["AMP0"]', False),
        ('ignore = ["AMP401"]', False),
        ('select = ["AMP0"]\nextend-select = ["AMP4"]', True),
        ('per-file-ignores = { "deprecated.py" = ["AMP401"] }', False),
        ('per-file-ignores = { "other/*.py" = ["AMP401"] }', True),
        ('exclude = ["deprecated.py"]', False),
    ],
)
def test_pyproject_settings(project: Path, table: str, found: bool) -> None:
    write(project, "pyproject.toml", f"[tool.amp-lint]\n{table}\n".encode())
    result = amp_lint(project, "check", "deprecated.py")
    assert result.returncode == (1 if found else 0), result.stderr
    assert bool(result.stdout) == found


def test_per_file_ignores_are_relative_to_the_config(project: Path) -> None:
    write(project, "pyproject.toml", LEGACY_IGNORED)
    write(project, "legacy/old.py", DEPRECATED)
    write(project, "new/mod.py", DEPRECATED)
    result = amp_lint(project / "legacy", "check", ".", "../new")
    assert positions(result) == ["../new/mod.py:3:6: AMP401"]


def test_exclude_skips_walked_and_named_files(project: Path) -> None:
    write(project, "pyproject.toml", b'[tool.amp-lint]\nextend-exclude = ["generated"]\n')
    write(project, "generated/gen.py", DEPRECATED)
    assert positions(amp_lint(project, "check")) == ["deprecated.py:3:6: AMP401"]
    # pre-commit names every staged file: the exclude must still apply.
    assert amp_lint(project, "check", "generated/gen.py").returncode == 0


def test_command_line_select_wins_over_configured_ignore(project: Path) -> None:
    write(project, "pyproject.toml", b'[tool.amp-lint]\nignore = ["AMP401"]\n')
    assert amp_lint(project, "check", "deprecated.py").returncode == 0
    assert amp_lint(project, "check", "--select", "AMP401", "deprecated.py").returncode == 1


def test_config_found_in_parent_directory(project: Path) -> None:
    write(project, "pyproject.toml", b'[tool.amp-lint]\nignore = ["AMP401"]\n')
    write(project, "sub/deprecated.py", DEPRECATED)
    assert amp_lint(project / "sub", "check", "deprecated.py").returncode == 0


def test_pyproject_without_table_is_passed_over(project: Path) -> None:
    write(project, "pyproject.toml", b'[tool.amp-lint]\nignore = ["AMP401"]\n')
    write(project, "sub/pyproject.toml", b'[project]\nname = "sub"\n')
    write(project, "sub/deprecated.py", DEPRECATED)
    assert amp_lint(project / "sub", "check", "deprecated.py").returncode == 0


def test_explicit_config_file(project: Path) -> None:
    write(project, "ci.toml", b'[tool.amp-lint]\nselect = ["AMP0"]\n')
    assert amp_lint(project, "check", "--config", "ci.toml", "deprecated.py").returncode == 0


@pytest.mark.parametrize(
    ("table", "named"),
    [
        ('selct = ["AMP"]', "selct"),
        ('select = "AMP"', "select"),
        ("forward-under-autocast = 1", "forward-under-autocast"),
        ('per-file-ignores = { "a.py" = "AMP401" }', "per-file-ignores"),
        ('ignore = ["not a code"]', "ignore"),
    ],
)
def test_bad_config_exit_2_naming_file_and_key(project: Path, table: str, named: str) -> None:
    write(project, "pyproject.toml", f"[tool.amp-lint]\n{table}\n".encode())
    result = amp_lint(project, "check", "deprecated.py")
    assert result.returncode == 2
    assert result.stdout == b""
    assert len(err(result)) == 1
    assert "pyproject.toml" in err(result)[0]
    assert named in err(result)[0]


def test_invalid_toml_exit_2(project: Path) -> None:
    write(project, "pyproject.toml", b"[tool.amp-lint\n")
    result = amp_lint(project, "check", "deprecated.py")
    assert result.returncode == 2
    assert "pyproject.toml" in result.stderr.decode()


# file discovery


def test_directory_discovery_skips_environments_and_build_output(tmp_path: Path) -> None:
    write(tmp_path, "src/pkg/mod.py", DEPRECATED)
    write(tmp_path, "src/pkg/stub.pyi", DEPRECATED)
    write(tmp_path, "src/pkg/notes.txt", DEPRECATED)
    for skipped in [".venv", ".git", "build", "dist", "__pycache__", "x.egg-info", ".tox"]:
        write(tmp_path, f"{skipped}/mod.py", DEPRECATED)
    write(tmp_path, "env/pyvenv.cfg", b"home = /usr/bin\n")
    write(tmp_path, "env/lib/mod.py", DEPRECATED)
    result = amp_lint(tmp_path, "check")
    assert positions(result) == ["src/pkg/mod.py:3:6: AMP401", "src/pkg/stub.pyi:3:6: AMP401"]
    # A file named explicitly is linted even inside a skipped directory.
    assert positions(amp_lint(tmp_path, "check", "build/mod.py")) == ["build/mod.py:3:6: AMP401"]


def test_files_without_amp_vocabulary_are_not_parsed_by_libcst(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # They cannot have findings: CPython's parser checks their syntax (test_syntax_errors.py),
    # libcst's (the analysis's, several times slower) never sees them.
    import libcst

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("libcst parsed a file without AMP vocabulary")

    monkeypatch.setattr(libcst, "parse_module", refused)
    write(tmp_path, "plain.py", NO_AMP)
    assert amp_lint(tmp_path, "check", "plain.py").returncode == 0


def test_prefilter_vocabulary() -> None:
    assert not has_amp_vocabulary(NO_AMP, Config())
    assert has_amp_vocabulary(DEPRECATED, Config())
    assert has_amp_vocabulary(b"x = y.half()", Config())
    assert has_amp_vocabulary(b"dtype=torch.bfloat16", Config())
    assert not has_amp_vocabulary(b"loss = PerceptualLoss()(a, b)", Config())
    configured = Config(fp32_only_callables=("mypkg.losses.PerceptualLoss",))
    assert has_amp_vocabulary(b"loss = PerceptualLoss()(a, b)", configured)
    assert has_amp_vocabulary(b"train_step(x)", Config(autocast_functions=("Trainer.train_step",)))


# standard input


def test_stdin(tmp_path: Path) -> None:
    result = amp_lint_process(tmp_path, "check", "-", stdin=DEPRECATED)
    assert result.returncode == 1
    assert positions(result) == ["-:3:6: AMP401"]


def test_stdin_filename(tmp_path: Path) -> None:
    result = amp_lint(tmp_path, "check", "--stdin-filename", "pkg/mod.py", "-", stdin=DEPRECATED)
    assert positions(result) == ["pkg/mod.py:3:6: AMP401"]
    # Without a path, --stdin-filename implies reading standard input, as in ruff.
    result = amp_lint(tmp_path, "check", "--stdin-filename", "pkg/mod.py", stdin=DEPRECATED)
    assert positions(result) == ["pkg/mod.py:3:6: AMP401"]


def test_stdin_filename_matches_config_globs(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", LEGACY_IGNORED)
    args = ["check", "--stdin-filename", "legacy/old.py", "-"]
    assert amp_lint(tmp_path, *args, stdin=DEPRECATED).returncode == 0


def test_stdin_fix_prints_fixed_source(tmp_path: Path) -> None:
    result = amp_lint(tmp_path, "check", "--fix", "-", stdin=DEPRECATED)
    assert result.returncode == 0
    assert b"torch.cuda.amp" not in result.stdout
    assert b'autocast("cuda")' in result.stdout
    ast.parse(result.stdout)


def test_stdin_fix_without_findings_echoes_input(tmp_path: Path) -> None:
    for source in (CLEAN, NO_AMP):
        result = amp_lint(tmp_path, "check", "--fix", "-", stdin=source)
        assert (result.returncode, result.stdout) == (0, source)


def test_stdin_fix_of_unparsable_input_echoes_it(tmp_path: Path) -> None:
    source = b"import torch\nwith torch.autocast(:\n"
    result = amp_lint(tmp_path, "check", "--fix", "-", stdin=source)
    assert (result.returncode, result.stdout) == (2, source)


# --fix and --diff


def test_fix_rewrites_the_file(project: Path) -> None:
    result = amp_lint(project, "check", "--fix", "deprecated.py", "clean.py")
    assert result.returncode == 0
    assert result.stdout == b""
    assert err(result) == ["Fixed 1 finding, 0 remaining."]
    fixed = (project / "deprecated.py").read_bytes()
    assert b"torch.cuda.amp" not in fixed
    assert b'autocast("cuda")' in fixed
    ast.parse(fixed)
    assert (project / "clean.py").read_bytes() == CLEAN
    assert amp_lint(project, "check", "deprecated.py").returncode == 0


def test_implicit_check_subcommand(project: Path) -> None:
    assert positions(amp_lint(project, "deprecated.py")) == ["deprecated.py:3:6: AMP401"]
    assert amp_lint(project, "--fix", "deprecated.py").returncode == 0
    assert b"torch.cuda.amp" not in (project / "deprecated.py").read_bytes()


def test_no_path_means_current_directory(project: Path) -> None:
    assert positions(amp_lint(project, "check")) == ["deprecated.py:3:6: AMP401"]
    assert positions(amp_lint(project)) == ["deprecated.py:3:6: AMP401"]


def test_diff_writes_nothing_and_exits_1(project: Path) -> None:
    result = amp_lint(project, "check", "--diff", "deprecated.py", "clean.py")
    assert result.returncode == 1
    assert (project / "deprecated.py").read_bytes() == DEPRECATED
    lines = out(result)
    assert lines[:2] == ["--- a/deprecated.py", "+++ b/deprecated.py"]
    assert "-with torch.cuda.amp.autocast():" in lines
    assert err(result) == ["Would fix 1 finding."]


def test_diff_without_changes_exits_0(project: Path) -> None:
    result = amp_lint(project, "check", "--diff", "clean.py")
    assert (result.returncode, result.stdout) == (0, b"")


def test_diff_applies_with_patch(project: Path) -> None:
    patch = Path("/usr/bin/patch")
    if not patch.exists():
        pytest.skip("patch(1) is not installed")
    diff = amp_lint(project, "check", "--diff", "deprecated.py").stdout
    subprocess.run([str(patch), "-p1", "-s"], cwd=project, input=diff, check=True)
    fixed = (project / "deprecated.py").read_bytes()
    write(project, "expected.py", DEPRECATED)
    amp_lint(project, "check", "--fix", "expected.py")
    assert fixed == (project / "expected.py").read_bytes()


def only_line_changed(before: bytes, after: bytes, line: int) -> None:
    """Every line but `line` (1-based) is identical byte for byte, newline included."""
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    assert len(old) == len(new)
    for number, (old_line, new_line) in enumerate(zip(old, new), start=1):
        if number != line:
            assert old_line == new_line, number
    assert old[line - 1] != new[line - 1]


def test_fix_keeps_crlf_newlines(tmp_path: Path) -> None:
    source = DEPRECATED.replace(b"\n", b"\r\n")
    path = write(tmp_path, "crlf.py", source)
    assert amp_lint(tmp_path, "check", "--fix", "crlf.py").returncode == 0
    fixed = path.read_bytes()
    only_line_changed(source, fixed, 3)
    assert fixed.count(b"\r\n") == fixed.count(b"\n") == 4


def test_fix_keeps_latin1_encoding(tmp_path: Path) -> None:
    source = (
        b"# -*- coding: latin-1 -*-\nimport torch\n\nNAME = '\xe9t\xe9'\n"
        b"with torch.cuda.amp.autocast():\n    pass\n"
    )
    path = write(tmp_path, "latin.py", source)
    result = amp_lint(tmp_path, "check", "--fix", "latin.py")
    assert result.returncode == 0, result.stderr
    fixed = path.read_bytes()
    only_line_changed(source, fixed, 5)
    assert b"'\xe9t\xe9'" in fixed
    compile(fixed, "latin.py", "exec")


def test_fix_keeps_file_mode_and_leaves_no_temporary_files(tmp_path: Path) -> None:
    path = write(tmp_path, "script.py", DEPRECATED)
    path.chmod(0o750)
    assert amp_lint(tmp_path, "check", "--fix", "script.py").returncode == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o750
    assert sorted(p.name for p in tmp_path.iterdir()) == ["script.py"]


def test_fix_of_clean_file_does_not_touch_it(project: Path) -> None:
    path = project / "clean.py"
    os.utime(path, ns=(1, 1))
    assert amp_lint(project, "check", "--fix", "clean.py").returncode == 0
    assert path.stat().st_mtime_ns == 1


def test_write_atomically_follows_symlinks(tmp_path: Path) -> None:
    target = write(tmp_path, "real.py", b"old\n")
    link = tmp_path / "link.py"
    link.symlink_to(target.name)
    write_atomically(link, b"new\n")
    assert link.is_symlink()
    assert target.read_bytes() == b"new\n"


# suppression comments


NOQA_SOURCE = (
    b"import torch\n\n"
    b"with torch.cuda.amp.autocast():  # noqa\n    pass\n"
    b"with torch.cuda.amp.autocast():  # noqa: AMP401\n    pass\n"
    b"with torch.cuda.amp.autocast():  # noqa: AMP001\n    pass\n"
)


def test_noqa_is_honoured_by_check(tmp_path: Path) -> None:
    write(tmp_path, "noqa.py", NOQA_SOURCE)
    assert positions(amp_lint(tmp_path, "check", "noqa.py")) == ["noqa.py:7:6: AMP401"]


def test_noqa_lines_are_counted_as_python_counts_them(tmp_path: Path) -> None:
    # A form feed is whitespace to Python, not a line break: the noqa comment stays on the
    # line of its finding, in the file's own analysis and in cross-file gathering alike.
    source = (
        b"import torch\n\x0c\n"
        b"with torch.cuda.amp.autocast():  # noqa: AMP401\n    pass\n"
        b"with torch.cuda.amp.autocast():\n    pass\n"
    )
    write(tmp_path, "formfeed.py", source)
    assert positions(amp_lint(tmp_path, "check", "formfeed.py")) == ["formfeed.py:5:6: AMP401"]


def test_noqa_suppressed_findings_are_not_fixed(tmp_path: Path) -> None:
    path = write(tmp_path, "noqa.py", NOQA_SOURCE)
    assert amp_lint(tmp_path, "check", "--fix", "noqa.py").returncode == 0
    fixed = path.read_bytes()
    only_line_changed(NOQA_SOURCE, fixed, 7)
    assert fixed.count(b"torch.cuda.amp.autocast()") == 2


# pre-commit: no files


def test_explicit_empty_path_list_lints_nothing(project: Path) -> None:
    # `--` with nothing after it: a hook run with no files must not lint the whole tree.
    result = amp_lint(project, "check", "--fix", "--")
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    assert (project / "deprecated.py").read_bytes() == DEPRECATED


def test_directory_without_python_files(tmp_path: Path) -> None:
    write(tmp_path, "README.md", b"# autocast\n")
    for args in (["check"], ["check", "--fix"], ["check", "."]):
        result = amp_lint(tmp_path, *args)
        assert (result.returncode, result.stdout) == (0, b"")
        assert err(result) == ["amp-lint: warning: no Python files found under ."]


# rules, rule


def test_rules_table() -> None:
    result = amp_lint(Path.cwd(), "rules")
    assert result.returncode == 0
    rows = {line.split()[0]: line.split() for line in out(result)[1:]}
    assert rows["AMP401"][1:3] == ["deprecated-amp-api", "safe"]


def test_rule_documentation() -> None:
    result = amp_lint(Path.cwd(), "rule", "AMP401")
    assert result.returncode == 0
    text = result.stdout.decode()
    assert text.startswith("# deprecated-amp-api (AMP401)\n")
    for heading in ("## What it does", "## Why is this bad?", "## Example", "## Fix safety"):
        assert f"\n{heading}\n" in text


def test_unknown_rule_exit_2() -> None:
    result = amp_lint(Path.cwd(), "rule", "AMP000")
    assert result.returncode == 2
    assert "AMP000" in result.stderr.decode()


def test_version() -> None:
    result = amp_lint_process(Path.cwd(), "--version")
    assert result.returncode == 0
    assert result.stdout.decode().startswith("amp-lint ")


# --- files too large to analyse ------------------------------------------------------------

LARGE_TABLE = "TABLE = [\n" + "    (1, 2, 3, 4, 5, 6, 7),\n" * 4000 + "]\n"  # ~64,000 tokens
HAZARD = (
    "import torch\n\nwith torch.autocast('cuda'):\n    x = torch.ones(2).half()\n"
    "    x.masked_fill_(x > 0, -1e9)\n"
)


def test_a_file_too_large_to_analyse_is_a_warning_naming_it(tmp_path: Path) -> None:
    (tmp_path / "table.py").write_text(HAZARD + LARGE_TABLE)
    (tmp_path / "small.py").write_text(HAZARD)
    result = amp_lint(tmp_path, "check", "--no-cache", ".")
    warnings = [line for line in err(result) if "warning" in line]
    assert warnings == [
        "amp-lint: warning: table.py: not analysed: its 64,036 tokens of code would take about "
        "281 MB as a syntax tree (the limit is 60,000 tokens)"
    ]
    # The other file is analysed as usual; the warning does not make the run fail.
    assert "small.py:5:" in result.stdout.decode() and b"table.py" not in result.stdout
    assert result.returncode == 1
    alone = amp_lint(tmp_path, "check", "--no-cache", "table.py")
    assert alone.returncode == 0 and b"not analysed" in alone.stderr
    # A warm run says it again.
    amp_lint(tmp_path, "check", "--cache-dir", str(tmp_path / "c"), "table.py")
    warm = amp_lint(tmp_path, "check", "--cache-dir", str(tmp_path / "c"), "table.py")
    assert (warm.stderr, warm.returncode) == (alone.stderr, 0)
