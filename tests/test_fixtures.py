"""Golden-file tests for every rule, driven by the files in tests/fixtures/<CODE>-<name>/.

For each `bad*.py` there is:

* `<stem>.expected`: the exact output of `amp-lint check --select <CODE> <file>` run in the
  fixture folder; flake8 (`--select=<CODE>`) must print the same lines;
* `<stem>.fixed.py`: the file after `--fix --unsafe-fixes` (absent: the file has no fix);
* optionally `<stem>.safe-fixed.py`: the file after `--fix` alone. When absent, `--fix` gives
  `<stem>.fixed.py` if every fix in the file is safe, and leaves the file alone if none is.

Each `good*.py` has no finding for the folder's code. `AMP_LINT_REGENERATE=1` rewrites the
expectations from the current output instead of comparing; review that diff before committing
(see tests/README.md).
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest
from runners import amp_lint, flake8

FIXTURES = Path(__file__).parent / "fixtures"
REGENERATE = os.environ.get("AMP_LINT_REGENERATE") == "1"
REGENERATE_HINT = (
    "run `AMP_LINT_REGENERATE=1 python -m pytest tests/test_fixtures.py` and review the diff"
)
FIXED_SUFFIXES = (".fixed.py", ".safe-fixed.py")
# Rules the flake8 plugin does not report: flake8 handles noqa comments itself.
FLAKE8_CHECKS_ITSELF = frozenset({"AMP900"})
FOLDER_NAME = re.compile(r"^(?P<code>AMP\d{3})-(?P<name>[a-z0-9]+(?:-[a-z0-9]+)*)$")


def fixture_folders() -> list[Path]:
    return sorted(p for p in FIXTURES.iterdir() if p.is_dir() and FOLDER_NAME.match(p.name))


def code_of(folder: Path) -> str:
    return folder.name.split("-", 1)[0]


def sources(folder: Path, prefix: str) -> list[Path]:
    return sorted(p for p in folder.glob(f"{prefix}*.py") if not p.name.endswith(FIXED_SUFFIXES))


def sibling(source: Path, suffix: str) -> Path:
    return source.with_name(source.name[: -len(".py")] + suffix)


def params(prefix: str) -> list[object]:
    return [
        pytest.param(source, id=f"{folder.name}/{source.name}")
        for folder in fixture_folders()
        for source in sources(folder, prefix)
    ]


BAD = params("bad")
GOOD = params("good")


def expect_bytes(path: Path, actual: bytes | None) -> None:
    """Compare with the golden file; None means the golden file must not exist."""
    if REGENERATE:
        if actual is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(actual)
        return
    if actual is None:
        assert not path.exists(), f"{path.name} is stale (nothing changes); {REGENERATE_HINT}"
        return
    assert path.exists(), f"{path.name} is missing; {REGENERATE_HINT}"
    expected = path.read_bytes()
    if actual != expected:
        # Compare as text first, for a readable pytest diff.
        assert actual.decode("utf-8", "replace") == expected.decode("utf-8", "replace")
        assert actual == expected


@functools.cache
def flake8_lines(folder: Path) -> dict[str, list[str]]:
    """flake8's lines for each bad and good file of the folder, by file name, from one flake8
    run over all of them (flake8 checks each file on its own, so one run prints what a run per
    file would; it saves a process start, most of the suite's time, per file). Cached per
    worker process; read only."""
    names = [path.name for path in [*sources(folder, "bad"), *sources(folder, "good")]]
    result = flake8(folder, f"--select={code_of(folder)}", *names)
    assert result.stderr == "", result.stderr
    by_file: dict[str, list[str]] = {}
    for line in result.stdout.splitlines():
        by_file.setdefault(line.split(":", 1)[0], []).append(line)
    return by_file


def assert_parses(code: bytes, name: str) -> None:
    compile(ast.parse(code, filename=name), name, "exec")


# bad files


@pytest.mark.parametrize("source", BAD)
def test_cli_output_is_expected(source: Path) -> None:
    status, stdout, stderr = folder_run(source.parent, "bad")
    assert status == 1, stderr
    lines = [
        line for line in stdout.splitlines(keepends=True) if line.startswith(f"{source.name}:")
    ]
    assert lines, f"{source.name} has no {code_of(source.parent)} finding"
    expect_bytes(sibling(source, ".expected"), "".join(lines).encode())


@pytest.mark.parametrize("source", BAD)
def test_flake8_prints_the_same_lines(source: Path) -> None:
    expected = sibling(source, ".expected")
    assert expected.exists(), f"{expected.name} is missing; {REGENERATE_HINT}"
    if code_of(source.parent) in FLAKE8_CHECKS_ITSELF:
        pytest.skip("flake8 reports its own unused noqa comments (flake8-noqa, yesqa)")
    # The same summaries; flake8 has no `[*]` fixable marker (it applies no fixes).
    lines = [line.replace(" [*] ", " ", 1) for line in expected.read_text().splitlines()]
    assert flake8_lines(source.parent).get(source.name, []) == lines


@pytest.mark.parametrize("source", BAD)
def test_all_fixes_give_fixed_file(source: Path) -> None:
    first, second = folder_fixed(source.parent, "--fix", "--unsafe-fixes")
    fixed = first[source.name]
    changed = fixed != source.read_bytes()
    expect_bytes(sibling(source, ".fixed.py"), fixed if changed else None)
    assert_parses(fixed, source.name)
    assert second[source.name] == fixed, "a second --fix changed the file again"


@functools.cache
def folder_fixed(folder: Path, *flags: str) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """The bad files' bytes after `check --fix <flags>` on a copy of the folder, and after a
    second such run. One run for the folder fixes each file as a run on it alone does (the
    fixture files do not import one another). Cached per worker; read only."""
    names = [path.name for path in sources(folder, "bad")]
    with tempfile.TemporaryDirectory(prefix="amp-lint-fix-") as directory:
        copy = Path(directory) / folder.name
        shutil.copytree(folder, copy)
        passes = []
        for _ in range(2):
            result = amp_lint(copy, "check", "--select", code_of(folder), *flags, *names)
            assert result.returncode in (0, 1), result.stderr
            passes.append({name: (copy / name).read_bytes() for name in names})
    return passes[0], passes[1]


@pytest.mark.parametrize("source", BAD)
def test_safe_fixes_give_safe_fixed_file(source: Path) -> None:
    safeties = fix_safeties(source)
    first, second = folder_fixed(source.parent, "--fix")
    safe_fixed = first[source.name]
    assert second[source.name] == safe_fixed, "a second --fix changed the file again"
    assert_parses(safe_fixed, source.name)
    all_fixed = sibling(source, ".fixed.py")
    default: bytes | None
    if safeties == {"safe"}:
        default = (all_fixed if all_fixed.exists() else source).read_bytes()
    elif "safe" not in safeties:
        default = source.read_bytes()
    else:
        default = None  # mixed: only a .safe-fixed.py file can say what --fix gives
    explicit = sibling(source, ".safe-fixed.py")
    if REGENERATE:
        expect_bytes(explicit, None if safe_fixed == default else safe_fixed)
    elif explicit.exists():
        expect_bytes(explicit, safe_fixed)
    else:
        assert default is not None, (
            f"{source.name} has safe and unsafe fixes: it needs {explicit.name}; {REGENERATE_HINT}"
        )
        assert safe_fixed.decode() == default.decode()


def fix_safeties(source: Path) -> set[str]:
    return {
        f["fix"]["safety"]
        for f in folder_findings(source.parent)
        if f["path"] == source.name and f["fix"] is not None
    }


@functools.cache
def folder_findings(folder: Path) -> list[dict[str, object]]:
    """The JSON findings of one `amp-lint check` over the folder's bad files. One run for
    the folder gives each file's findings as its own run does (the fixture files do not
    import one another: the concise lines equal the `.expected` files, a check made when this
    was introduced) and saves a process start per file. Cached per worker; read only."""
    names = [path.name for path in sources(folder, "bad")]
    result = amp_lint(folder, "check", "--format", "json", "--select", code_of(folder), *names)
    assert result.returncode in (0, 1), result.stderr
    findings: list[dict[str, object]] = json.loads(result.stdout)
    return findings


@functools.cache
def folder_run(folder: Path, prefix: str) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of one `amp-lint check --select CODE` over the folder's
    bad (or good) files: each finding line names its file, and a file's lines are what a run
    on it alone prints (the fixture files do not import one another). Cached per worker."""
    names = [path.name for path in sources(folder, prefix)]
    result = amp_lint(folder, "check", "--select", code_of(folder), *names)
    return result.returncode, result.stdout, result.stderr


@pytest.mark.parametrize("source", BAD)
def test_diff_writes_nothing(source: Path) -> None:
    diffs, unchanged = folder_diff(source.parent)
    assert source.name in unchanged, f"--diff wrote {source.name}"
    has_fix = sibling(source, ".fixed.py").exists()
    assert (source.name in diffs) == has_fix, diffs.keys()


@functools.cache
def folder_diff(folder: Path) -> tuple[dict[str, str], frozenset[str]]:
    """One `--diff --unsafe-fixes` run over a copy of the folder's bad files: each file's diff
    by name, and the names of the files it left as they were (all of them, if --diff writes
    nothing). The exit status is 1 when some file would change, 0 otherwise."""
    with tempfile.TemporaryDirectory(prefix="amp-lint-diff-") as directory:
        copy = Path(directory) / folder.name
        shutil.copytree(folder, copy)
        names = [path.name for path in sources(folder, "bad")]
        result = amp_lint(
            copy, "check", "--select", code_of(folder), "--diff", "--unsafe-fixes", *names
        )
        unchanged = frozenset(
            n for n in names if (copy / n).read_bytes() == (folder / n).read_bytes()
        )
    diffs: dict[str, str] = {}
    for section in re.split(r"(?m)^(?=--- a/)", result.stdout):
        if section:
            diffs[section.split("\n", 1)[0].removeprefix("--- a/")] = section
    would_change = any(sibling(folder / n, ".fixed.py").exists() for n in names)
    assert result.returncode == (1 if would_change else 0), result.stderr
    return diffs, unchanged


# good files


@pytest.mark.parametrize("source", GOOD)
def test_good_file_has_no_findings(source: Path) -> None:
    status, stdout, stderr = folder_run(source.parent, "good")
    assert [line for line in stdout.splitlines() if line.startswith(f"{source.name}:")] == []
    assert (status, stdout) == (0, ""), stdout
    count = len(sources(source.parent, "good"))
    assert stderr.startswith(f"Checked {count} file"), stderr  # run_summary.py
    assert flake8_lines(source.parent).get(source.name, []) == []


# the fixture folders themselves


def test_every_rule_has_fixtures() -> None:
    from amp_lint.rules import all_rules

    for rule in all_rules():
        folder = FIXTURES / f"{rule.code}-{rule.name}"
        assert folder.is_dir(), f"{rule.code}: no fixture folder {folder.name}"
        assert sources(folder, "bad"), f"{folder.name}: no bad*.py"
        assert sources(folder, "good"), f"{folder.name}: no good*.py"


def test_every_fixture_folder_belongs_to_a_rule() -> None:
    from amp_lint.rules import all_rules

    names = {f"{rule.code}-{rule.name}" for rule in all_rules()}
    strays = [p.name for p in FIXTURES.iterdir() if p.is_dir() and p.name not in names]
    assert not [name for name in strays if name != "__pycache__"]


def test_golden_files_have_a_source() -> None:
    for folder in fixture_folders():
        for golden in [*folder.glob("*.expected"), *folder.glob("*.fixed.py")]:
            stem = golden.name.split(".", 1)[0]
            assert (folder / f"{stem}.py").exists(), f"{folder.name}/{golden.name}: no {stem}.py"


def test_rule_metadata() -> None:
    from amp_lint.rules import all_rules

    rules = all_rules()
    assert rules
    for rule in rules:
        assert re.fullmatch(r"AMP\d{3}", rule.code), rule.code
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", rule.name), rule.name
        for attribute in ("summary", "why", "example", "fixed_example", "fix_safety"):
            assert getattr(rule, attribute).strip(), f"{rule.code}: empty {attribute}"
    assert len({rule.code for rule in rules}) == len(rules)
    assert len({rule.name for rule in rules}) == len(rules)


def test_fixture_files_pass_the_prefilter() -> None:
    """The prefilter skips files without AMP words; it must never skip a file with findings."""
    from amp_lint.settings.config import Config
    from amp_lint.sources.files import has_amp_vocabulary

    for folder in fixture_folders():
        for source in sources(folder, "bad"):
            assert has_amp_vocabulary(source.read_bytes(), Config()), source


def test_fixture_runs_are_hermetic() -> None:
    """A [tool.amp-lint] table above tests/fixtures would change fixture output: only a
    pyproject.toml inside a fixture folder may configure it."""
    from amp_lint.settings.config import find_config_file

    for folder in fixture_folders():
        found = find_config_file(folder)
        assert found is None or found.parent == folder, found
