"""A project that uses no mixed precision (no autocast, no GradScaler, no .half()) gets no
findings from any rule, although its float32 code has every pattern the rules look for."""

from __future__ import annotations

from pathlib import Path

from runners import amp_lint, flake8

PROJECT = Path(__file__).parent / "projects" / "plain_fp32"


def test_every_rule_is_silent_without_mixed_precision() -> None:
    result = amp_lint(PROJECT, "check", "--select", "AMP", ".")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""


def test_flake8_plugin_is_silent_too() -> None:
    result = flake8(PROJECT, "--select=AMP", ".")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""


def test_the_same_code_under_autocast_is_flagged(tmp_path: Path) -> None:
    """The silence above comes from the absence of mixed precision, not from code amp-lint
    cannot read: the same model code under an autocast decorator is flagged."""
    source = (PROJECT / "models" / "attention.py").read_text()
    decorated = source.replace(
        "    def forward(self, x, pad_mask):\n",
        '    @torch.autocast("cuda")\n    def forward(self, x, pad_mask):\n',
    )
    assert decorated != source
    (tmp_path / "attention.py").write_text(decorated)
    result = amp_lint(tmp_path, "check", "--select", "AMP", "attention.py")
    assert result.returncode == 1, result.stdout + result.stderr
    assert " AMP001 " in result.stdout
