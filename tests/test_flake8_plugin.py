"""The flake8 plugin, run through the real flake8: registered, quiet on unrelated files, and
reporting the same positions as `amp-lint check`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from runners import amp_lint, flake8, flake8_process

from amp_lint import __version__
from amp_lint.flake8_plugin import AmpLintChecker

FIXTURES = Path(__file__).parent / "fixtures"
DEPRECATED = "import torch\n\nwith torch.cuda.amp.autocast():\n    pass\n"


def without_fix_markers(concise: str) -> str:
    """The concise output as flake8 prints it: the same summaries, without ruff's `[*]`
    fixable marker (flake8 applies no fixes)."""
    return "".join(line.replace(" [*] ", " ", 1) for line in concise.splitlines(keepends=True))


def test_plugin_is_registered(tmp_path: Path) -> None:
    result = flake8_process(tmp_path, "--version")
    assert result.returncode == 0
    assert f"amp-lint: {__version__}" in result.stdout


def test_file_without_amp_vocabulary_is_not_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    def must_not_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("lint_source called for a file without AMP vocabulary")

    monkeypatch.setattr("amp_lint.flake8_plugin.lint_source", must_not_run)
    lines = ["import torch\n", "x = torch.ones(3).sum()\n"]
    checker = AmpLintChecker(ast.parse("".join(lines)), lines, "plain.py")
    assert list(checker.run()) == []


def test_unparsable_file_yields_nothing() -> None:
    lines = ["import torch\n", "with torch.autocast(:\n"]
    assert list(AmpLintChecker(ast.Module(body=[], type_ignores=[]), lines, "x.py").run()) == []


def test_internal_error_is_one_amp999_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr("amp_lint.flake8_plugin.lint_source", explode)
    lines = DEPRECATED.splitlines(keepends=True)
    results = list(AmpLintChecker(ast.parse(DEPRECATED), lines, "x.py").run())
    assert [(line, column) for line, column, _, _ in results] == [(1, 0)]
    assert results[0][2].startswith("AMP999 ")


def test_positions_equal_the_cli(tmp_path: Path) -> None:
    (tmp_path / "deprecated.py").write_text(DEPRECATED)
    cli = amp_lint(tmp_path, "check", "deprecated.py")
    plugin = flake8(tmp_path, "--select=AMP", "deprecated.py")
    assert cli.stdout
    assert plugin.stdout == without_fix_markers(cli.stdout)


def test_noqa_is_left_to_flake8(tmp_path: Path) -> None:
    (tmp_path / "noqa.py").write_text(
        "import torch\n\nwith torch.cuda.amp.autocast():  # noqa: AMP401\n    pass\n"
    )
    assert flake8(tmp_path, "--select=AMP", "noqa.py").stdout == ""
    result = flake8(tmp_path, "--select=AMP", "--disable-noqa", "noqa.py")
    assert result.stdout.startswith("noqa.py:3:6: AMP401 ")


def test_positions_equal_the_cli_on_every_fixture() -> None:
    bad_files = [
        path
        for path in sorted(FIXTURES.glob("AMP*/bad*.py"))
        if not path.name.endswith((".fixed.py", ".safe-fixed.py"))
        # A config's select/ignore bind the CLI, flake8's bind the plugin: skip configured ones.
        and not (path.parent / "pyproject.toml").exists()
    ]
    names = [str(p.relative_to(FIXTURES)) for p in bad_files]
    cli = amp_lint(FIXTURES, "check", *names)
    plugin = flake8(FIXTURES, "--select=AMP", *names)
    assert cli.stdout
    assert sorted(plugin.stdout.splitlines()) == sorted(
        without_fix_markers(cli.stdout).splitlines()
    )
