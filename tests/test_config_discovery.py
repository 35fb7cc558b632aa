"""Which settings apply to which file, through the real `amp-lint` and flake8: the nearest
pyproject.toml with `[tool.amp-lint]` at or above each FILE (not the current directory),
`--config` for all; what `--show-settings`, `--show-files` and `-v` say; and the line a run
without findings prints, so that linting nothing under autocast does not look AMP-safe."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from runners import amp_lint, flake8

CROSS_FILE = Path(__file__).parent / "projects" / "cross_file"

DEPRECATED = "import torch\n\nwith torch.cuda.amp.autocast():\n    pass\n"
NO_AMP = "import torch\n\nx = torch.ones(3).sum()\n"


def write(directory: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return directory


def positions(stdout: str) -> list[str]:
    return sorted(" ".join(line.split(" ")[:2]) for line in stdout.splitlines())


@pytest.fixture
def nested(tmp_path: Path) -> Path:
    """proj/ ignores AMP4; proj/legacy/ has its own config selecting only AMP4."""
    return write(
        tmp_path,
        {
            "proj/pyproject.toml": '[tool.amp-lint]\nignore = ["AMP4"]\n',
            "proj/train.py": DEPRECATED,
            "proj/legacy/pyproject.toml": '[tool.amp-lint]\nselect = ["AMP4"]\n',
            "proj/legacy/old.py": DEPRECATED,
            "proj/legacy/deeper/older.py": DEPRECATED,
        },
    )


# discovery from each file


def test_nested_config_applies_to_its_subtree_only(nested: Path) -> None:
    result = amp_lint(nested, "check", "--no-cache", "proj")
    assert result.returncode == 1, result.stderr
    assert positions(result.stdout) == [
        "proj/legacy/deeper/older.py:3:6: AMP401",
        "proj/legacy/old.py:3:6: AMP401",
    ]


def test_linting_from_outside_equals_linting_from_inside(nested: Path) -> None:
    outside = amp_lint(nested, "check", "--no-cache", "proj")
    inside = amp_lint(nested / "proj", "check", "--no-cache", ".")
    assert positions(outside.stdout) == [f"proj/{line}" for line in positions(inside.stdout)]
    assert outside.returncode == inside.returncode == 1
    # The same settings, from the same file.
    shown_outside = amp_lint(nested, "check", "--show-settings", "proj/train.py")
    shown_inside = amp_lint(nested / "proj", "check", "--show-settings", "train.py")
    assert shown_outside.stdout.splitlines()[1:] == shown_inside.stdout.splitlines()[1:]


def test_settings_of_a_file_outside_the_current_project(nested: Path) -> None:
    """Linting another project from this one uses the other project's settings."""
    write(nested, {"here/pyproject.toml": '[tool.amp-lint]\nselect = ["AMP1"]\n'})
    result = amp_lint(nested / "here", "check", "--no-cache", "../proj/legacy/old.py")
    assert positions(result.stdout) == ["../proj/legacy/old.py:3:6: AMP401"]


def test_command_line_selection_applies_on_top_of_each_config(nested: Path) -> None:
    result = amp_lint(nested, "check", "--no-cache", "--extend-select", "AMP401", "proj")
    # proj/ ignores AMP4 and keeps ignoring it; legacy/ selects AMP4 and adds nothing new.
    assert len(positions(result.stdout)) == 2
    selected = amp_lint(nested, "check", "--no-cache", "--select", "AMP401", "proj")
    # --select replaces each config's selection, and drops its ignores, as in ruff.
    assert len(positions(selected.stdout)) == 3


def test_config_option_overrides_discovery_for_every_file(nested: Path) -> None:
    write(nested, {"strict.toml": '[tool.amp-lint]\nselect = ["AMP4"]\n'})
    result = amp_lint(nested, "check", "--no-cache", "--config", "strict.toml", "proj")
    assert len(positions(result.stdout)) == 3
    shown = amp_lint(nested, "check", "--config", "strict.toml", "--show-settings", "proj")
    assert f"Settings path: {nested / 'strict.toml'}" in shown.stdout


def test_nested_exclude_is_relative_to_its_own_directory(nested: Path) -> None:
    write(
        nested,
        {
            "proj/legacy/pyproject.toml": '[tool.amp-lint]\nselect = ["AMP4"]\n'
            'exclude = ["deeper"]\n',
        },
    )
    result = amp_lint(nested, "check", "--no-cache", "proj")
    assert positions(result.stdout) == ["proj/legacy/old.py:3:6: AMP401"]
    files = amp_lint(nested, "check", "--show-files", "proj")
    assert files.stdout.splitlines() == ["proj/train.py", "proj/legacy/old.py"]


def test_a_bad_nested_config_is_one_error_and_the_rest_is_linted(nested: Path) -> None:
    write(nested, {"proj/legacy/pyproject.toml": "[tool.amp-lint]\nbogus = 1\n"})
    write(nested, {"proj/other.py": DEPRECATED})
    result = amp_lint(nested, "check", "--no-cache", "--select", "AMP", "proj")
    assert result.returncode == 2
    errors = result.stderr.splitlines()
    config = nested / "proj" / "legacy" / "pyproject.toml"
    assert [line for line in errors if "error" in line] == [
        f"amp-lint: error: {config}: unknown key tool.amp-lint.bogus "
        + errors[0].split("bogus ", 1)[1]
    ]
    assert "(2 files not linted)" in errors[0]
    assert "Traceback" not in result.stderr
    assert positions(result.stdout) == ["proj/other.py:3:6: AMP401", "proj/train.py:3:6: AMP401"]


def test_each_configs_result_is_cached_under_its_own_settings(nested: Path) -> None:
    cache = str(nested / "cache")
    first = amp_lint(nested, "check", "--cache-dir", cache, "proj")
    assert len(positions(first.stdout)) == 2
    write(nested, {"proj/legacy/pyproject.toml": '[tool.amp-lint]\nselect = ["AMP1"]\n'})
    second = amp_lint(nested, "check", "--cache-dir", cache, "proj")
    assert (second.returncode, second.stdout) == (0, "")
    write(nested, {"proj/legacy/pyproject.toml": '[tool.amp-lint]\nselect = ["AMP4"]\n'})
    third = amp_lint(nested, "check", "--cache-dir", cache, "-v", "proj")
    assert third.stdout == first.stdout
    assert "cache hit" in third.stderr


# --show-settings, --show-files, --verbose


def test_show_settings(nested: Path) -> None:
    write(nested, {"proj/legacy/pyproject.toml": '[tool.amp-lint]\nassume-autocast = "float16"\n'})
    result = amp_lint(nested, "check", "--show-settings", "proj/legacy/old.py")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[0] == "Resolved settings for: proj/legacy/old.py"
    assert lines[1] == f"Settings path: {nested / 'proj' / 'legacy' / 'pyproject.toml'}"
    assert 'assume-autocast = "float16"' in lines
    assert 'select = ["AMP"]' in lines
    top = amp_lint(nested, "check", "--show-settings", "--ignore", "AMP1", "proj")
    assert 'ignore = ["AMP4", "AMP1"]' in top.stdout.splitlines()
    assert "assume-autocast = (not set)" in top.stdout.splitlines()
    bare = amp_lint(nested, "check", "--show-settings")
    assert "Settings path: defaults (no pyproject.toml with [tool.amp-lint])" in bare.stdout


def test_show_files_lists_what_would_be_linted_and_lints_nothing(nested: Path) -> None:
    write(nested, {"proj/.venv/lib.py": DEPRECATED, "proj/notes.txt": ""})
    result = amp_lint(nested, "check", "--show-files", "proj")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines() == [
        "proj/train.py",
        "proj/legacy/old.py",
        "proj/legacy/deeper/older.py",
    ]


def test_verbose_says_which_config_applies_where_and_what_was_skipped(nested: Path) -> None:
    write(nested, {"proj/plain.py": NO_AMP})
    result = amp_lint(nested, "check", "--no-cache", "-v", "proj")
    lines = result.stderr.splitlines()
    proj = nested / "proj"
    assert f"amp-lint: settings from {proj / 'pyproject.toml'} for 2 files under {proj}" in lines
    legacy = proj / "legacy"
    assert f"amp-lint: settings from {legacy / 'pyproject.toml'} for 2 files under {legacy}" in (
        lines
    )
    assert "amp-lint: found 4 files; 0 excluded" in lines
    assert (
        "amp-lint: 4 files: 3 with AMP vocabulary, 1 skipped without it, 0 unreadable, "
        "0 under a bad config"
    ) in lines
    assert any(line.startswith("amp-lint: done in ") for line in lines)


# the line a run without findings prints


def test_package_without_its_trainer_says_nothing_reached_it(tmp_path: Path) -> None:
    project = tmp_path / "cross_file"
    shutil.copytree(CROSS_FILE, project)
    result = amp_lint(project, "check", "--no-cache", "models/")
    assert (result.returncode, result.stdout) == (0, "")
    assert result.stderr == (
        "Checked 3 files (3 had no AMP code); no findings, but no autocast region reaches "
        "models/: lint the training script with it, or use --assume-autocast float16.\n"
    )
    whole = amp_lint(project, "check", "--no-cache", "--select", "AMP4", ".")
    assert whole.stderr == "Checked 5 files (4 had no AMP code); no findings.\n"
    library = amp_lint(project, "check", "--no-cache", "--select", "AMP4", "--assume-autocast",
                       "float16", "models/")  # fmt: skip
    # Library mode looks for forwards too: attn.py has AMP code now.
    assert library.stderr == "Checked 3 files (2 had no AMP code); no findings.\n"


def test_warm_run_prints_the_same_summary(tmp_path: Path) -> None:
    project = tmp_path / "cross_file"
    shutil.copytree(CROSS_FILE, project)
    cache = str(tmp_path / "cache")
    cold = amp_lint(project, "check", "--cache-dir", cache, "-v", "models/")
    warm = amp_lint(project, "check", "--cache-dir", cache, "-v", "models/")
    assert "cache hit" in warm.stderr and "cache hit" not in cold.stderr
    summary = [line for line in cold.stderr.splitlines() if line.startswith("Checked")]
    assert summary and summary == [
        line for line in warm.stderr.splitlines() if line.startswith("Checked")
    ]


def test_empty_directory_warns_and_exits_0(tmp_path: Path) -> None:
    write(tmp_path, {"empty/README.md": "# autocast\n"})
    result = amp_lint(tmp_path, "check", "empty")
    assert (result.returncode, result.stdout) == (0, "")
    assert result.stderr == "amp-lint: warning: no Python files found under empty\n"


def test_fully_excluded_run_says_so(tmp_path: Path) -> None:
    write(
        tmp_path,
        {"pyproject.toml": '[tool.amp-lint]\nexclude = ["gen"]\n', "gen/model.py": DEPRECATED},
    )
    result = amp_lint(tmp_path, "check", "--no-cache", ".")
    assert (result.returncode, result.stdout) == (0, "")
    assert result.stderr == (
        "amp-lint: warning: no Python files to lint under . (1 excluded by `exclude`)\n"
    )


def test_quiet_and_findings_runs_print_no_checked_line(tmp_path: Path) -> None:
    write(tmp_path, {"plain.py": NO_AMP, "bad.py": DEPRECATED})
    quiet = amp_lint(tmp_path, "check", "--no-cache", "-q", "plain.py")
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")
    found = amp_lint(tmp_path, "check", "--no-cache", ".")
    assert found.stderr == "Found 1 finding (1 fixable with --fix).\n"


# flake8 shares the discovery


def test_flake8_honours_a_nested_configs_analysis_settings(tmp_path: Path) -> None:
    shutil.copytree(CROSS_FILE / "models", tmp_path / "lib" / "models")
    write(tmp_path, {"lib/pyproject.toml": '[tool.amp-lint]\nassume-autocast = "float16"\n'})
    result = flake8(tmp_path, "--select=AMP", "lib")
    # Attention.forward is analysed as running under float16 autocast: library mode.
    assert "lib/models/attn.py:14:29: AMP003 " in result.stdout
    # Without the setting nothing in the package runs under autocast.
    (tmp_path / "lib" / "pyproject.toml").write_text("[tool.amp-lint]\n")
    assert flake8(tmp_path, "--select=AMP", "lib").stdout == ""


def test_flake8_honours_exclude_and_per_file_ignores(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pyproject.toml": '[tool.amp-lint]\nexclude = ["generated"]\n'
            'per-file-ignores = {"legacy/*" = ["AMP4"]}\n',
            "generated/deep/a.py": DEPRECATED,
            "legacy/b.py": DEPRECATED,
            "c.py": DEPRECATED,
        },
    )
    result = flake8(tmp_path, "--select=AMP", "-j", "1", ".")
    assert positions(result.stdout) == ["./c.py:3:6: AMP401"]


def test_flake8_bad_config_is_one_line_without_traceback(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pyproject.toml": '[tool.amp-lint]\nassume-autocast = "float8"\n',
            "a.py": DEPRECATED,
            "b.py": DEPRECATED,
        },
    )
    result = flake8(tmp_path, "--select=AMP", "-j", "1", ".")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr + result.stdout
    [line] = result.stdout.splitlines()
    assert line.startswith("./a.py:1:1: AMP000 amp-lint: configuration error: ")
    assert f"{tmp_path / 'pyproject.toml'}: tool.amp-lint.assume-autocast" in line


def test_flake8_warns_once_about_settings_it_applies_to_one_file_only(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pyproject.toml": '[tool.amp-lint]\nlightning-precision = "16-mixed"\n',
            "a.py": DEPRECATED,
            "b.py": DEPRECATED,
        },
    )
    result = flake8(tmp_path, "--select=AMP", "-j", "1", ".")
    warnings = [line for line in result.stderr.splitlines() if "warning" in line]
    assert warnings == [
        f"amp-lint: warning: {tmp_path / 'pyproject.toml'}: under flake8, lightning-precision = "
        '"16-mixed" reaches only classes defined in the checked file; `amp-lint check` follows '
        "it into the classes' other files"
    ]


# `extend`: another config file's settings underneath this one's, as in ruff


def test_extend_inherits_and_overrides(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "shared/pyproject.toml": (
                '[tool.amp-lint]\nignore = ["AMP4"]\nassume-autocast = "float16"\n'
            ),
            "proj/pyproject.toml": (
                '[tool.amp-lint]\nextend = "../shared/pyproject.toml"\nignore = []\n'
            ),
            "proj/old.py": DEPRECATED,
        },
    )
    shown = amp_lint(tmp_path / "proj", "check", "--show-settings", "old.py").stdout.splitlines()
    assert 'assume-autocast = "float16"' in shown  # inherited
    assert "ignore = []" in shown  # this file's own value wins
    # AMP401 is ignored by the shared file and not any more by the project's own.
    assert "old.py:3:6: AMP401" in amp_lint(tmp_path / "proj", "check", "old.py").stdout
    write(
        tmp_path, {"proj/pyproject.toml": '[tool.amp-lint]\nextend = "../shared/pyproject.toml"\n'}
    )
    assert amp_lint(tmp_path / "proj", "check", "old.py").stdout == ""


@pytest.mark.parametrize(
    ("files", "said"),
    [
        ({"a/pyproject.toml": '[tool.amp-lint]\nextend = "missing.toml"\n'}, "does not exist"),
        (
            {
                "a/pyproject.toml": '[tool.amp-lint]\nextend = "../b/pyproject.toml"\n',
                "b/pyproject.toml": '[tool.amp-lint]\nextend = "../a/pyproject.toml"\n',
            },
            "goes round in a circle",
        ),
        ({"a/pyproject.toml": "[tool.amp-lint]\nextend = 3\n"}, "must be a path"),
        (
            {
                "a/pyproject.toml": '[tool.amp-lint]\nextend = "../b/pyproject.toml"\n',
                "b/pyproject.toml": "[tool.other]\n",
            },
            "no [tool.amp-lint] table",
        ),
    ],
)
def test_a_broken_extend_is_one_error_line(
    tmp_path: Path, files: dict[str, str], said: str
) -> None:
    write(tmp_path, {**files, "a/old.py": DEPRECATED})
    result = amp_lint(tmp_path / "a", "check", "old.py")
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and said in errors[0], result.stderr
