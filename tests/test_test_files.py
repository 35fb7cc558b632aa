"""Tests use half precision on purpose and run a few steps: rules whose hazard needs a long
training run (AMP304, AMP308) do not report in test files, while errors at run time still do,
and the same code in a training script is reported (issue 41, a litgpt test fitting two
batches in "bf16-true")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from runners import amp_lint

from amp_lint.sources.test_files import is_test_file

TRAINING = """\
import torch


def train(net, loader):
    model = net.cuda().to(torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    for x, y in loader:
        torch.nn.functional.mse_loss(model(x.bfloat16()), y).backward()
        optimizer.step()


def masked(x, w, mask):
    with torch.autocast("cuda"):
        h = x @ w
        h[mask] = torch.zeros(3)
        return h
"""


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("tests/test_train.py", True),
        ("tests/helpers.py", True),
        ("pkg/test/utils.py", True),
        ("train_test.py", True),
        ("conftest.py", True),
        ("test_train.py", True),
        ("train.py", False),
        ("pkg/testing.py", False),
        ("latest/train.py", False),
        ("contests/train.py", False),
    ],
)
def test_test_files_are_told_by_layout(path: str, expected: bool) -> None:
    assert is_test_file(path) is expected


def test_long_run_hazards_are_not_reported_in_tests(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_train.py").write_text(TRAINING)
    (tmp_path / "train.py").write_text(TRAINING)
    result = amp_lint(tmp_path, "check", "--no-cache", "--output-format", "json", ".")
    found = sorted((f["path"], f["code"]) for f in json.loads(result.stdout))
    assert found == [
        ("tests/test_train.py", "AMP001"),
        ("train.py", "AMP001"),
        ("train.py", "AMP308"),
    ]


LIBRARY = """\
import torch
from torch import nn


class Normalize(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        h = self.proj(x)
        return h / (h.std(-1, keepdim=True) + 1e-10)
"""

CALLER = """\
import torch

import lib


def run(model, x):
    with torch.autocast("cuda"):
        return model(x)
"""


def test_a_region_in_a_test_does_not_dispatch_into_the_library(tmp_path: Path) -> None:
    """A test calling an opaque module under autocast says nothing about which of the
    project's modules run so (speechbrain's autocast test reported its float32 feature
    code); the same call in a training script does dispatch."""
    (tmp_path / "lib.py").write_text(LIBRARY)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_amp.py").write_text(CALLER)
    result = amp_lint(tmp_path, "check", "--no-cache", "--output-format", "json", ".")
    assert json.loads(result.stdout) == []
    (tmp_path / "train.py").write_text(CALLER)
    result = amp_lint(tmp_path, "check", "--no-cache", "--output-format", "json", ".")
    assert [(f["path"], f["code"]) for f in json.loads(result.stdout)] == [("lib.py", "AMP004")]


RAISING = """\
import pytest
import torch


def test_float32_into_bfloat16_layer_raises():
    layer = torch.nn.Linear(4, 4).to(torch.bfloat16)
    with pytest.raises(RuntimeError):
        layer(torch.ones(1, 4))


def masked(x, w, mask):
    with torch.autocast("cuda"):
        h = x @ w
        with pytest.raises(RuntimeError):
            h[mask] = torch.zeros(3)
        h[mask] = torch.zeros(3)
        return h
"""


def test_code_that_must_raise_is_no_finding(tmp_path: Path) -> None:
    """Inside `pytest.raises` the error is what the test asserts (Automodel's diffusion
    test); the same write outside it is reported."""
    (tmp_path / "test_raising.py").write_text(RAISING)
    result = amp_lint(tmp_path, "check", "--no-cache", "--output-format", "json", ".")
    assert [(f["line"], f["code"]) for f in json.loads(result.stdout)] == [(16, "AMP001")]
