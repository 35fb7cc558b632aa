"""The `torch-version` setting (the oldest torch a project supports), through the real
`amp-lint` command: `--torch-version`, `[tool.amp-lint] torch-version`, the lower bound of torch
in `[project] dependencies`, and how AMP401 reports and fixes by it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from runners import AMP_LINT, amp_lint, flake8

# One use of each replacement's vintage: torch.amp.autocast (1.13), torch.amp.GradScaler (2.3),
# torch.amp.custom_fwd(device_type=...) (2.4).
USES = """\
import torch


class Scale(torch.autograd.Function):
    @staticmethod
    @torch.cuda.amp.custom_fwd
    def forward(ctx, x):
        return x * 2


scaler = torch.cuda.amp.GradScaler()
with torch.cuda.amp.autocast():
    pass
"""
CUSTOM_FWD_LINE, SCALER_LINE, AUTOCAST_LINE = 6, 11, 12
ALL_LINES = {CUSTOM_FWD_LINE, SCALER_LINE, AUTOCAST_LINE}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text(USES)
    return tmp_path


def write_pyproject(project: Path, text: str) -> None:
    (project / "pyproject.toml").write_text(text)


def reported_lines(project: Path, *args: str) -> set[int]:
    done = amp_lint(project, "check", "--no-cache", "--select", "AMP401", *args, "train.py")
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
    return {int(line.split(":")[1]) for line in done.stdout.splitlines()}


def test_unset_assumes_the_newest_torch(project: Path) -> None:
    assert reported_lines(project) == ALL_LINES


@pytest.mark.parametrize(
    ("version", "lines"),
    [
        ("1.12", set()),
        ("2.1", {AUTOCAST_LINE}),
        ("2.2.2", {AUTOCAST_LINE}),
        ("2.3", {SCALER_LINE, AUTOCAST_LINE}),
        ("2.3.1", {SCALER_LINE, AUTOCAST_LINE}),
        ("2.4", ALL_LINES),
        ("2.12", ALL_LINES),
    ],
)
def test_only_uses_the_target_can_replace_are_reported(
    project: Path, version: str, lines: set[int]
) -> None:
    assert reported_lines(project, "--torch-version", version) == lines


def test_before_2_4_the_message_says_when_the_warning_starts(project: Path) -> None:
    done = amp_lint(project, "check", "--no-cache", "--torch-version", "2.3", "train.py")
    assert "FutureWarning on torch >= 2.4" in done.stdout
    assert "at run time" not in done.stdout
    newest = amp_lint(project, "check", "--no-cache", "train.py")
    assert "FutureWarning at run time" in newest.stdout


def test_fix_title_names_the_torch_it_needs(project: Path) -> None:
    done = amp_lint(project, "check", "--no-cache", "--format", "json", "train.py")
    titles = {item["line"]: item["fix"]["title"] for item in json.loads(done.stdout)}
    assert "(torch >= 2.4)" in titles[CUSTOM_FWD_LINE]
    assert "(torch >= 2.3)" in titles[SCALER_LINE]
    assert "(torch >= 1.13)" in titles[AUTOCAST_LINE]


def test_fix_on_2_1_leaves_what_2_1_cannot_spell(tmp_path: Path) -> None:
    source = "import torch\nscaler = torch.cuda.amp.GradScaler()\n"
    (tmp_path / "train.py").write_text(source)
    done = amp_lint(tmp_path, "check", "--no-cache", "--fix", "--torch-version", "2.1", "train.py")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == ""
    assert (tmp_path / "train.py").read_text() == source


def test_fix_on_2_4_rewrites(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("import torch\nscaler = torch.cuda.amp.GradScaler()\n")
    done = amp_lint(tmp_path, "check", "--no-cache", "--fix", "--torch-version", "2.4", "train.py")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "train.py").read_text() == (
        'import torch\nscaler = torch.amp.GradScaler("cuda")\n'
    )


def test_fix_on_2_3_rewrites_the_scaler_and_keeps_custom_fwd(project: Path) -> None:
    done = amp_lint(project, "check", "--no-cache", "--fix", "--torch-version", "2.3", "train.py")
    assert done.returncode == 0, done.stdout + done.stderr
    fixed = (project / "train.py").read_text()
    assert "@torch.cuda.amp.custom_fwd\n" in fixed
    assert 'torch.amp.GradScaler("cuda")' in fixed
    assert 'torch.amp.autocast("cuda")' in fixed


def test_bare_autocast_decorator_is_a_bug_on_every_torch(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(
        "import torch\n\n\n@torch.cuda.amp.autocast\ndef f(x):\n    return x\n"
    )
    old = amp_lint(tmp_path, "check", "--no-cache", "--torch-version", "1.12", "train.py")
    assert old.returncode == 1
    assert "write `@torch.cuda.amp.autocast()`" in old.stdout
    new = amp_lint(tmp_path, "check", "--no-cache", "--torch-version", "2.1", "train.py")
    assert "write `@torch.amp.autocast('cuda')`" in new.stdout


# Where the setting comes from


def test_config_key(project: Path) -> None:
    write_pyproject(project, '[tool.amp-lint]\ntorch-version = "2.1"\n')
    assert reported_lines(project) == {AUTOCAST_LINE}


def test_command_line_overrides_the_config_key(project: Path) -> None:
    write_pyproject(project, '[tool.amp-lint]\ntorch-version = "2.1"\n')
    assert reported_lines(project, "--torch-version", "2.4") == ALL_LINES


def test_config_key_with_explicit_config_file(project: Path) -> None:
    (project / "settings.toml").write_text('[tool.amp-lint]\ntorch-version = "2.3.0"\n')
    lines = reported_lines(project, "--config", "settings.toml")
    assert lines == {SCALER_LINE, AUTOCAST_LINE}


@pytest.mark.parametrize("value", ["2", "2.x", "latest", "2.1.0.1", "v2.1", ""])
def test_invalid_command_line_value_is_one_error_line(project: Path, value: str) -> None:
    done = amp_lint(project, "check", "--no-cache", "--torch-version", value, "train.py")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"amp-lint: error: --torch-version: {value!r} is not a torch version "
        "(X.Y or X.Y.Z, e.g. 2.1)"
    ]


@pytest.mark.parametrize("value", ["2.1", '"2"', '"newest"', "[2, 1]", "true"])
def test_invalid_config_value_is_one_error_line_naming_file_and_key(
    project: Path, value: str
) -> None:
    write_pyproject(project, f"[tool.amp-lint]\ntorch-version = {value}\n")
    done = amp_lint(project, "check", "--no-cache", "train.py")
    assert done.returncode == 2
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith(f"amp-lint: error: {project / 'pyproject.toml'}: ")
    assert "tool.amp-lint.torch-version must be a string of the form X.Y or X.Y.Z" in line
    if value == "2.1":
        assert 'not 2.1 (a float: write "2.1")' in line


def test_bad_config_value_is_an_error_whatever_the_command_line_says(project: Path) -> None:
    # A bad configured value is an error even when the command line sets another: the file
    # is wrong, and ruff reports a bad setting whatever overrides it.
    write_pyproject(project, "[tool.amp-lint]\ntorch-version = 2.1\n")
    done = amp_lint(project, "check", "--no-cache", "--torch-version", "2.4", "train.py")
    assert done.returncode == 2


# Read from the project's own dependencies


@pytest.mark.parametrize(
    ("dependencies", "lines"),
    [
        (["torch>=2.1"], {AUTOCAST_LINE}),
        (["numpy", "torch >= 2.3.0, < 3"], {SCALER_LINE, AUTOCAST_LINE}),
        (["torch~=2.3"], {SCALER_LINE, AUTOCAST_LINE}),
        (["torch==2.2.*"], {AUTOCAST_LINE}),
        (["Torch>=2.4"], ALL_LINES),
        (["torch[opt]>=2.1; sys_platform == 'linux'"], {AUTOCAST_LINE}),
        # Two requirements under different markers: the oldest bound is the oldest torch.
        (
            ["torch>=2.4; sys_platform == 'linux'", "torch>=2.1; sys_platform == 'darwin'"],
            {AUTOCAST_LINE},
        ),
        # Nothing said unambiguously: the newest torch is assumed.
        (["torch"], ALL_LINES),
        (["torch<2.3"], ALL_LINES),
        (["torch>=2.4; sys_platform == 'linux'", "torch; sys_platform == 'darwin'"], ALL_LINES),
        (["torch @ https://example.com/torch-2.1.0-cp311-linux_x86_64.whl"], ALL_LINES),
        (["torchvision>=0.16"], ALL_LINES),
        ([], ALL_LINES),
    ],
)
def test_read_from_project_dependencies(
    project: Path, dependencies: list[str], lines: set[int]
) -> None:
    write_pyproject(project, f'[project]\nname = "x"\ndependencies = {json.dumps(dependencies)}\n')
    assert reported_lines(project) == lines


def test_dependencies_beside_the_amp_lint_table(project: Path) -> None:
    write_pyproject(
        project,
        '[project]\nname = "x"\ndependencies = ["torch>=2.1"]\n\n'
        '[tool.amp-lint]\nselect = ["AMP4"]\n',
    )
    assert reported_lines(project) == {AUTOCAST_LINE}


def test_setting_and_command_line_win_over_dependencies(project: Path) -> None:
    write_pyproject(
        project,
        '[project]\nname = "x"\ndependencies = ["torch>=2.1"]\n\n'
        '[tool.amp-lint]\ntorch-version = "2.3"\n',
    )
    assert reported_lines(project) == {SCALER_LINE, AUTOCAST_LINE}
    assert reported_lines(project, "--torch-version", "2.4") == ALL_LINES


def test_dependencies_found_from_a_subdirectory(project: Path) -> None:
    write_pyproject(project, '[project]\nname = "x"\ndependencies = ["torch>=2.1"]\n')
    (project / "pkg").mkdir()
    (project / "pkg" / "train.py").write_text(USES)
    done = amp_lint(project / "pkg", "check", "--no-cache", "train.py")
    assert {int(line.split(":")[1]) for line in done.stdout.splitlines()} == {AUTOCAST_LINE}


# The cache


def test_the_setting_is_part_of_the_cache_key(project: Path) -> None:
    cache = ["--cache-dir", str(project / "cache"), "--select", "AMP401", "train.py"]
    first = amp_lint(project, "check", "--torch-version", "2.4", *cache)
    assert first.stdout.count("AMP401") == 3
    second = amp_lint(project, "check", "--torch-version", "2.1", *cache)
    assert second.stdout.count("AMP401") == 1
    write_pyproject(project, '[project]\nname = "x"\ndependencies = ["torch>=2.3"]\n')
    third = amp_lint(project, "check", *cache)
    assert third.stdout.count("AMP401") == 2
    write_pyproject(project, '[project]\nname = "x"\ndependencies = ["torch>=2.4"]\n')
    fourth = amp_lint(project, "check", *cache)
    assert fourth.stdout.count("AMP401") == 3


# The other ways in


def test_standard_input(project: Path) -> None:
    args = ("check", "--no-cache", "--select", "AMP401", "-")
    old = subprocess.run(
        [str(AMP_LINT), *args, "--torch-version", "2.1"],
        cwd=project,
        input=USES,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert {int(line.split(":")[1]) for line in old.stdout.splitlines()} == {AUTOCAST_LINE}


def test_flake8_plugin_reads_the_setting(project: Path) -> None:
    write_pyproject(project, '[tool.amp-lint]\ntorch-version = "2.1"\n')
    done = flake8(project, "--select", "AMP401", "train.py")
    assert {int(line.split(":")[1]) for line in done.stdout.splitlines()} == {AUTOCAST_LINE}
    write_pyproject(project, '[project]\nname = "x"\ndependencies = ["torch>=2.3"]\n')
    done = flake8(project, "--select", "AMP401", "train.py")
    lines = {int(line.split(":")[1]) for line in done.stdout.splitlines()}
    assert lines == {SCALER_LINE, AUTOCAST_LINE}


def test_show_settings_says_where_the_version_came_from(project: Path) -> None:
    write_pyproject(project, '[project]\nname = "x"\ndependencies = ["torch>=2.1"]\n')
    done = amp_lint(project, "check", "--show-settings", "train.py")
    [line] = [line for line in done.stdout.splitlines() if line.startswith("torch-version")]
    assert line.startswith('torch-version = "2.1"')
    assert "[project] dependencies" in line and "torch>=2.1" in line
    done = amp_lint(project, "check", "--show-settings", "--torch-version", "2.4.1", "train.py")
    assert 'torch-version = "2.4.1"  # from --torch-version' in done.stdout


def test_findings_the_target_holds_back_are_said_on_the_summary(tmp_path: Path) -> None:
    """A `torch>=2.2` floor leaves out findings whose fixes need 2.4: the summary says how
    many, which release they need and where the target came from, on cold and warm runs."""
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "demo"\ndependencies = ["torch>=2.2"]\n\n[tool.amp-lint]\n'
    )
    (tmp_path / "train.py").write_text(
        "import torch\n\n\n"
        "class Scaled(torch.autograd.Function):\n"
        "    @staticmethod\n    @torch.cuda.amp.custom_fwd\n"
        "    def forward(ctx, x):\n        return x * 2\n\n\n"
        "scaler = torch.cuda.amp.GradScaler()\n"
    )
    said = (
        "2 findings not reported: their fixes need torch >= 2.4, and the torch-version target "
        f"is 2.2 ([project] dependencies of {tmp_path / 'pyproject.toml'}: torch>=2.2); "
        "--torch-version 2.4 shows them."
    )
    cache = tmp_path / "cache"
    for run in ("cold", "warm"):
        result = amp_lint(tmp_path, "check", "--cache-dir", str(cache), ".")
        assert (result.returncode, result.stdout) == (0, ""), run
        assert said in result.stderr.splitlines(), (run, result.stderr)
    shown = amp_lint(tmp_path, "check", "--no-cache", "--torch-version", "2.4", ".")
    assert shown.returncode == 1 and len(shown.stdout.splitlines()) == 2
    assert "not reported" not in shown.stderr
    assert "not reported" not in amp_lint(tmp_path, "check", "-q", "--no-cache", ".").stderr


CUSTOM_FWD = (
    "import torch\n\n\n"
    "class Scaled(torch.autograd.Function):\n"
    "    @staticmethod\n    @torch.cuda.amp.custom_fwd\n"
    "    def forward(ctx, x):\n        return x * 2\n"
)


@pytest.mark.parametrize(
    ("files", "source"),
    [
        (
            {"setup.py": 'from setuptools import setup\nsetup(install_requires=["torch>=2.2"])\n'},
            "install_requires of {}/setup.py: torch>=2.2",
        ),
        (
            {"setup.py": 'REQS = ["numpy", "torch >= 2.2, < 3"]\nsetup(install_requires=REQS)\n'},
            "install_requires of {}/setup.py: torch >= 2.2, < 3",
        ),
        (
            {"setup.cfg": "[options]\ninstall_requires =\n    numpy\n    torch>=2.2\n"},
            "install_requires of {}/setup.cfg: torch>=2.2",
        ),
        (
            {"requirements/base.txt": "torch>=2.3\n", "requirements/old.txt": "torch>=2.2\n"},
            "{}/requirements/*.txt: torch>=2.3, torch>=2.2",
        ),
        (
            {
                "pyproject.toml": '[project]\nname = "p"\ndynamic = ["dependencies"]\n\n'
                '[tool.setuptools.dynamic]\ndependencies = {file = ["deps.txt"]}\n',
                "deps.txt": "torch>=2.2\n",
            },
            "dynamic dependencies of {}/pyproject.toml (deps.txt): torch>=2.2",
        ),
    ],
)
def test_the_torch_floor_is_read_wherever_the_project_declares_it(
    tmp_path: Path, files: dict[str, str], source: str
) -> None:
    """A fix past the declared floor is an AttributeError on the torch the project supports:
    `torch.amp.custom_fwd` does not exist before 2.4, so AMP401 holds the finding back."""
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "train.py").write_text(CUSTOM_FWD)
    shown = amp_lint(tmp_path, "check", "--show-settings", "train.py").stdout
    expected = f'torch-version = "2.2"  # from {source.format(tmp_path)}'
    assert expected in shown.splitlines(), shown
    result = amp_lint(tmp_path, "check", "--no-cache", "train.py")
    assert (result.returncode, result.stdout) == (0, "")
    assert "1 finding not reported: their fixes need torch >= 2.4" in result.stderr


def test_an_unbounded_torch_in_a_requirements_folder_leaves_the_floor_unknown(
    tmp_path: Path,
) -> None:
    (tmp_path / "requirements").mkdir()
    (tmp_path / "requirements" / "base.txt").write_text("torch>=2.2\n")
    (tmp_path / "requirements" / "docs.txt").write_text("torch\n")
    (tmp_path / "train.py").write_text(CUSTOM_FWD)
    shown = amp_lint(tmp_path, "check", "--show-settings", "train.py").stdout
    assert "torch-version = (not set: the newest torch)" in shown.splitlines()
    assert amp_lint(tmp_path, "check", "--no-cache", "train.py").returncode == 1
