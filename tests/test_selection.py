"""Rule selectors are checked against the rules that exist, through the real command: a
selector that selects nothing is an error naming where it was written, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from runners import amp_lint

from amp_lint.rules import all_rules
from amp_lint.settings.rule_selectors import known_rules

DEPRECATED = "import torch\n\nwith torch.cuda.amp.autocast():\n    pass\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "deprecated.py").write_text(DEPRECATED)
    return tmp_path


def codes(stdout: str) -> list[str]:
    return [line.split(" ")[1] for line in stdout.splitlines()]


@pytest.mark.parametrize("flag", ["--select", "--extend-select", "--ignore"])
@pytest.mark.parametrize("selector", ["AMP999", "XYZ", "AMPX", "AMP99"])
def test_unknown_selector_on_the_command_line(project: Path, flag: str, selector: str) -> None:
    result = amp_lint(project, "check", flag, f"AMP4,{selector}", ".")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == f"amp-lint: error: {flag}: Unknown rule selector: `{selector}`\n"


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ('select = ["AMPX"]', "tool.amp-lint.select"),
        ('extend-select = ["AMP999"]', "tool.amp-lint.extend-select"),
        ('ignore = ["AMP999"]', "tool.amp-lint.ignore"),
        ('per-file-ignores = {"legacy/*" = ["AMP999"]}', "tool.amp-lint.per-file-ignores"),
    ],
)
def test_unknown_selector_in_the_config(project: Path, table: str, key: str) -> None:
    (project / "pyproject.toml").write_text(f"[tool.amp-lint]\n{table}\n")
    result = amp_lint(project, "check", ".")
    assert result.returncode == 2
    assert result.stdout == ""
    config = project.resolve() / "pyproject.toml"
    [line] = result.stderr.splitlines()
    assert line.startswith(f"amp-lint: error: {config}: {key}")
    selector = table.split('"')[-2]
    assert line.endswith(f": Unknown rule selector: `{selector}` (1 file not linted)")


@pytest.mark.parametrize("selector", ["ALL", "AMP", "AMP4", "AMP40", "AMP401", "amp401"])
def test_prefixes_of_existing_codes_select(project: Path, selector: str) -> None:
    result = amp_lint(project, "check", "--no-cache", "--select", selector, ".")
    assert (result.returncode, codes(result.stdout)) == (1, ["AMP401"]), result.stderr


def test_prefix_selecting_other_rules_only(project: Path) -> None:
    result = amp_lint(project, "check", "--no-cache", "--select", "AMP3", ".")
    assert (result.returncode, result.stdout) == (0, ""), result.stderr


def test_rule_names_stand_for_their_codes(project: Path) -> None:
    ignored = amp_lint(project, "check", "--no-cache", "--ignore", "deprecated-amp-api", ".")
    assert (ignored.returncode, ignored.stdout) == (0, ""), ignored.stderr
    (project / "pyproject.toml").write_text('[tool.amp-lint]\nselect = ["deprecated-amp-api"]\n')
    selected = amp_lint(project, "check", "--no-cache", ".")
    assert codes(selected.stdout) == ["AMP401"]


def test_every_listed_rule_is_a_valid_selector(project: Path) -> None:
    listed = amp_lint(project, "rules").stdout.splitlines()[1:]
    rule_codes = [line.split()[0] for line in listed]
    names = [line.split()[1] for line in listed]
    assert rule_codes
    result = amp_lint(project, "check", "--no-cache", "--ignore", ",".join(rule_codes + names))
    assert (result.returncode, result.stdout) == (0, ""), result.stderr


def test_the_registry_read_without_libcst_agrees_with_the_rule_classes() -> None:
    # rule_selectors reads the rules from their module names, to keep libcst out of warm
    # runs; a rule module named otherwise would make its code an "unknown selector".
    registered = {rule.code: rule.name for rule in all_rules()}
    known = known_rules()
    assert {code: known[code] for code in registered if code in known} == registered
    # Beyond the rule classes only the codes reported outside them (AMP900, unused-noqa).
    assert set(known) - set(registered) <= {"AMP900"}
