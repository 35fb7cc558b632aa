"""AMP203 on Functions defined in another linted file, through the real command: every way a
package exports its ops (`Cls.apply`, `ops.Cls.apply`, `fn = Cls.apply` imported, re-exported
through `__init__.py`), the definition's `path:line` in the finding, no fix at the call, and
the same checks as for a Function of the module (a Function whose forward upcasts, or whose
backward is elementwise, stays clean)."""

from __future__ import annotations

import json
from pathlib import Path

from runners import amp_lint

FUNCTIONS = """\
import torch


class ScaledMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad @ w.t(), x.t() @ grad


class Upcasting(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        x = x.float()
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad @ w.t(), x.t() @ grad


class Reverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return -grad


scaled_matmul = ScaledMatmul.apply
upcasting = Upcasting.apply
reverse = Reverse.apply
"""

INIT = "from .functions import ScaledMatmul, scaled_matmul, upcasting, reverse\n"

TRAIN = """\
import torch

from ops import ScaledMatmul, reverse, scaled_matmul, upcasting
from ops import functions


def step(encoder, x, w):
    with torch.autocast("cuda"):
        h = encoder(x)
        a = ScaledMatmul.apply(h, w)
        b = scaled_matmul(h, w)
        c = functions.ScaledMatmul.apply(h, w)
        d = functions.scaled_matmul(h, w)
        e = upcasting(h, w)
        f = reverse(h)
    return a, b, c, d, e, f


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fn = functions.ScaledMatmul.apply

    def forward(self, h, w):
        with torch.autocast("cuda"):
            return self.fn(h, w)
"""


def project(tmp_path: Path) -> Path:
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "__init__.py").write_text(INIT, encoding="utf-8")
    (tmp_path / "ops" / "functions.py").write_text(FUNCTIONS, encoding="utf-8")
    (tmp_path / "train.py").write_text(TRAIN, encoding="utf-8")
    return tmp_path


def findings(root: Path, *args: str) -> list[dict[str, object]]:
    result = amp_lint(root, "check", "--no-cache", "--select", "AMP203", *args, ".")
    assert result.returncode in (0, 1), result.stderr
    found: list[dict[str, object]] = json.loads(result.stdout) if "json" in args else []
    return found


def test_every_export_of_a_function_is_followed(tmp_path: Path) -> None:
    found = findings(project(tmp_path), "--output-format", "json")
    assert [(f["path"], f["line"]) for f in found] == [
        ("train.py", 10),
        ("train.py", 11),
        ("train.py", 12),
        ("train.py", 13),
        ("train.py", 26),
    ]
    for finding in found:
        assert "`ScaledMatmul.forward` (defined at ops/functions.py:4)" in str(finding["message"])
        assert finding["fix"] is None  # fixed where it is defined


def test_the_summary_names_where_to_add_the_decorator(tmp_path: Path) -> None:
    result = amp_lint(project(tmp_path), "check", "--no-cache", "--select", "AMP203", ".")
    first = result.stdout.splitlines()[0]
    assert first == (
        "train.py:10:13: AMP203 `ScaledMatmul` (functions.py:4) lacks `custom_fwd`: backward "
        "can mix dtypes; add `custom_fwd`/`custom_bwd` there"
    )


def test_a_function_of_the_module_names_its_line(tmp_path: Path) -> None:
    text = FUNCTIONS + (
        "\n\ndef step(encoder, x, w):\n"
        '    with torch.autocast("cuda"):\n'
        "        return ScaledMatmul.apply(encoder(x), w)\n"
    )
    (tmp_path / "local.py").write_text(text, encoding="utf-8")
    (found,) = findings(tmp_path, "--output-format", "json")
    assert "(defined at local.py:4)" in str(found["message"])
    assert found["fix"] is not None


def test_an_unlinted_package_is_out_of_reach(tmp_path: Path) -> None:
    """Linting train.py alone: `ops` is not part of the run, so nothing is known about it."""
    root = project(tmp_path)
    result = amp_lint(root, "check", "--no-cache", "--select", "AMP203", "train.py")
    assert result.returncode == 0, result.stdout


SAMPLING = """\
import point_ops_ext
import torch


class BallQuery(torch.autograd.Function):
    @staticmethod
    def forward(ctx, xyz, radius):
        idx = point_ops_ext.ball_query_forward(xyz, radius)
        ctx.mark_non_differentiable(idx)
        return idx

    @staticmethod
    def backward(ctx, a=None):
        return None, None


ball_query = BallQuery.apply
"""

SAMPLER = """\
import torch

from sampling import ball_query


class Grouper(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(3, 3)

    def forward(self, xyz):
        with torch.autocast("cuda"):
            idx = ball_query(xyz, 0.2)
            return ball_query(self.proj(xyz), 0.2), idx
"""


def test_an_index_function_needs_a_half_input(tmp_path: Path) -> None:
    """A Function computing indices (non-differentiable outputs, no gradient back) is
    reported only with a half input: coordinates from the caller (mmcv's `ball_query` in
    `QueryAndGroup`) are not, a Linear's output is."""
    (tmp_path / "sampling.py").write_text(SAMPLING, encoding="utf-8")
    (tmp_path / "sampler.py").write_text(SAMPLER, encoding="utf-8")
    found = findings(tmp_path, "--output-format", "json")
    assert [(f["path"], f["line"]) for f in found] == [("sampler.py", 14)]


def test_a_local_name_chosen_between_the_function_and_another_callable(tmp_path: Path) -> None:
    """RevViT's `executing_fn = RevBackProp.apply` when training, a plain method otherwise,
    called after the choice: it may call the Function (reported). An attribute bound to the
    Function in one branch of `__init__` and to a loss module in another (espnet's CTC) is
    called in branches that match the binding: no alias, no report."""
    text = FUNCTIONS + (
        "\n\nclass Net(torch.nn.Module):\n"
        "    def __init__(self, kind):\n"
        "        super().__init__()\n"
        '        if kind == "custom":\n'
        "            self.loss = ScaledMatmul.apply\n"
        "        else:\n"
        "            self.loss = torch.nn.CTCLoss()\n"
        "\n"
        "    def plain(self, x, w):\n"
        "        return x @ w\n"
        "\n"
        "    def forward(self, encoder, x, w):\n"
        '        with torch.autocast("cuda"):\n'
        "            h = encoder(x)\n"
        "            if self.training:\n"
        "                run = ScaledMatmul.apply\n"
        "            else:\n"
        "                run = self.plain\n"
        "            out = run(h, w)\n"
        "            return self.loss(out, w)\n"
    )
    (tmp_path / "local.py").write_text(text, encoding="utf-8")
    found = findings(tmp_path, "--output-format", "json")
    call_line = text.splitlines().index("            out = run(h, w)") + 1
    assert [(f["code"], f["line"]) for f in found] == [("AMP203", call_line)]


KERNELS = """\
import triton
import triton.language as tl


@triton.jit
def _scan_kernel(x_ptr, dt_ptr, out_ptr):
    pass


def scan_fwd(x, dt):
    out = x.new_empty(x.shape)
    _scan_kernel[(x.shape[0],)](x, dt, out)
    return out
"""

EXTENSION = """\
import scan_cuda


def scan_fwd(x, dt):
    return scan_cuda.forward(x, dt)
"""

SCAN = """\
import torch

from {module} import scan_fwd


class Scan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dt):
        ctx.save_for_backward(x, dt)
        return scan_fwd(x, dt)

    @staticmethod
    def backward(ctx, grad):
        x, dt = ctx.saved_tensors
        return grad @ dt, x.t() @ grad


def run(x, w, dt):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        return Scan.apply(x @ w, dt.float())
"""


def test_a_forward_calling_triton_kernels_of_another_file_is_not_reported(
    tmp_path: Path,
) -> None:
    """mamba's Functions call the launchers of other modules (`mamba3_siso_fwd`): Triton
    kernels load each input in its own dtype, so mixed inputs are their contract (the fixed
    mamba3 applies bfloat16 Q/K/V with float32 dt), and cast_inputs would break it. A forward
    calling an extension module's function of another file is still reported."""
    (tmp_path / "kernels.py").write_text(KERNELS, encoding="utf-8")
    (tmp_path / "extension.py").write_text(EXTENSION, encoding="utf-8")
    (tmp_path / "triton_scan.py").write_text(SCAN.format(module="kernels"), encoding="utf-8")
    (tmp_path / "cuda_scan.py").write_text(SCAN.format(module="extension"), encoding="utf-8")
    found = findings(tmp_path, "--output-format", "json")
    assert [f["path"] for f in found] == ["cuda_scan.py"]
