"""Memory bounds: the modules a worker keeps parsed for calls into them are bounded by the
size of their source as well as their number, and the newest stays even when it alone is
over the bound (it is in use). A file too large to analyse is tested through the CLI in
test_cli.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from amp_lint.analysis.project.index import ProjectIndex
from amp_lint.run import engine, project_run, runner, warm_run
from amp_lint.run.engine import ProjectLoader
from amp_lint.settings.config import Config


def module(body_lines: int) -> str:
    return "import torch\n\n\ndef f(x):\n" + "    x = x + 1\n" * body_lines + "    return x\n"


def test_loaded_modules_are_bounded_by_source_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = []
    for name, lines in (("a", 200), ("b", 200), ("c", 600)):
        path = tmp_path / f"{name}.py"
        path.write_text(module(lines))
        paths.append(str(path))
    size = (tmp_path / "a.py").stat().st_size
    monkeypatch.setattr(ProjectLoader, "CAPACITY_BYTES", int(size * 2.5))
    loader = ProjectLoader(ProjectIndex.from_paths(paths), Config())
    a, b, c = paths
    assert loader.interpreter_for(a) is not None
    assert loader.interpreter_for(b) is not None
    assert list(loader.interpreters) == [a, b]  # both fit
    assert loader.interpreter_for(c) is not None  # over the bound alone: kept, the rest go
    assert list(loader.interpreters) == [c]
    assert loader.sizes == {c: (tmp_path / "c.py").stat().st_size}
    # Used again, a module evicted is parsed again, not lost.
    first = loader.interpreter_for(a)
    assert first is not None and list(loader.interpreters) == [a]


def test_loaded_modules_are_bounded_by_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = []
    for index in range(4):
        path = tmp_path / f"m{index}.py"
        path.write_text(module(3))
        paths.append(str(path))
    monkeypatch.setattr(ProjectLoader, "CAPACITY", 2)
    loader = ProjectLoader(ProjectIndex.from_paths(paths), Config())
    for path in paths:
        loader.interpreter_for(path)
    assert list(loader.interpreters) == paths[2:]
    assert set(loader.sizes) == set(paths[2:])


HALF_OPS = """\
import torch


def to_half(x):
    return x.half()
"""

OTHER = """\
def same(x):
    return x
"""

TRAIN = """\
import torch

import half_ops
import other


def first(x, mask):
    with torch.autocast("cuda"):
        y = half_ops.to_half(x)
        other.same(x)
        return y.masked_fill(mask, -1e9)


def second(x, mask):
    with torch.autocast("cuda"):
        other.same(x)
        y = half_ops.to_half(x)
        return y.masked_fill(mask, -1e9)
"""


def test_results_of_calls_outlive_the_evicted_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With one module kept parsed, `other` evicts `half_ops` between the two calls of
    # `to_half(x)`: the second call's result is remembered, so half_ops.py is parsed once
    # for those calls (and twice for its own analyses: its round, and the round that runs
    # the calls train.py made into it), and both findings stay.
    for name, text in (("half_ops", HALF_OPS), ("other", OTHER), ("train", TRAIN)):
        (tmp_path / f"{name}.py").write_text(text)
    monkeypatch.setattr(runner, "_usable_cpus", lambda: 1)  # in this process, to count
    monkeypatch.setattr(ProjectLoader, "CAPACITY", 1)
    parsed: list[str] = []
    parse = engine.parse_source

    def counting_parse(source: bytes, path: str) -> Any:
        parsed.append(Path(path).name)
        return parse(source, path)

    monkeypatch.setattr(engine, "parse_source", counting_parse)
    options = project_run.RunOptions(cache_directory=None, first_pass=False)
    result = warm_run.lint_paths([str(tmp_path)], Config(), options, lambda _: None)
    found = sorted(
        (Path(f.path).name, f.line, f.code) for o in result.outcomes for f in o.remaining
    )
    assert found == [("train.py", 11, "AMP101"), ("train.py", 18, "AMP101")]
    assert parsed.count("half_ops.py") == 3
