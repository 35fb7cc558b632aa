"""Fixes keep scripted code scriptable: an fp32 island whose device is not a literal
(`torch.autocast(h.device.type, enabled=False)`) makes the scripted module raise
"Autocast device argument must be a constant" when it runs, so in code TorchScript may
compile the island runs only in eager mode, behind `torch.jit.is_scripting()`. Run on CPU
torch: the fixed module scripts, and its eager forward runs in float32 under autocast."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from runners import amp_lint

torch = pytest.importorskip("torch")

HEAD = """\
import torch


class Head(torch.nn.Module):
    def forward(self, h: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        scores = torch.matmul(h.float(), w.float())
        return scores


def run(model: torch.nn.Module, h: torch.Tensor, w: torch.Tensor, device: str) -> torch.Tensor:
    with torch.autocast(device_type=device, dtype=torch.bfloat16):
        return model(h, w)
"""
SCRIPTED = HEAD + "\n\nscripted = torch.jit.script(Head())\n"


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"fixed_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # torch.jit.script reads the class's module source
    spec.loader.exec_module(module)
    return module


def fix(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / name
    path.write_text(source)
    result = amp_lint(tmp_path, "check", "--no-cache", "--fix", "--unsafe-fixes", name)
    assert result.returncode == 0, result.stdout + result.stderr
    again = amp_lint(tmp_path, "check", "--no-cache", "--fix", "--unsafe-fixes", name)
    assert again.returncode == 0 and path.read_text() == path.read_text()
    return path


def test_a_fix_in_scripted_code_keeps_it_scriptable(tmp_path: Path) -> None:
    path = fix(tmp_path, "scripted_head.py", SCRIPTED)
    fixed = path.read_text()
    assert "if torch.jit.is_scripting():" in fixed
    assert "torch.autocast(h.device.type, enabled=False)" in fixed
    module = load(path)  # runs `torch.jit.script(Head())`
    h = torch.randn(4, 8, dtype=torch.bfloat16)
    w = torch.randn(8, 4, dtype=torch.bfloat16)
    assert module.run(module.Head(), h, w, "cpu").dtype == torch.float32  # the eager fix
    expected = torch.matmul(h.double(), w.double())
    got = module.run(module.Head(), h, w, "cpu").double()
    assert torch.allclose(got, expected, rtol=1e-6, atol=1e-6)
    assert module.scripted(h, w).shape == (4, 4)  # the plain island raised here


def test_the_unguarded_island_does_not_script(tmp_path: Path) -> None:
    """Why the guard: the plain island, as written for code no one scripts, fails there."""
    path = fix(tmp_path, "eager_head.py", HEAD)
    fixed = path.read_text()
    assert "is_scripting" not in fixed
    assert "with torch.autocast(h.device.type, enabled=False):" in fixed
    module = load(path)
    h = torch.randn(4, 8)
    with pytest.raises(RuntimeError, match="device argument must be a constant"):
        torch.jit.script(module.Head())(h, h.T)
