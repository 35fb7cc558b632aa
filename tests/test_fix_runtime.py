"""Each kind of fix, run: the fixed code computes what the original did wherever the original
was right, in float32 and in float64, and fixes what it got wrong under autocast.

A module with one function per fix kind is fixed by the real command (`--fix
--unsafe-fixes`), then both versions run on CPU torch. Under `torch.autocast("cuda")`, which
does nothing without CUDA, the fixed function must give the original's result exactly; under
CPU autocast, a result at least as close to float64's. With float64 inputs (library code that
accepts them), a fix must keep float64: `.float()` only on values known to be half, else
`x.to(torch.promote_types(x.dtype, torch.float32))` (AMP003, AMP004, AMP102, AMP201 and
AMP202 cast float64 down before). The setup_context-style autograd Functions show why AMP203
offers no fix for them, and why a Function that restores autocast itself has no finding."""

from __future__ import annotations

import importlib.util
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from runners import amp_lint

torch = pytest.importorskip("torch")

# A Function saving half inputs whose backward multiplies them with float32 gradients.
SCALE = """\
class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad @ w.t(), x.t() @ grad
"""
KINDS = (
    """\
import torch
import torch.nn.functional as F


def reduction_known_half(x, w):
    h = (x @ w).half()
    return h.sum()


def inverse_root(x, w):
    with torch.autocast("cpu", dtype=torch.float16):
        v = (x @ w).abs()
        return torch.rsqrt(v + 1e-12)


def no_half_kernel(x, w):
    with torch.autocast("cuda"):
        h = x @ w
        return torch.linalg.inv(h)


def no_half_kernel_fft(x, w):
    with torch.autocast("cuda"):
        h = x @ w
        return torch.fft.rfft(h)


def refused_op(x, w):
    with torch.autocast("cuda"):
        h = x @ w
        probs = torch.sigmoid(h)
        target = torch.ones_like(probs) / 2
        return F.binary_cross_entropy(probs, target)


def normalized(x, w):
    with torch.autocast("cpu", dtype=torch.float16):
        h = x @ w
        return F.normalize(h, dim=-1, eps=1e-12)


"""
    + SCALE
    + """

def custom_function(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h = x @ w
        return Scale.apply(h, w)
"""
)

# What each function's fix writes.
EXPECTED_FIXES = {
    "reduction_known_half": "h.float().sum()",  # known half: `.float()`
    "inverse_root": "torch.rsqrt(v.to(torch.promote_types(v.dtype, torch.float32)) + 1e-12)",
    "no_half_kernel": "torch.linalg.inv(h.to(torch.promote_types(h.dtype, torch.float32)))",
    "no_half_kernel_fft": "torch.fft.rfft(h.to(torch.promote_types(h.dtype, torch.float32)))",
    "refused_op": 'with torch.autocast("cuda", enabled=False):',
    "normalized": "F.normalize(h.to(torch.promote_types(h.dtype, torch.float32)), dim=-1",
    "custom_function": '@torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32)',
}
# Functions whose region does nothing on this machine (CUDA autocast without CUDA): the fix
# must not change their result at all.
UNDER_CUDA_AUTOCAST = ("no_half_kernel", "no_half_kernel_fft", "refused_op")


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"runtime_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def versions(tmp_path_factory: pytest.TempPathFactory) -> tuple[ModuleType, ModuleType, str]:
    folder = tmp_path_factory.mktemp("fix_runtime")
    (folder / "original.py").write_text(KINDS)
    (folder / "fixed.py").write_text(KINDS)
    result = amp_lint(folder, "check", "--no-cache", "--fix", "--unsafe-fixes", "fixed.py")
    assert result.returncode == 0, result.stdout + result.stderr
    fixed_source = (folder / "fixed.py").read_text()
    again = amp_lint(folder, "check", "--no-cache", "--fix", "--unsafe-fixes", "fixed.py")
    assert (folder / "fixed.py").read_text() == fixed_source  # a second fix changes nothing
    assert again.returncode == 0
    return load(folder / "original.py"), load(folder / "fixed.py"), fixed_source


def inputs(dtype: Any) -> tuple[Any, Any]:
    generator = torch.Generator().manual_seed(0)
    x = torch.eye(4, dtype=dtype) * 2 + torch.rand(4, 4, generator=generator, dtype=dtype) / 10
    w = torch.eye(4, dtype=dtype) + torch.rand(4, 4, generator=generator, dtype=dtype) / 10
    return x, w


def call(module: ModuleType, name: str, dtype: Any) -> Any:
    function: Callable[..., Any] = getattr(module, name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "CUDA is not available, disabling autocast"
        return function(*inputs(dtype))


@pytest.mark.parametrize("name", sorted(EXPECTED_FIXES))
def test_each_kind_is_fixed(versions: tuple[ModuleType, ModuleType, str], name: str) -> None:
    _, _, fixed_source = versions
    assert EXPECTED_FIXES[name] in fixed_source


@pytest.mark.parametrize("name", sorted(EXPECTED_FIXES))
def test_float64_stays_float64(versions: tuple[ModuleType, ModuleType, str], name: str) -> None:
    original, fixed, _ = versions
    if name == "reduction_known_half":
        pytest.skip("the function itself makes the value half")
    before, after = call(original, name, torch.float64), call(fixed, name, torch.float64)
    assert after.dtype == before.dtype
    assert after.dtype in (torch.float64, torch.complex128)
    assert torch.equal(after, before)


@pytest.mark.parametrize("name", UNDER_CUDA_AUTOCAST)
def test_without_half_the_fix_changes_nothing(
    versions: tuple[ModuleType, ModuleType, str], name: str
) -> None:
    original, fixed, _ = versions
    before, after = call(original, name, torch.float32), call(fixed, name, torch.float32)
    assert after.dtype == before.dtype
    assert torch.equal(after, before)


@pytest.mark.parametrize("name", ["reduction_known_half", "inverse_root", "normalized"])
def test_under_cpu_autocast_the_fix_is_closer_to_float64(
    versions: tuple[ModuleType, ModuleType, str], name: str
) -> None:
    original, fixed, _ = versions
    reference = call(original, name, torch.float64)
    before, after = call(original, name, torch.float32), call(fixed, name, torch.float32)
    assert before.dtype == torch.float16 and after.dtype == torch.float32
    error_before = (before.double() - reference).abs().max().item()
    error_after = (after.double() - reference).abs().max().item()
    assert error_after <= error_before


def test_the_custom_function_fix_makes_backward_run(
    versions: tuple[ModuleType, ModuleType, str],
) -> None:
    original, fixed, _ = versions
    for module, fails in ((original, True), (fixed, False)):
        x, w = inputs(torch.float32)
        w.requires_grad_(True)
        y = module.custom_function(x, w)
        if fails:
            with pytest.raises(RuntimeError, match="same dtype"):
                y.sum().backward()
        else:
            y.sum().backward()
            assert w.grad is not None and w.grad.dtype == torch.float32


SETUP_CONTEXT = """\
import torch


class Matmul(torch.autograd.Function):
    @staticmethod
    def forward(x, w):
        return x @ w

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad @ w.t(), x.t() @ grad


class Decorated(Matmul):
    # What AMP203's fix used to write on a setup_context-style Function.
    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32)
    def forward(x, w):
        return x @ w

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad @ w.t(), x.t() @ grad


class Restoring(torch.autograd.Function):
    # DeepSpeed's ZeRO-3 linear: backward runs in the autocast state setup_context saved.
    @staticmethod
    def forward(x, w):
        return x @ w

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx._dtype = torch.get_autocast_dtype("cpu")
        ctx._fwd_used_autocast = torch.is_autocast_enabled("cpu")
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, grad):
        with torch.autocast("cpu", enabled=ctx._fwd_used_autocast, dtype=ctx._dtype):
            x, w = ctx.saved_tensors
            return grad @ w.t(), x.t() @ grad


def run_matmul(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h = x @ w
        return Matmul.apply(h, w)


def run_decorated(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h = x @ w
        return Decorated.apply(h, w)


def run_restoring(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h = x @ w
        return Restoring.apply(h, w)
"""


@pytest.fixture(scope="module")
def setup_context(tmp_path_factory: pytest.TempPathFactory) -> tuple[ModuleType, str, str]:
    folder = tmp_path_factory.mktemp("setup_context")
    path = folder / "functions.py"
    path.write_text(SETUP_CONTEXT)
    report = amp_lint(folder, "check", "--no-cache", "--select", "AMP203", "functions.py")
    amp_lint(folder, "check", "--no-cache", "--fix", "--unsafe-fixes", "functions.py")
    return load(path), report.stdout, path.read_text()


def test_a_setup_context_function_is_reported_without_a_fix(
    setup_context: tuple[ModuleType, str, str],
) -> None:
    module, report, after_fix = setup_context
    assert after_fix == SETUP_CONTEXT  # no fix: the decorators would be wrong here
    lines = [line for line in report.splitlines() if "AMP203" in line]
    # Matmul, and Decorated, whose decorators break it; not Restoring.
    assert len(lines) == 2, report
    assert "save inputs in float32" in lines[0] and "raises AttributeError" in lines[1]
    x, w = inputs(torch.float32)
    w.requires_grad_(True)
    with pytest.raises(RuntimeError, match="same dtype"):  # the finding is right
        module.run_matmul(x, w).sum().backward()


def test_the_decorators_break_a_setup_context_function(
    setup_context: tuple[ModuleType, str, str],
) -> None:
    module, _, _ = setup_context
    x, w = inputs(torch.float32)
    w.requires_grad_(True)
    y = module.run_decorated(x, w)
    with pytest.raises(AttributeError, match="_fwd_used_autocast"):
        y.sum().backward()


def test_a_function_that_restores_autocast_runs_in_half_and_backward_works(
    setup_context: tuple[ModuleType, str, str],
) -> None:
    module, report, _ = setup_context
    assert "Restoring" not in report
    x, w = inputs(torch.float32)
    w.requires_grad_(True)
    y = module.run_restoring(x, w)
    assert y.dtype == torch.bfloat16  # custom_fwd(cast_inputs=float32) would make it float32
    y.sum().backward()
    assert w.grad is not None


CTX_FUNCTION = (
    """\
import torch


"""
    + SCALE
    + """

def run(x, w):
    with torch.autocast("{device}", dtype=torch.bfloat16):
        h = x @ w
        return Scale.apply(h, w)
"""
)


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_the_custom_function_fix_keeps_to_the_declared_torch_floor(
    tmp_path: Path, device: str
) -> None:
    """`torch.amp.custom_fwd` is torch 2.4's: a project declaring torch>=2.2 gets the CUDA
    decorators of `torch.cuda.amp`, and no fix for CPU autocast (there is none before 2.4)."""
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "p"\nversion = "0"\ndependencies = ["torch>=2.2"]\n'
    )
    path = tmp_path / "functions.py"
    source = CTX_FUNCTION.format(device=device)
    path.write_text(source)
    amp_lint(tmp_path, "check", "--no-cache", "--fix", "--unsafe-fixes", "functions.py")
    fixed = path.read_text()
    assert "torch.amp.custom_fwd" not in fixed
    if device == "cpu":
        assert fixed == source
    else:
        assert "@torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)" in fixed
        assert "@torch.cuda.amp.custom_bwd" in fixed


GUARDED = """\
import torch
from torch import nn


class Descriptor(nn.Module):
    def __init__(self, eps: float = 1e-10) -> None:
        super().__init__()
        self.layer = nn.Conv2d(1, 8, 3)
        self.desc_norm = nn.LocalResponseNorm(16, 16.0, 0.5, 0.0)
        self.eps_l2_norm = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer(x)
        if x.dtype in (torch.float16, torch.bfloat16):
            x = self.desc_norm(x.float() + self.eps_l2_norm).to(x.dtype)
        else:
            x = self.desc_norm(x + self.eps_l2_norm)
        return x.flatten(1)
"""


UNGUARDED = GUARDED.replace(
    """        if x.dtype in (torch.float16, torch.bfloat16):
            x = self.desc_norm(x.float() + self.eps_l2_norm).to(x.dtype)
        else:
            x = self.desc_norm(x + self.eps_l2_norm)
""",
    """        x = self.desc_norm(x + self.eps_l2_norm)
""",
)


def test_library_mode_fixes_keep_float64(tmp_path: Path) -> None:
    """In library mode half rests on an assumption ("this runs under autocast"), so a fix
    there keeps float64: `.float()` cast float64 down in kornia's descriptors."""
    path = tmp_path / "unguarded.py"
    path.write_text(UNGUARDED)
    amp_lint(
        tmp_path, "check", "--no-cache", "--fix", "--unsafe-fixes",
        "--assume-autocast", "float16", "unguarded.py",
    )  # fmt: skip
    fixed_source = path.read_text()
    assert "x.to(torch.promote_types(x.dtype, torch.float32)) + self.eps_l2_norm" in fixed_source
    (tmp_path / "original.py").write_text(UNGUARDED)
    original, fixed = load(tmp_path / "original.py"), load(path)
    torch.manual_seed(0)
    before = original.Descriptor().double()
    after = fixed.Descriptor().double()
    after.load_state_dict(before.state_dict())
    x = torch.rand(2, 1, 8, 8, dtype=torch.float64)
    assert after(x).dtype == torch.float64
    assert torch.equal(after(x), before(x))


def test_the_branch_a_dtype_guard_keeps_from_half_has_no_finding(tmp_path: Path) -> None:
    """kornia's guard sends half inputs through `x.float()`; its `else` branch sees float32
    and float64 only, so nothing there is reported (issue 41), in library mode too."""
    (tmp_path / "guarded.py").write_text(GUARDED)
    result = amp_lint(tmp_path, "check", "--no-cache", "--assume-autocast", "float16", "guarded.py")
    assert result.returncode == 0, result.stdout


SHARED = """\
import torch


def _to_luv(x, y, z, eps: float = 1e-12):
    return (4 * x) / (x + 15 * y + 3 * z + eps)


def rgb_to_luv(image: torch.Tensor) -> torch.Tensor:
    x, y, z = image.unbind(-3)
    return _to_luv(x, y, z)


def rgb_to_luv_half(image: torch.Tensor) -> torch.Tensor:
    x, y, z = image.half().unbind(-3)
    return _to_luv(x, y, z)
"""


def test_a_fix_in_a_function_every_caller_shares_keeps_float64(tmp_path: Path) -> None:
    """The half is one caller's (`rgb_to_luv_half`); the fixed `_to_luv` also serves
    `rgb_to_luv`, which passes float64 (kornia's colour conversions): no `.float()`."""
    path = tmp_path / "luv.py"
    path.write_text(SHARED)
    amp_lint(tmp_path, "check", "--no-cache", "--fix", "--unsafe-fixes", "luv.py")
    fixed_source = path.read_text()
    assert fixed_source != SHARED and ".float()" not in fixed_source
    (tmp_path / "original.py").write_text(SHARED)
    original, fixed = load(tmp_path / "original.py"), load(path)
    image = torch.rand(3, 4, 4, dtype=torch.float64)
    assert fixed.rgb_to_luv(image).dtype == torch.float64
    assert torch.equal(fixed.rgb_to_luv(image), original.rgb_to_luv(image))
    assert torch.isfinite(fixed.rgb_to_luv_half(torch.zeros(3, 2, 2))).all()


REVERSIBLE = """\
import torch
from torch import nn


class Reversible(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, layers, all_states, handles):
        for layer in layers:
            hidden = layer(hidden)
        all_states.append(hidden)
        ctx.save_for_backward(hidden, layers[0].weight)
        ctx.handles = handles
        return hidden

    @staticmethod
    def backward(ctx, grad):
        hidden, weight = ctx.saved_tensors
        ctx.handles[0] = "handle"
        return grad @ weight.t() @ weight, None, None, None


def run(x, layers, all_states, handles):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h = layers[0](x)
        return Reversible.apply(h, layers, all_states, handles)
"""


def test_a_function_taking_lists_gets_custom_fwd_without_cast_inputs(tmp_path: Path) -> None:
    """cast_inputs rebuilds lists and dicts (the caller's stay empty: reformer, DeepSpeed's
    Domino). A forward that runs the caller's layers needs only the autocast state recorded:
    `custom_fwd` without cast_inputs passes the arguments through, and custom_bwd runs
    backward in forward's state, so its matmul of a bfloat16 gradient and a float32 weight
    works."""
    path = tmp_path / "reversible.py"
    path.write_text(REVERSIBLE)
    original = load(path)
    amp_lint(tmp_path, "check", "--no-cache", "--fix", "--unsafe-fixes", "reversible.py")
    fixed_text = path.read_text()
    assert '@torch.amp.custom_fwd(device_type="cpu")\n' in fixed_text
    assert "cast_inputs" not in fixed_text
    (tmp_path / "reversible_fixed.py").write_text(fixed_text)
    fixed = load(tmp_path / "reversible_fixed.py")
    torch.manual_seed(0)
    layers = torch.nn.ModuleList([torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)])
    x = torch.randn(3, 4, requires_grad=True)
    with pytest.raises(RuntimeError, match="dtype"):
        original.run(x, layers, [], {}).float().sum().backward()
    states: list[Any] = []
    handles: dict[int, str] = {}
    out = fixed.run(x, layers, states, handles)
    (out.float() * torch.randn(3, 4)).sum().backward()
    assert out.dtype == torch.bfloat16  # forward still runs under autocast
    assert len(states) == 1 and handles == {0: "handle"}  # the caller's objects, not copies
    assert x.grad is not None and x.grad.dtype == torch.float32


def test_the_torch_floor_of_a_package_linted_from_its_parent(tmp_path: Path) -> None:
    """`amp-lint project/pkg/ops.py` run from above the project reads the project's
    requirements/ as `cd project && amp-lint pkg/ops.py` does (DeepSpeed, fix reading)."""
    project = tmp_path / "project"
    (project / "requirements").mkdir(parents=True)
    (project / "requirements" / "requirements.txt").write_text("numpy\ntorch>=2.0.0\n")
    (project / "pkg").mkdir()
    path = project / "pkg" / "functions.py"
    path.write_text(CTX_FUNCTION.format(device="cuda"))
    settings = amp_lint(tmp_path, "check", "--show-settings", "project/pkg/functions.py")
    assert 'torch-version = "2.0.0"' in settings.stdout
    assert "requirements" in settings.stdout
    amp_lint(tmp_path, "check", "--no-cache", "--fix", "--unsafe-fixes", "project/pkg")
    fixed = path.read_text()
    assert "@torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)" in fixed
    assert "torch.amp.custom_fwd" not in fixed


def test_no_stacked_custom_fwd_without_cast_inputs(tmp_path: Path) -> None:
    """Under a region of unknown device the fix would stack a cuda and a cpu `custom_fwd`;
    without cast_inputs the inner one overwrites the outer's record of the autocast state
    (on CUDA backward then runs without autocast, third fix reading): no fix is offered."""
    source = REVERSIBLE.replace(
        'with torch.autocast("cpu", dtype=torch.bfloat16):', "with torch.autocast(device.type):"
    ).replace("handles):\n    with", "handles, device):\n    with")
    assert "device.type" in source
    path = tmp_path / "reversible.py"
    path.write_text(source)
    result = amp_lint(tmp_path, "check", "--no-cache", "--fix", "--unsafe-fixes", "reversible.py")
    assert "AMP203" in result.stdout
    assert path.read_text() == source
