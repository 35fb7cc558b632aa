"""The bundled example that the README's first command lints shows every rule."""

from __future__ import annotations

from pathlib import Path

from runners import amp_lint

from amp_lint.rules import all_rules
from amp_lint.settings.config import OPT_IN_PREFIX

ROOT = Path(__file__).resolve().parent.parent


def test_bundled_example_shows_a_finding_of_every_rule() -> None:
    result = amp_lint(ROOT, "check", "examples/")
    assert result.returncode == 1
    codes = {line.split(": ", 1)[1].split(" ", 1)[0] for line in result.stdout.splitlines()}
    # Opt-in rules (config.OPT_IN_PREFIX: unused-noqa) are not in the default selection.
    assert codes == {rule.code for rule in all_rules() if not rule.code.startswith(OPT_IN_PREFIX)}
    assert "Found " in result.stderr
