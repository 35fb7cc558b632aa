"""GradScaler order across calls and objects (AMP301, AMP302), a step or clip after
`scaler.step` (AMP302, AMP311) and a scaler without autocast (AMP310), through the real
`amp-lint` command; and AMP310's runtime facts, measured on the CPU."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from amp_lint.analysis.syntax.code_text import code_only, mentions_in_code
from tests.runners import amp_lint

TRAIN = """\
import torch
from torch import nn

from models import Net


def train(loader):
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
"""

PLAIN_MODEL = """\
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return self.fc(x)
"""

AUTOCAST_MODEL = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    @torch.autocast("cuda", dtype=torch.float16)
    def forward(self, x):
        return self.fc(x)
"""

WRAPPING_CALLER = """\
import torch

from train import train

with torch.autocast("cuda", dtype=torch.float16):
    train([])
"""


def _project(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def _codes(tmp_path: Path, select: str) -> list[str]:
    result = amp_lint(tmp_path, "check", "--select", select, "--no-cache", ".")
    return [line for line in result.stdout.splitlines() if f" {select} " in line]


def test_amp310_fires_when_no_linted_file_enters_autocast(tmp_path: Path) -> None:
    project = _project(tmp_path, {"train.py": TRAIN, "models.py": PLAIN_MODEL})
    assert [line.split(" ")[0] for line in _codes(project, "AMP310")] == ["train.py:14:9:"]


def test_amp310_is_silent_when_the_models_forward_enters_autocast(tmp_path: Path) -> None:
    project = _project(tmp_path, {"train.py": TRAIN, "models.py": AUTOCAST_MODEL})
    assert _codes(project, "AMP310") == []


def test_amp310_is_silent_when_a_caller_may_wrap_the_loop(tmp_path: Path) -> None:
    project = _project(
        tmp_path, {"train.py": TRAIN, "models.py": PLAIN_MODEL, "main.py": WRAPPING_CALLER}
    )
    assert _codes(project, "AMP310") == []


ENGINE = """\
import torch


class AmpEngine:
    def __init__(self):
        self.scaler = torch.amp.GradScaler("cuda")

    def backward_loss(self, loss):
        self.scaler.scale(loss).backward()

    def optimizer_step(self, optimizer):
        self.scaler.step(optimizer)
        self.scaler.update()


class Trainer:
    def __init__(self, model, optimizer):
        self.engine = AmpEngine()
        self.model = model
        self.optimizer = optimizer

    def _clip(self):
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)

    def fit(self, loader):
        for x, y in loader:
            with torch.autocast("cuda", dtype=torch.float16):
                loss = torch.nn.functional.mse_loss(self.model(x), y)
            self.engine.backward_loss(loss)
            self._clip()
            self.engine.optimizer_step(self.optimizer)
"""


def test_amp301_follows_the_scaler_into_another_objects_method(tmp_path: Path) -> None:
    project = _project(tmp_path, {"engine.py": ENGINE})
    result = amp_lint(
        project, "check", "--select", "AMP301", "--no-cache", "--output-format", "full", "."
    )
    first = result.stdout.splitlines()[0]
    assert first.startswith("engine.py:23:9: AMP301")
    assert "call `self.engine.scaler.unscale_(optimizer)`" in first
    assert first.endswith("(via engine.py:30)")


# Runtime facts (torch on the CPU)


def _mlp_training(scaled: bool, autocast: bool = False, steps: int = 20) -> list[object]:
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu", enabled=scaled)
    x, y = torch.randn(128, 64), torch.randn(128, 64)
    for _ in range(steps):
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16, enabled=autocast):
            loss = torch.nn.functional.mse_loss(model(x).float(), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    return [p.detach() for p in model.parameters()]


def test_a_scaler_without_autocast_trains_exactly_as_float32() -> None:
    torch = pytest.importorskip("torch")
    float32 = _mlp_training(scaled=False)
    scaled = _mlp_training(scaled=True)
    assert all(torch.equal(a, b) for a, b in zip(scaled, float32))
    # With autocast the float16 layers change the numbers: mixed precision is active.
    mixed = _mlp_training(scaled=True, autocast=True)
    assert not all(torch.equal(a, b) for a, b in zip(mixed, float32))


def test_benchmark_the_overhead_of_a_scaler_without_autocast() -> None:
    """A benchmark, not an assertion: the fastest of interleaved steps with and without an
    enabled scaler (AMP310's `why` quotes one run)."""
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        best = {False: float("inf"), True: float("inf")}
        x, y = torch.randn(128, 64), torch.randn(128, 64)
        runs = {}
        for scaled in best:
            torch.manual_seed(0)
            model = torch.nn.Sequential(
                torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64)
            )
            optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
            runs[scaled] = (model, optimizer, torch.amp.GradScaler("cpu", enabled=scaled))
        for _ in range(100):
            for scaled, (model, optimizer, scaler) in runs.items():
                start = time.perf_counter()
                optimizer.zero_grad()
                scaler.scale(torch.nn.functional.mse_loss(model(x), y)).backward()
                scaler.step(optimizer)
                scaler.update()
                best[scaled] = min(best[scaled], time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)
    print(
        f"step with scaler {best[True] * 1e3:.3f} ms, without {best[False] * 1e3:.3f} ms, "
        f"ratio {best[True] / best[False]:.2f}"
    )


COMMENTED_HELPER = """\
import torch


def forward_and_loss(model, x, y):
    # with torch.autocast("cuda", dtype=torch.float16):
    return torch.nn.functional.mse_loss(model(x), y)
"""

TRAIN_WITH_HELPER = """\
import torch

from helpers import forward_and_loss


def train(model, optimizer, loader):
    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        loss = forward_and_loss(model, x, y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
"""


def test_amp310_reads_other_files_code_not_their_comments(tmp_path: Path) -> None:
    project = _project(tmp_path, {"train.py": TRAIN_WITH_HELPER, "helpers.py": COMMENTED_HELPER})
    assert [line.split(" ")[0] for line in _codes(project, "AMP310")] == ["train.py:10:9:"]


def test_amp310_is_silent_when_the_helper_enters_autocast(tmp_path: Path) -> None:
    helper = COMMENTED_HELPER.replace("    # with", "    with").replace(
        "    return", "        return"
    )
    project = _project(tmp_path, {"train.py": TRAIN_WITH_HELPER, "helpers.py": helper})
    assert _codes(project, "AMP310") == []


def test_code_only_blanks_comments_and_docstrings_but_keeps_strings() -> None:
    source = b'"""autocast"""\nx = "autocast"  # autocast\n# autocast\ny = 1\n'
    assert code_only(source) == b'              \nx = "autocast"            \n          \ny = 1\n'
    assert not mentions_in_code(b"# with torch.autocast('cuda'):\nx = 1\n", (b"autocast",))
