"""AMP006 beyond its fixtures, through the real command: the boundary with AMP005 (a project's
own SSIM listed in `fp32-only-callables`), the assumption a finding rests on, SSIM in
another file of the project, and the names the shape is followed through."""

from __future__ import annotations

import json
from pathlib import Path

import libcst as cst
from runners import amp_lint

from amp_lint.analysis.syntax.local_definitions import LocalDefinitions

METRICS = """\
import torch.nn.functional as F


def ssim_terms(img1, img2, window):
    mu1 = F.conv2d(img1, window, groups=3)
    mu2 = F.conv2d(img2, window, groups=3)
    sigma12 = F.conv2d(img1 * img2, window, groups=3) - mu1 * mu2
    return sigma12
"""

TRAIN = """\
import torch

from metrics import ssim_terms


def step(model, x, y, window):
    with torch.autocast("cuda"):
        return ssim_terms(model(x), y, window)
"""


def findings(project: Path, *args: str) -> list[dict[str, object]]:
    result = amp_lint(project, "check", "--no-cache", "--output-format", "json", *args, ".")
    assert result.returncode in (0, 1), result.stderr
    found: list[dict[str, object]] = json.loads(result.stdout)
    return found


def write(project: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (project / name).write_text(text, encoding="utf-8")
    return project


def test_formula_in_another_file_is_reported_there_with_the_chain(tmp_path: Path) -> None:
    project = write(tmp_path, {"metrics.py": METRICS, "train.py": TRAIN})
    (found,) = findings(project, "--select", "AMP005,AMP006")
    assert (found["code"], found["path"], found["line"]) == ("AMP006", "metrics.py", 7)
    assert "E[img1·img2] - E[img1]·E[img2]" in str(found["message"])
    assert "(via train.py:8)" in str(found["message"])


def test_a_configured_fp32_only_callable_is_left_to_amp005(tmp_path: Path) -> None:
    """AMP005 reports the call of the listed function; AMP006 does not report its formula."""
    config = '[tool.amp-lint]\nfp32-only-callables = ["metrics.ssim_terms"]\n'
    project = write(tmp_path, {"metrics.py": METRICS, "train.py": TRAIN, "pyproject.toml": config})
    codes = [(f["code"], f["path"]) for f in findings(project, "--select", "AMP005,AMP006")]
    assert codes == [("AMP005", "train.py")]


POOLS = """\
import torch
import torch.nn.functional as F


def stats(model, x, y):
    with torch.autocast("cpu", dtype=torch.float16):
        pred = model(x)
        mu_x = F.avg_pool2d(pred, 3, 1)
        mu_y = F.avg_pool2d(y, 3, 1)
        return F.avg_pool2d(pred * y, 3, 1) - mu_x * mu_y
"""


def test_pools_over_a_float32_image_are_not_half(tmp_path: Path) -> None:
    """avg_pool2d keeps its input's dtype: `y` is unknown, so E[x·y] and E[y] are not half."""
    assert findings(write(tmp_path, {"pools.py": POOLS}), "--select", "AMP006") == []


def test_pools_over_a_model_output_say_the_assumption(tmp_path: Path) -> None:
    text = POOLS.replace("mu_y = F.avg_pool2d(y, 3, 1)", "mu_y = F.avg_pool2d(pred, 3, 1)")
    text = text.replace("pred * y", "pred * pred")
    (found,) = findings(write(tmp_path, {"pools.py": text}), "--select", "AMP006")
    assert "assumes `model(x)` returns float16 under autocast" in str(found["message"])


def test_module_level_code_is_followed_through_its_names(tmp_path: Path) -> None:
    text = (
        "import torch\n"
        "import torch.nn.functional as F\n\n"
        "img = torch.rand(1, 3, 8, 8)\n"
        "window = torch.ones(3, 1, 3, 3) / 9\n"
        'with torch.autocast("cpu", dtype=torch.bfloat16):\n'
        "    mu = F.conv2d(img, window, groups=3)\n"
        "    mu_sq = mu.pow(2)\n"
        "    var = F.conv2d(img.square(), window, groups=3) - mu_sq\n"
    )
    (found,) = findings(write(tmp_path, {"script.py": text}), "--select", "AMP006")
    assert found["line"] == 9 and "bfloat16" in str(found["message"])


def test_local_definitions_follow_only_names_bound_once() -> None:
    module = cst.parse_module(
        "def f(x, window):\n"
        "    mu = conv(x)\n"
        "    a, b = mu * 2, mu * 3\n"
        "    c = d = x\n"
        "    y = 1\n"
        "    y += 1\n"
        "    for z in x:\n"
        "        pass\n"
        "    e: int = 4\n"
        "    p, q = pair()\n"
        "    x = x + 1\n"
    )
    function = module.body[0]
    assert isinstance(function, cst.FunctionDef)
    definitions = LocalDefinitions()

    def text(name: str) -> str | None:
        value = definitions.assigned(function, name)
        return None if value is None else cst.Module([]).code_for_node(value)

    assert text("mu") == "conv(x)"
    assert (text("a"), text("b")) == ("mu * 2", "mu * 3")
    assert (text("c"), text("d"), text("e")) == ("x", "x", "4")
    # Rebound, augmented, loop variables, unpacked from a call, parameters: not followed.
    assert [text(n) for n in ("y", "z", "p", "q", "x", "window")] == [None] * 6
