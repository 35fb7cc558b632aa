"""Suppression comments as ruff reads them: file-level `# amp-lint: noqa`, unused-noqa
(AMP900) and its fix, --add-noqa, --exit-non-zero-on-fix and --silent, through the real
command and real flake8."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from runners import amp_lint, flake8

# AMP401 on line 4 (safe fix), AMP101 on line 5 (unsafe fix).
TWO_RULES = """\
import torch

x = torch.randn(4).half()
with torch.cuda.amp.autocast():
    y = x.masked_fill(x > 0, -1e9)
"""


def check(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return amp_lint(root, "check", "--no-cache", *args)


def codes(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.returncode in (0, 1), result.stderr
    return [line.split(": ", 1)[1].split(" ", 1)[0] for line in result.stdout.splitlines() if line]


def project(tmp_path: Path, text: str, name: str = "train.py") -> Path:
    (tmp_path / name).write_text(text)
    return tmp_path


# File-level suppression


@pytest.mark.parametrize(
    ("comment", "expected"),
    [
        ("", ["AMP401", "AMP101"]),
        ("# amp-lint: noqa\n", []),
        ("# amp-lint: noqa: AMP101\n", ["AMP401"]),
        ("# amp-lint: noqa: AMP4, AMP101\n", []),
        ("    # AMP-LINT: NOQA: amp401\n", ["AMP101"]),
        ("# flake8: noqa\n", []),  # ruff honours flake8's file-level form too
        ("# noqa\n", ["AMP401", "AMP101"]),  # a bare noqa on its own line is not file-level
        ("# noqa: AMP101\n", ["AMP401", "AMP101"]),
        ("# flake8: noqa: AMP101\n", ["AMP401", "AMP101"]),  # flake8 ignores this form
        ("x = 1  # amp-lint: noqa\n", ["AMP401", "AMP101"]),  # must be on its own line
    ],
)
def test_file_level_noqa(tmp_path: Path, comment: str, expected: list[str]) -> None:
    root = project(tmp_path, TWO_RULES + comment)
    result = check(root, "train.py")
    assert codes(result) == expected
    assert result.returncode == (1 if expected else 0)


def test_flake8_honours_file_level_noqa(tmp_path: Path) -> None:
    root = project(tmp_path, "# amp-lint: noqa: AMP101\n" + TWO_RULES)
    result = flake8(root, "--select=AMP", "train.py")
    assert result.stderr == ""
    assert [line.split()[1] for line in result.stdout.splitlines()] == ["AMP401"]
    (root / "train.py").write_text("# flake8: noqa\n" + TWO_RULES)
    assert flake8(root, "--select=AMP", "train.py").stdout == ""


# unused-noqa (AMP900)

UNUSED = """\
# amp-lint: noqa: AMP202
import torch

x = torch.randn(4).half()
with torch.autocast("cuda"):
    y = x.masked_fill(x > 0, -1e9)  # noqa: AMP101, AMP003, E501
    z = x + 1  # noqa: AMP102
    w = x + 2  # noqa: E501
    v = x + 3  # noqa
    u = x + 4  # noqa: AMP999, AMP900
    t = x + 5  # type: ignore  # noqa: AMP102 because of the spec
"""

UNUSED_FIXED = """\
import torch

x = torch.randn(4).half()
with torch.autocast("cuda"):
    y = x.masked_fill(x > 0, -1e9)  # noqa: AMP101, E501
    z = x + 1
    w = x + 2  # noqa: E501
    v = x + 3  # noqa
    u = x + 4  # noqa: AMP999, AMP900
    t = x + 5  # type: ignore  # because of the spec
"""


def test_unused_noqa_is_not_reported_by_default(tmp_path: Path) -> None:
    root = project(tmp_path, UNUSED)
    assert codes(check(root, "train.py")) == []
    assert codes(check(root, "--select", "AMP", "train.py")) == []


def test_unused_noqa_reports_only_amp_codes_that_suppressed_nothing(tmp_path: Path) -> None:
    root = project(tmp_path, UNUSED)
    result = check(root, "--extend-select", "AMP900", "--output-format", "json", "train.py")
    assert result.returncode == 1, result.stderr
    found = [(f["line"], f["code"], f["message"]) for f in json.loads(result.stdout)]
    assert found == [
        (1, "AMP900", "Unused `noqa` directive (unused: `AMP202`)"),
        (6, "AMP900", "Unused `noqa` directive (unused: `AMP003`)"),
        (7, "AMP900", "Unused `noqa` directive (unused: `AMP102`)"),
        (11, "AMP900", "Unused `noqa` directive (unused: `AMP102`)"),
    ]


def test_codes_of_rules_not_enabled_are_unused(tmp_path: Path) -> None:
    root = project(tmp_path, "import torch\nx = 1  # noqa: AMP101\n")
    result = check(root, "--select", "AMP900", "train.py")
    assert "Unused `noqa` directive (non-enabled: `AMP101`)" in result.stdout
    assert check(root, "--select", "ALL", "train.py").stdout.count("AMP900") == 1


def test_unused_noqa_fix_removes_only_the_unused_codes(tmp_path: Path) -> None:
    root = project(tmp_path, UNUSED)
    result = check(root, "--extend-select", "AMP900", "--fix", "train.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (root / "train.py").read_text() == UNUSED_FIXED
    assert "Fixed 4 findings, 0 remaining." in result.stderr
    again = check(root, "--extend-select", "AMP900", "--fix", "train.py")
    assert (again.returncode, again.stdout) == (0, "")
    assert (root / "train.py").read_text() == UNUSED_FIXED


def test_unused_noqa_fix_with_other_fixes(tmp_path: Path) -> None:
    root = project(tmp_path, TWO_RULES.replace("-1e9)", "-1e9)  # noqa: AMP101, AMP401"))
    result = check(root, "--extend-select", "AMP900", "--fix", "train.py")
    assert result.returncode == 0, result.stdout + result.stderr
    text = (root / "train.py").read_text()
    assert "torch.amp.autocast(" in text  # AMP401 fixed
    assert text.endswith("-1e9)  # noqa: AMP101\n")  # AMP401's code removed


def test_diff_shows_the_unused_noqa_fix(tmp_path: Path) -> None:
    root = project(tmp_path, "import torch\nx = 1  # noqa: AMP101\n")
    result = check(root, "--extend-select", "AMP900", "--diff", "train.py")
    assert result.returncode == 1
    assert "-x = 1  # noqa: AMP101\n+x = 1\n" in result.stdout
    assert (root / "train.py").read_text() == "import torch\nx = 1  # noqa: AMP101\n"


# --exit-non-zero-on-fix


def test_exit_non_zero_on_fix(tmp_path: Path) -> None:
    root = project(tmp_path, TWO_RULES)
    plain = check(root, "--fix", "--unsafe-fixes", "train.py")
    assert plain.returncode == 0, plain.stdout + plain.stderr
    (root / "train.py").write_text(TWO_RULES)
    strict = check(root, "--fix", "--unsafe-fixes", "--exit-non-zero-on-fix", "train.py")
    assert strict.returncode == 1
    assert "Fixed 2 findings, 0 remaining." in strict.stderr
    nothing_left = check(root, "--fix", "--exit-non-zero-on-fix", "train.py")
    assert nothing_left.returncode == 0


# --add-noqa

ADD_NOQA = """\
import torch

x = torch.randn(4).half()
with torch.cuda.amp.autocast():
    y = x.masked_fill(x > 0, -1e9)  # type: ignore
    z = x.masked_fill(x > 0, -1e9)  # noqa: E501
    w = x.masked_fill(
        x > 0, -1e9
    )
    v = x.masked_fill(x > 0, float(\"\"\"-1e9
\"\"\"))
"""

ADD_NOQA_ADDED = """\
import torch

x = torch.randn(4).half()
with torch.cuda.amp.autocast():  # noqa: AMP401
    y = x.masked_fill(x > 0, -1e9)  # type: ignore  # noqa: AMP101
    z = x.masked_fill(x > 0, -1e9)  # noqa: E501, AMP101
    w = x.masked_fill(  # noqa: AMP101
        x > 0, -1e9
    )
    v = x.masked_fill(x > 0, float(\"\"\"-1e9
\"\"\"))
"""


def test_add_noqa_twice(tmp_path: Path) -> None:
    root = project(tmp_path, ADD_NOQA)
    first = check(root, "--add-noqa", "train.py")
    assert first.returncode == 0, first.stderr
    assert "Added 4 noqa directives." in first.stderr
    assert (
        "warning: train.py:10: no noqa comment added for AMP101: the line ends inside a "
        "multi-line string" in first.stderr
    )
    assert (root / "train.py").read_text() == ADD_NOQA_ADDED
    second = check(root, "--add-noqa", "train.py")
    assert "Added 0 noqa directives." in second.stderr
    assert (root / "train.py").read_text() == ADD_NOQA_ADDED
    # What is left is the finding in the string no comment can reach.
    assert codes(check(root, "train.py")) == ["AMP101"]


def test_add_noqa_cannot_be_combined_with_fix(tmp_path: Path) -> None:
    root = project(tmp_path, TWO_RULES)
    result = check(root, "--add-noqa", "--fix", "train.py")
    assert result.returncode == 2
    assert "--add-noqa cannot be combined with --fix" in result.stderr
    assert (root / "train.py").read_text() == TWO_RULES


# --silent


def test_silent_prints_nothing_but_keeps_the_exit_status(tmp_path: Path) -> None:
    root = project(tmp_path, TWO_RULES)
    result = check(root, "--silent", "train.py")
    assert (result.returncode, result.stdout, result.stderr) == (1, "", "")
    quiet = check(root, "-q", "train.py")
    assert quiet.stdout and "Found" not in quiet.stderr
