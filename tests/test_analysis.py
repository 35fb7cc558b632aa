"""The analysis on its own: regions and dtypes, probed with `reveal(expr)` calls the way
mypy's reveal_type works. These check facts; the rule fixtures check findings."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from amp_lint.analysis.interpreter.frames import ExecutionContext
from amp_lint.analysis.interpreter.interpreter import run_interpreter
from amp_lint.analysis.syntax.module import ModuleFacts
from amp_lint.analysis.syntax.names import collect_names
from amp_lint.settings.config import Config


class _Reveal:
    """An observer recording, for each `reveal(x)` call, x's dtype (with " assumed" when it
    rests on an assumption) and the region it runs under."""

    node_types = (cst.Call,)

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def observe(self, node: cst.CSTNode, ctx: ExecutionContext) -> None:
        assert isinstance(node, cst.Call)
        if isinstance(node.func, cst.Name) and node.func.value == "reveal":
            ctx.accepts_assumptions = True
            region = ctx.region
            where = (
                "none"
                if region is None
                else (f"{region.device}/{region.dtype}/{'on' if region.is_active else 'off'}")
            )
            dtype = ctx.dtype(node.args[0].value)
            described = dtype.describe() + (" assumed" if dtype.assumed else "")
            self.seen.append((described, where))


def reveal(source: str, config: Config | None = None) -> list[tuple[str, str]]:
    module = cst.parse_module(textwrap.dedent(source))
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    facts = ModuleFacts("t.py", module, collect_names(module), config or Config(), positions)
    probe = _Reveal()
    run_interpreter(facts, [probe])
    return probe.seen


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ('import torch\nwith torch.autocast("cuda"):', ("float16", "cuda/float16/on")),
        ('import torch\nwith torch.autocast("cpu"):', ("bfloat16", "cpu/bfloat16/on")),
        (
            'import torch\nwith torch.amp.autocast(device_type="cuda", dtype=torch.bfloat16):',
            ("bfloat16", "cuda/bfloat16/on"),
        ),
        ("import torch\nwith torch.cuda.amp.autocast():", ("float16", "cuda/float16/on")),
        (
            "import torch\nfrom torch.cpu.amp import autocast\nwith autocast(dtype=torch.float16):",
            ("float16", "cpu/float16/on"),
        ),
        (
            "from torch import autocast as ac\nwith ac('cuda', enabled=flag):",
            ("float16", "cuda/float16/on"),
        ),
        (
            "import torch\nwith torch.autocast(dev.type, dtype=torch.float16):",
            ("float16", "None/float16/on"),
        ),
        ("import torch\nwith torch.autocast(dev.type):", ("float16 or bfloat16", "None/None/on")),
        (
            "from accelerate import Accelerator\nacc = Accelerator(mixed_precision='bf16')\n"
            "with acc.autocast():",
            ("bfloat16", "None/bfloat16/on"),
        ),
    ],
)
def test_region_spellings(header: str, expected: tuple[str, str]) -> None:
    source = header + "\n    reveal(x @ w)\n"
    assert reveal(source) == [expected]


def test_dtype_argument_of_deprecated_autocast_is_second_positional() -> None:
    # torch.cuda.amp.autocast(enabled, dtype): the bfloat16 above is the dtype, but `True`
    # comes first; amp.autocast(True, torch.bfloat16) therefore means bfloat16.
    seen = reveal(
        "import torch\nimport torch.cuda.amp as amp\n"
        "with amp.autocast(True, torch.bfloat16):\n    reveal(x @ w)\n"
    )
    assert seen == [("bfloat16", "cuda/bfloat16/on")]


def test_island_context_variable_decorator_and_after_region() -> None:
    seen = reveal(
        """
        import torch
        from contextlib import nullcontext
        ctx = torch.autocast("cuda") if amp else nullcontext()

        @torch.autocast("cpu", dtype=torch.float16)
        def decorated(x, w):
            reveal(x @ w)

        def f(x, w):
            with ctx:
                h = x @ w
                reveal(h)
                with torch.autocast("cuda", enabled=False):
                    reveal(h @ w)
                    reveal(h.float() @ w.float())
            reveal(h)
            reveal(h.float() + h)
        """
    )
    assert seen == [
        ("float16", "cpu/float16/on"),
        ("float16", "cuda/float16/on"),
        ("unknown", "cuda/float16/off"),  # w's dtype is not known
        ("float32", "cuda/float16/off"),
        ("float16", "none"),
        ("float32", "none"),
    ]


def test_per_device_op_tables() -> None:
    seen = reveal(
        """
        import torch
        import torch.nn.functional as F
        def f(x, w):
            with torch.autocast("cuda"):
                h = x @ w
                reveal(h.sum())
                reveal(h ** 2)
                reveal(F.softmax(h, -1))
                reveal(h * h)
                reveal(h.var())
            with torch.autocast("cpu", dtype=torch.float16):
                h = x @ w
                reveal(h.sum())
                reveal(h ** 2)
                reveal(F.softmax(h, -1))
        """
    )
    assert [dtype for dtype, _ in seen] == [
        "float32",
        "float32",
        "float32",
        "float16",
        "float16",
        "float16",
        "float16",
        "float16",
    ]


def test_conversions_factories_and_promotion() -> None:
    seen = reveal(
        """
        import torch
        def f(x, w, y):
            buf = torch.zeros(3, 4)
            reveal(buf)
            reveal(torch.full((2,), -1e9))
            reveal(torch.full((2,), 1))
            with torch.autocast("cuda"):
                h = x @ w
                reveal(h + buf)
                reveal(h.to(torch.float32))
                reveal(buf.to(h.dtype))
                reveal(h.to("cuda"))
                reveal(h.to(y))
                reveal(h * 2.0)
                reveal(h.half() + h.bfloat16())
                reveal(torch.zeros_like(h))
                reveal(h.new_zeros(3, dtype=torch.float32))
                q, k = h.chunk(2, -1)
                reveal(k)
                reveal(h > 0)
                reveal(h.argmax(-1))
                reveal(h.view(b, t, -1))
        """
    )
    assert [dtype for dtype, _ in seen] == [
        "float32",
        "float32",
        "integer",
        "float32",
        "float32",
        "float16",
        "float16",
        "unknown",
        "float16",
        "float32",
        "float16",
        "float32",
        "float16",
        "bool",
        "integer",
        "float16",
    ]


def test_calls_are_followed_with_argument_dtypes() -> None:
    seen = reveal(
        """
        import torch
        from torch import nn

        def helper(t):
            reveal(t)
            return t.float()

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.scale = 4 ** -0.5

            def forward(self, x):
                h = self.fc(x) * self.scale
                reveal(h)
                return h

        def train(x, w):
            block = Block()
            with torch.autocast("cuda"):
                out = helper(x @ w)
                reveal(out)
                reveal(block(x))
        """,
        Config(forward_under_autocast=False),
    )
    assert ("float16", "cuda/float16/on") in seen  # helper's parameter, via the call
    assert ("float32", "cuda/float16/on") in seen  # helper's return value
    assert seen.count(("float16", "cuda/float16/on")) >= 3  # Block.forward and its result
    # Root analyses of helper and Block.forward (no caller) know nothing.
    assert ("unknown", "none") in seen


def test_forward_assumed_when_file_uses_autocast() -> None:
    model = textwrap.dedent(
        """
        import torch
        from torch import nn
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
            def forward(self, x):
                reveal(self.fc(x))
        """
    )
    assert reveal(model) == [("unknown", "none")]
    with_scaler = model + "scaler = torch.amp.GradScaler('cuda')\n"
    assert ("float16", "cuda/float16/on") in reveal(with_scaler)
    assert reveal(with_scaler, Config(forward_under_autocast=False)) == [("unknown", "none")]
    # A file whose regions are all bfloat16 runs its forwards under bfloat16.
    bf16_only = model + "with torch.autocast('cuda', dtype=torch.bfloat16):\n    pass\n"
    assert ("bfloat16", "cuda/bfloat16/on") in reveal(bf16_only)


def test_configured_autocast_function() -> None:
    source = "def step(x, w):\n    reveal(x @ w)\n"
    assert reveal(source) == [("unknown", "none")]
    configured = reveal(source, Config(autocast_functions=("step",)))
    assert ("float16", "None/float16/on") in configured


def test_recursion_terminates() -> None:
    seen = reveal(
        """
        import torch
        def f(x):
            reveal(x)
            return f(x @ x)
        with torch.autocast("cuda"):
            f(a @ b)
        """
    )
    assert ("float16", "cuda/float16/on") in seen


def test_function_returning_an_autocast_context() -> None:
    seen = reveal(
        """
        import torch
        def amp_context(enabled=True):
            return torch.autocast("cuda", dtype=torch.float16, enabled=enabled)
        def f(x, w):
            with amp_context():
                reveal(x @ w)
        """
    )
    assert ("float16", "cuda/float16/on") in seen


def test_parameters_have_their_data_dtype() -> None:
    seen = reveal(
        """
        import torch
        from torch import nn
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.bias = nn.Parameter(torch.zeros(8))
            def forward(self, x, w):
                with torch.autocast("cuda"):
                    reveal(self.bias)
                    reveal(x @ w + self.bias)
        """,
        Config(forward_under_autocast=False),
    )
    # Both reveals are float32 (half + float32 promotes), in every context they run in.
    assert {s for s in seen if s[1] == "cuda/float16/on"} == {("float32", "cuda/float16/on")}


def test_moving_a_module_to_a_device_keeps_what_it_is() -> None:
    seen = reveal(
        """
        import torch
        from torch import nn
        class Net(nn.Module):
            def forward(self, x):
                return x @ x
        def run(x, device):
            layer = nn.Linear(4, 4).to(device)
            net = Net().cuda().eval()
            halved = nn.Linear(4, 4).to(torch.float16)
            with torch.autocast("cuda"):
                reveal(layer(x))
                reveal(net(x))
                reveal(halved(x))
        """
    )
    assert seen[:2] == [("float16", "cuda/float16/on"), ("float16", "cuda/float16/on")]
    # `.to(torch.float16)` changes the parameters: what the module returns is not known, only
    # assumed, as for any module amp-lint cannot see into.
    assert seen[2][0] == "float16 assumed"


def test_layers_of_a_list_grown_in_place_run_in_order() -> None:
    """`nn.Sequential(*layers)` over a list grown with `+=`, `append` and `extend`, in loops
    too (pix2pix/CycleGAN generators): the layers run in turn, so a float32 input under
    autocast comes out of the last convolution in half, and ends float32 when the last
    layer is a float32-policy one."""
    seen = reveal(
        """
        import torch
        from torch import nn
        class Generator(nn.Module):
            def __init__(self, blocks):
                super().__init__()
                model = [nn.Conv2d(3, 64, 7), nn.ReLU(inplace=True)]
                for _ in range(blocks):
                    model += [nn.Conv2d(64, 64, 3), nn.ReLU(inplace=True)]
                model += [nn.Conv2d(64, 3, 7), nn.Tanh()]
                self.model = nn.Sequential(*model)
            def forward(self, x):
                return self.model(x)
        class Head(nn.Module):
            def __init__(self, widths):
                super().__init__()
                layers = []
                for width in widths:
                    layers.append(nn.Linear(width, width))
                layers.extend([nn.GELU(), nn.LayerNorm(8)])
                self.head = nn.Sequential(*layers)
            def forward(self, x):
                return self.head(x)
        def run(x):
            with torch.autocast("cuda"):
                reveal(Generator(9)(x.float()))
                reveal(Head([8, 8])(x.float()))
        """
    )
    assert seen == [("float16", "cuda/float16/on"), ("float32", "cuda/float16/on")]


def test_a_list_grown_on_one_branch_only_holds_alike_elements() -> None:
    """Only a loop's own additions are kept in order; an `if` that appends on one path
    leaves a list whose length is unknown (its elements alike), as before."""
    seen = reveal(
        """
        import torch
        def run(x, flag):
            outs = [x.half()]
            if flag:
                outs.append(x.float())
            reveal(outs[-1])
            grown = []
            for _ in range(3):
                grown.append(x.half())
            reveal(grown[0])
            scores = torch.zeros(3)
            scores += x.half()
            reveal(scores)
        """
    )
    assert seen == [("unknown", "none"), ("float16", "none"), ("float32", "none")]


def test_an_except_handler_is_another_path_not_the_last_word() -> None:
    """kornia's `_autocast_disabled`: `enabled = False` in the `except` must not make the
    `if enabled:` return unreachable, or the helper is read as a plain nullcontext and the
    float32 product inside it as lowered by the caller's region."""
    seen = reveal(
        """
        import torch
        from contextlib import nullcontext
        def autocast_off(device_type):
            try:
                enabled = torch.is_autocast_enabled(device_type)
            except RuntimeError:
                enabled = False
            if enabled:
                return torch.autocast(device_type=device_type, enabled=False)
            return nullcontext()
        def run(x, w):
            with torch.autocast("cuda"):
                with autocast_off("cuda"):
                    reveal(x.float() @ w.float())
            try:
                y = x.half()
            except RuntimeError:
                y = x.float()
            reveal(y)
        """
    )
    assert seen == [("float32", "cuda/float16/off"), ("unknown", "none")]
