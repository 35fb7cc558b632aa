"""The per-release autocast op tables through the real `amp-lint` command: `--torch-version`
picks the table, so findings that rest on an op whose policy changed between releases
(`rms_norm`: unlisted up to 2.11, float32 under CUDA autocast from 2.12) differ by release;
`requirements.txt` pins count; `--show-settings` names the table; messages name the release."""

from __future__ import annotations

from pathlib import Path

import pytest
from runners import amp_lint, flake8

# Only rms_norm's policy decides both findings: the index write (AMP001) and flash-attn's
# float32 refusal (AMP204) happen only where nn.RMSNorm returns float32 under autocast.
RMS_NORM_FIXTURE = """\
import torch
import torch.nn as nn
from flash_attn import flash_attn_func

proj = nn.Linear(64, 192).cuda()
q_norm = nn.RMSNorm(64).cuda()
k_norm = nn.RMSNorm(64).cuda()


def attend(x, mask):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        q, k, v = proj(x).chunk(3, dim=-1)
        q, k = q_norm(q), k_norm(k)
        v[mask] = k[mask]
        return flash_attn_func(q, k, v, causal=True)
"""
INDEX_WRITE_LINE, FLASH_LINE = 14, 15


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "attend.py").write_text(RMS_NORM_FIXTURE)
    return tmp_path


def findings(project: Path, *args: str) -> dict[tuple[int, str], str]:
    done = amp_lint(project, "check", "--no-cache", "--output-format", "concise", *args)
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
    found = {}
    for line in done.stdout.splitlines():
        if line.startswith("attend.py:"):
            _, row, _, rest = line.split(":", 3)
            found[int(row), rest.split()[0]] = rest
    return found


def full_messages(project: Path, *args: str) -> str:
    done = amp_lint(project, "check", "--no-cache", "--output-format", "full", *args)
    assert "Traceback" not in done.stderr, done.stderr
    return done.stdout


@pytest.mark.parametrize("old", ["2.4", "2.9", "2.11", "2.11.0"])
def test_before_2_12_rms_norm_keeps_the_half_dtype(project: Path, old: str) -> None:
    assert findings(project, "--torch-version", old, "attend.py") == {}


@pytest.mark.parametrize("new", ["2.12", "2.12.1", "2.13", "2.15"])
def test_from_2_12_rms_norm_is_float32_and_both_findings_appear(project: Path, new: str) -> None:
    assert set(findings(project, "--torch-version", new, "attend.py")) == {
        (INDEX_WRITE_LINE, "AMP001"),
        (FLASH_LINE, "AMP204"),
    }


def test_unset_uses_the_newest_table(project: Path) -> None:
    assert set(findings(project, "attend.py")) == {
        (INDEX_WRITE_LINE, "AMP001"),
        (FLASH_LINE, "AMP204"),
    }


def test_the_message_names_the_release_it_holds_on(project: Path) -> None:
    text = full_messages(project, "--torch-version", "2.12", "attend.py")
    assert "torch 2.12: `rms_norm` runs in float32 under CUDA autocast" in text
    assert "up to 2.11 it keeps its input dtype" in text
    assert '"FlashAttention only support fp16 and bf16 data type"' in text


def test_requirements_pin_selects_the_table(project: Path) -> None:
    (project / "requirements.txt").write_text("numpy\ntorch==2.11.0  # cu121 wheels\n")
    assert findings(project, "attend.py") == {}
    (project / "requirements.txt").write_text("torch>=2.12\n")
    assert len(findings(project, "attend.py")) == 2
    # The project's own pyproject bound wins over requirements.txt, the option over both.
    (project / "pyproject.toml").write_text(
        '[project]\nname = "x"\ndependencies = ["torch>=2.9"]\n'
    )
    assert findings(project, "attend.py") == {}
    assert len(findings(project, "--torch-version", "2.13", "attend.py")) == 2


def test_requirements_without_a_bound_leave_it_unset(project: Path) -> None:
    (project / "requirements.txt").write_text("torch\n-r base.txt\n")
    done = amp_lint(project, "check", "--show-settings", "attend.py")
    assert "torch-version = (not set: the newest torch)" in done.stdout


def test_show_settings_names_the_table(project: Path) -> None:
    done = amp_lint(project, "check", "--show-settings", "--torch-version", "2.11", "attend.py")
    [line] = [line for line in done.stdout.splitlines() if line.startswith("autocast-op-table")]
    assert line.startswith('autocast-op-table = "torch 2.11.')
    done = amp_lint(project, "check", "--show-settings", "--torch-version", "2.1", "attend.py")
    assert 'autocast-op-table = "torch 2.4.' in done.stdout
    assert "older than every table" in done.stdout
    (project / "requirements.txt").write_text("torch==2.12.0\n")
    done = amp_lint(project, "check", "--show-settings", "attend.py")
    assert "requirements.txt: torch==2.12.0" in done.stdout
    assert 'autocast-op-table = "torch 2.12.' in done.stdout


def test_flake8_reads_the_target_too(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.amp-lint]\ntorch-version = "2.11"\n')
    assert "AMP204" not in flake8(project, "--select", "AMP", "attend.py").stdout
    (project / "pyproject.toml").write_text('[tool.amp-lint]\ntorch-version = "2.12"\n')
    assert "AMP204" in flake8(project, "--select", "AMP", "attend.py").stdout


# Device support per release (AMP402, and regions the release disables)

MPS = """\
import torch

model = torch.nn.Linear(8, 8).to("mps")
scaler = torch.amp.GradScaler("mps")
with torch.autocast("mps", dtype=torch.bfloat16):
    loss = model(torch.randn(4, 8, device="mps")).sum()
with torch.autocast("mps", dtype=torch.float16):
    loss = model(torch.randn(4, 8, device="mps")).sum()
"""


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("2.1", {4: "raises", 5: "raises", 7: "raises"}),
        ("2.4", {4: "raises", 5: "raises", 7: "raises"}),
        ("2.5", {4: "raises", 5: "disabled"}),
        ("2.6", {4: "raises"}),
        ("2.7.1", {4: "raises"}),
        ("2.8", {}),
        (None, {}),
    ],
)
def test_mps_support_follows_the_release(
    tmp_path: Path, version: str | None, expected: dict[int, str]
) -> None:
    (tmp_path / "mps.py").write_text(MPS)
    option = ("--torch-version", version) if version else ()
    done = amp_lint(tmp_path, "check", "--no-cache", "--select", "AMP402", *option, "mps.py")
    assert "Traceback" not in done.stderr, done.stderr
    found = {}
    for line in done.stdout.splitlines():
        row = int(line.split(":")[1])
        found[row] = "disabled" if "silently disabled" in line else "raises"
    assert found == expected
