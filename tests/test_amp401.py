"""AMP401 deprecated-amp-api: every spelling, the argument mapping of the fix, the imports it
adds and removes, and (under the installed torch) that the fixed code builds the same objects
without the FutureWarning."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any

import pytest
from runners import amp_lint

from amp_lint.findings import Finding, FixSafety
from amp_lint.run.engine import fix_source, lint_source
from amp_lint.settings.config import Config

CONFIG = Config(select=("AMP401",))


def lint(source: str) -> list[Finding]:
    return lint_source(textwrap.dedent(source).encode(), "example.py", CONFIG)


def fix(source: str) -> str:
    """The fixed source; also checks that it compiles and that fixing it again is a no-op."""
    result = fix_source(textwrap.dedent(source).encode(), "example.py", CONFIG, unsafe=False)
    fixed = result.source.decode()
    compile(fixed, "example.py", "exec")
    again = fix_source(result.source, "example.py", CONFIG, unsafe=True)
    assert again.source == result.source, "fixing the fixed code changed it again"
    assert all(finding.fix is None for finding in again.remaining)
    return fixed


def dedent(source: str) -> str:
    return textwrap.dedent(source)


# What is flagged


@pytest.mark.parametrize(
    "source",
    [
        "import torch\nwith torch.cuda.amp.autocast():\n    pass\n",
        "import torch\ns = torch.cuda.amp.GradScaler()\n",
        "import torch\nwith torch.cpu.amp.autocast():\n    pass\n",
        "import torch\ns = torch.cpu.amp.GradScaler()\n",
        "import torch.cuda.amp as amp\nwith amp.autocast():\n    pass\n",
        "from torch.cuda import amp\ns = amp.GradScaler()\n",
        "from torch import cuda\ns = cuda.amp.GradScaler()\n",
        "import torch as th\nwith th.cuda.amp.autocast():\n    pass\n",
        "import torch.cuda.amp\nwith torch.cuda.amp.autocast():\n    pass\n",
        "from torch.cuda.amp import autocast\nwith autocast():\n    pass\n",
        "from torch.cuda.amp import GradScaler as Scaler\ns = Scaler()\n",
        "from torch.cuda.amp.autocast_mode import autocast\nwith autocast():\n    pass\n",
        "from torch.cuda.amp.grad_scaler import GradScaler\ns = GradScaler()\n",
        "import torch\n@torch.cuda.amp.custom_fwd\ndef f(ctx, x):\n    pass\n",
        "import torch\n@torch.cuda.amp.custom_bwd\ndef f(ctx, g):\n    pass\n",
        "from torch.cuda.amp import custom_fwd\n@custom_fwd(cast_inputs=None)\ndef f():\n    ...\n",
        "import torch\n@torch.cuda.amp.autocast()\ndef f(x):\n    pass\n",
    ],
)
def test_each_spelling_is_flagged_once_with_a_safe_fix(source: str) -> None:
    findings = lint(source)
    imports = [f for f in findings if "imports AMP APIs deprecated" in f.message]
    # The deprecated import, where there is one, is one more finding, on its own line.
    deprecated_import = source.startswith(
        ("import torch.cuda.amp as", "from torch.cuda import amp", "from torch.cuda.amp")
    )
    assert [f.line for f in imports] == ([1] if deprecated_import else [])
    assert all(f.fix is not None and f.fix.safety is FixSafety.SAFE for f in imports)
    uses = [f for f in findings if f not in imports]
    assert len(uses) == 1, findings
    finding = uses[0]
    assert (finding.code, finding.name) == ("AMP401", "deprecated-amp-api")
    assert finding.message.startswith("FutureWarning at run time: ")
    assert finding.fix is not None and finding.fix.safety is FixSafety.SAFE
    fixed = fix(source)
    assert ".cuda.amp." not in fixed.split("\n", 2)[-1]  # imports aside, nothing old is left
    assert "amp.amp." not in fixed
    assert not lint(fixed)


@pytest.mark.parametrize(
    "source",
    [
        "import torch\nwith torch.amp.autocast('cuda'):\n    pass\n",
        "import torch\nwith torch.autocast('cuda'):\n    pass\n",
        "import torch\ns = torch.amp.GradScaler('cuda')\n",
        "from torch.amp import autocast, custom_fwd\nwith autocast('cpu'):\n    pass\n",
        "def autocast():\n    pass\nwith autocast():\n    pass\n",
        "import torch\nok = torch.cuda.amp.common.amp_definitely_not_available()\n",
        "import torch\nclass M:\n    def autocast(self):\n        pass\nM().autocast()\n",
        "from torch.cuda.amp import autocast\nautocast = None\n",
        "from torch.cuda.amp import autocast\ndef f(autocast=1):\n    pass\nf(autocast=2)\n",
        "import torch\ntorch.cuda.amp.autocast = None\n",
    ],
)
def test_not_flagged(source: str) -> None:
    assert lint(source) == []


def test_message_quotes_the_warning_and_the_replacement() -> None:
    (finding,) = lint("import torch\nwith torch.cpu.amp.autocast():\n    pass\n")
    assert finding.message == (
        'FutureWarning at run time: "`torch.cpu.amp.autocast(args...)` is deprecated. '
        "Please use `torch.amp.autocast('cpu', args...)` instead.\""
    )
    assert (finding.line, finding.column) == (2, 5)


# The fix: argument mapping


def test_autocast_positional_arguments_become_keywords() -> None:
    source = "import torch\nwith torch.cuda.amp.autocast(False, torch.bfloat16, True):\n    pass\n"
    (finding,) = lint(source)
    assert "positional arguments must become keywords" in finding.message
    assert fix(source) == (
        "import torch\n"
        'with torch.amp.autocast("cuda", enabled=False, dtype=torch.bfloat16, '
        "cache_enabled=True):\n    pass\n"
    )


def test_autocast_keywords_and_double_star_are_kept() -> None:
    source = "import torch\nwith torch.cuda.amp.autocast(True, dtype=d, **extra):\n    pass\n"
    assert fix(source) == (
        'import torch\nwith torch.amp.autocast("cuda", enabled=True, dtype=d, **extra):\n    pass\n'
    )


def test_cpu_autocast_gets_the_cpu_device() -> None:
    source = "import torch\nwith torch.cpu.amp.autocast(cache_enabled=False):\n    pass\n"
    assert fix(source) == (
        'import torch\nwith torch.amp.autocast("cpu", cache_enabled=False):\n    pass\n'
    )


def test_grad_scaler_positional_arguments_keep_their_order() -> None:
    # torch.amp.GradScaler(device, init_scale, growth_factor, backoff_factor, growth_interval,
    # enabled): the old order, after the device.
    source = "import torch\ns = torch.cuda.amp.GradScaler(1024.0, 3.0, 0.25, 10, False)\n"
    assert fix(source) == (
        'import torch\ns = torch.amp.GradScaler("cuda", 1024.0, 3.0, 0.25, 10, False)\n'
    )


def test_grad_scaler_star_args_keep_their_meaning() -> None:
    source = "import torch\ns = torch.cpu.amp.GradScaler(*args, **kwargs)\n"
    assert fix(source) == 'import torch\ns = torch.amp.GradScaler("cpu", *args, **kwargs)\n'


def test_custom_fwd_without_parentheses_gets_a_device_type() -> None:
    source = """\
        import torch
        class F(torch.autograd.Function):
            @staticmethod
            @torch.cuda.amp.custom_fwd
            def forward(ctx, x):
                return x
            @staticmethod
            @torch.cuda.amp.custom_bwd
            def backward(ctx, g):
                return g
        """
    fixed = fix(source)
    assert '    @torch.amp.custom_fwd(device_type="cuda")\n' in fixed
    assert '    @torch.amp.custom_bwd(device_type="cuda")\n' in fixed


def test_custom_fwd_device_type_goes_after_the_arguments_and_before_double_star() -> None:
    source = """\
        import torch
        @torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)
        def f(ctx, x):
            pass
        @torch.cuda.amp.custom_fwd(cast_inputs=torch.float32, **options)
        def g(ctx, x):
            pass
        h = torch.cuda.amp.custom_fwd(forward)
        """
    assert fix(source) == dedent(
        """\
        import torch
        @torch.amp.custom_fwd(cast_inputs=torch.float32, device_type="cuda")
        def f(ctx, x):
            pass
        @torch.amp.custom_fwd(cast_inputs=torch.float32, device_type="cuda", **options)
        def g(ctx, x):
            pass
        h = torch.amp.custom_fwd(forward, device_type="cuda")
        """
    )


def test_comments_and_line_breaks_inside_the_call_survive() -> None:
    source = """\
        import torch
        with torch.cuda.amp.autocast(  # mixed precision
            True,  # on
            # bf16 on Ampere and later
            torch.bfloat16,
        ):
            pass
        fwd = torch.cuda.amp.custom_fwd(
            forward,
            cast_inputs=torch.float32  # inputs in fp32
        )
        """
    assert fix(source) == dedent(
        """\
        import torch
        with torch.amp.autocast(  # mixed precision
            "cuda",
            enabled=True,  # on
            # bf16 on Ampere and later
            dtype=torch.bfloat16,
        ):
            pass
        fwd = torch.amp.custom_fwd(
            forward,
            cast_inputs=torch.float32,  # inputs in fp32
            device_type="cuda"
        )
        """
    )


def test_single_quoted_file_gets_single_quotes() -> None:
    source = "import torch\nname = 'x'\ns = torch.cuda.amp.GradScaler()\n"
    assert fix(source) == "import torch\nname = 'x'\ns = torch.amp.GradScaler('cuda')\n"


def test_documented_example_fixes_to_the_documented_fixed_example() -> None:
    from amp_lint.rules.amp401_deprecated_amp_api import DeprecatedAmpApi

    # Four uses, and the import they come through.
    assert len(lint(DeprecatedAmpApi.example)) == 5
    assert fix(DeprecatedAmpApi.example) == DeprecatedAmpApi.fixed_example


# The fix: how torch is named, imports added and removed


def test_torch_alias_is_used() -> None:
    source = "import torch as th\nimport torch.cuda.amp as amp\nwith amp.autocast():\n    pass\n"
    fixed = fix(source)
    assert 'with th.amp.autocast("cuda"):' in fixed
    assert "import torch\n" not in fixed


def test_module_alias_never_gives_amp_amp() -> None:
    # TorchFix turned this into `amp.amp.autocast("cuda")`.
    source = "import torch.cuda.amp as amp\n\nwith amp.autocast():\n    pass\n"
    fixed = fix(source)
    assert "amp.amp" not in fixed
    assert 'with torch.amp.autocast("cuda"):' in fixed
    assert "import torch\n" in fixed


def test_import_torch_is_added_and_the_from_import_removed() -> None:
    # TorchFix wrote `torch.amp.autocast("cuda")` without importing torch.
    source = "from torch.cuda.amp import GradScaler, autocast\n\nwith autocast():\n    pass\n"
    (imported, finding) = lint(source)
    # The import's own fix does the same: it rewrites the use and removes what it bound.
    assert imported.line == 1 and imported.fix is not None
    assert imported.fix.imports == ("torch",)
    assert imported.fix.unused_imports == (("torch.cuda.amp", "autocast", None),)
    assert finding.fix is not None
    assert finding.fix.imports == ("torch",)
    assert finding.fix.unused_imports == (("torch.cuda.amp", "autocast", None),)
    assert fix(source) == (
        # isort's order: `import torch` before the `from torch...` import of its section.
        "import torch\nfrom torch.cuda.amp import GradScaler\n\n"
        'with torch.amp.autocast("cuda"):\n    pass\n'
    )


def test_from_import_of_the_module_is_removed() -> None:
    source = "import torch\nfrom torch.cuda import amp\n\ns = amp.GradScaler()\n"
    assert fix(source) == 'import torch\n\ns = torch.amp.GradScaler("cuda")\n'


def test_from_import_still_used_elsewhere_is_kept() -> None:
    source = """\
        import functools
        import torch
        from torch.cuda.amp import autocast
        with autocast():
            pass
        bf16 = functools.partial(autocast, dtype=torch.bfloat16)
        """
    fixed = fix(source)
    assert "from torch.cuda.amp import autocast\n" in fixed
    assert 'with torch.amp.autocast("cuda"):' in fixed


def test_no_fix_when_torch_names_something_else() -> None:
    source = "from lib import torch\nfrom torch.cuda.amp import autocast\nwith autocast():\n  ...\n"
    findings = lint(source)
    assert [f.line for f in findings] == [2, 3]  # the import and its use
    assert all(finding.fix is None for finding in findings)


def test_no_import_needed_when_a_submodule_import_binds_torch() -> None:
    source = "import torch.cuda.amp\nwith torch.cuda.amp.autocast():\n    pass\n"
    (finding,) = lint(source)
    assert finding.fix is not None and finding.fix.imports == ()


# The fix in a project: names other files import from the module stay bound


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dedent(text))


def _imports_cleanly(root: Path, statement: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-W", "ignore", "-c", statement],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_fix_keeps_a_name_another_linted_file_imports(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    _write(
        tmp_path,
        {
            "amp_utils.py": """\
                import torch
                from torch.cuda.amp import GradScaler, autocast


                def run(model, x):
                    with autocast():
                        return model(x)


                scaler = GradScaler()
                """,
            "train.py": """\
                from amp_utils import autocast


                def step(model, x):
                    with autocast(enabled=False):
                        return model(x)
                """,
            "evaluate.py": """\
                import amp_utils


                def evaluate(model, x):
                    with amp_utils.autocast(enabled=False):
                        return model(x)
                """,
        },
    )
    result = amp_lint(tmp_path, "check", "--select", "AMP401", "--fix", "--no-cache", ".")
    assert result.returncode == 0, result.stdout + result.stderr
    fixed = (tmp_path / "amp_utils.py").read_text()
    assert 'with torch.amp.autocast("cuda"):' in fixed
    assert 'scaler = torch.amp.GradScaler("cuda")' in fixed
    # GradScaler is used nowhere else: its import goes; autocast is imported by train.py.
    assert "from torch.cuda.amp import autocast\n" in fixed
    ran = _imports_cleanly(
        tmp_path, "import train, evaluate; assert train.autocast is evaluate.amp_utils.autocast"
    )
    assert ran.returncode == 0, ran.stderr


def test_fix_removes_the_import_when_no_linted_file_imports_it(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "amp_utils.py": """\
                from torch.cuda.amp import autocast


                def run(model, x):
                    with autocast():
                        return model(x)
                """,
            "train.py": """\
                from amp_utils import run
                """,
        },
    )
    result = amp_lint(tmp_path, "check", "--select", "AMP401", "--fix", "--no-cache", ".")
    assert result.returncode == 0, result.stdout + result.stderr
    fixed = (tmp_path / "amp_utils.py").read_text()
    assert "torch.cuda.amp" not in fixed
    assert 'with torch.amp.autocast("cuda"):' in fixed


# Flagged without a fix


@pytest.mark.parametrize(
    ("source", "words"),
    [
        (
            "import functools, torch\np = functools.partial(torch.cuda.amp.autocast, dtype=d)\n",
            "no automatic fix for a reference that is not called",
        ),
        (
            "import torch\nok = isinstance(s, torch.cuda.amp.GradScaler)\n",
            "`isinstance` still matches old scalers",
        ),
        ("import torch\nclass A(torch.cpu.amp.autocast):\n    pass\n", "`'cpu'`"),
        (
            "from torch.cuda.amp import autocast\ndef f(*a):\n  with autocast(*a):\n    ...\n",
            "`*args` cannot be mapped",
        ),
        (
            "import torch\n@torch.cuda.amp.autocast\ndef f(x):\n    pass\n",
            "passes the function as `enabled`",
        ),
        ("import torch\nwith torch.cuda.amp.autocast(1, 2, 3, 4):\n    pass\n", "FutureWarning"),
        ("import torch\nwith torch.cuda.amp.autocast(device_type='cuda'):\n    pass\n", ""),
        ("import torch\n@torch.cuda.amp.custom_fwd(device_type='cuda')\ndef f():\n    pass\n", ""),
    ],
)
def test_flagged_without_fix(source: str, words: str) -> None:
    findings = lint(source)
    imports = [f for f in findings if "imports AMP APIs deprecated" in f.message]
    assert all(f.fix is None for f in imports)  # nothing through them can be rewritten
    (finding,) = [f for f in findings if f not in imports]
    assert finding.fix is None
    assert words in finding.message
    assert fix(source) == source


# Under the installed torch


def _run(source: str) -> tuple[dict[str, Any], list[warnings.WarningMessage]]:
    namespace: dict[str, Any] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(compile(source, "example.py", "exec"), namespace)
    return namespace, [w for w in caught if issubclass(w.category, FutureWarning)]


RUNNABLE = """\
import torch
from torch.cuda.amp import GradScaler
from torch.cuda.amp import custom_bwd, custom_fwd

cpu_autocast = torch.cpu.amp.autocast(True, torch.bfloat16, False)
cuda_autocast = torch.cuda.amp.autocast(False, torch.float16)
cpu_default = torch.cpu.amp.autocast()
cuda_scaler = GradScaler(1024.0, 3.0, 0.25, 10, enabled=False)
cpu_scaler = torch.cpu.amp.GradScaler(512.0, growth_interval=5)


class Double(torch.autograd.Function):
    @staticmethod
    @custom_fwd(cast_inputs=torch.float32)
    def forward(ctx, x):
        return x * 2

    @staticmethod
    @custom_bwd
    def backward(ctx, grad):
        return grad * 2


x = torch.ones(3, requires_grad=True)
with torch.cpu.amp.autocast(dtype=torch.bfloat16):
    y = torch.mm(x.view(1, 3), x.view(3, 1))
Double.apply(x).sum().backward()
"""


def _state(obj: object) -> dict[str, Any]:
    return {k: v for k, v in vars(obj).items() if k != "_per_optimizer_states"}


def test_fixed_code_builds_the_same_objects_without_future_warnings() -> None:
    torch = pytest.importorskip("torch")
    fixed = fix(RUNNABLE)
    assert "torch.cuda.amp" not in fixed and "torch.cpu.amp" not in fixed

    old, old_warnings = _run(RUNNABLE)
    new, new_warnings = _run(fixed)

    assert new_warnings == []
    # Every warning the old code raised is quoted by a finding.
    messages = " ".join(f.message for f in lint(RUNNABLE))
    assert old_warnings
    for warning in old_warnings:
        assert str(warning.message) in messages

    for name in ("cpu_autocast", "cuda_autocast", "cpu_default"):
        assert isinstance(new[name], torch.amp.autocast)
        assert _state(new[name]) == _state(old[name]), name
    assert new["cpu_autocast"].fast_dtype is torch.bfloat16
    assert new["cpu_autocast"].device == "cpu"
    for name in ("cuda_scaler", "cpu_scaler"):
        assert type(new[name]) is torch.amp.GradScaler
        assert _state(new[name]) == _state(old[name]), name
    assert new["y"].dtype == old["y"].dtype == torch.bfloat16
    assert torch.equal(new["x"].grad, old["x"].grad)


def test_documented_difference_in_nested_regions() -> None:
    """fix_safety says: an old-style autocast without `dtype=` used its own default even inside
    a region of another dtype; `torch.amp.autocast` without `dtype=` takes the current one."""
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.amp.autocast("cpu", dtype=torch.float16):
            old = torch.cpu.amp.autocast()
            new = torch.amp.autocast("cpu")
        top_level_old, top_level_new = torch.cpu.amp.autocast(), torch.amp.autocast("cpu")
    assert (old.fast_dtype, new.fast_dtype) == (torch.bfloat16, torch.float16)
    assert top_level_old.fast_dtype == top_level_new.fast_dtype == torch.bfloat16


# The import a use comes through: one more finding, gated and fixed as its uses are


def test_the_import_is_reported_once_and_its_fix_migrates_every_use() -> None:
    source = dedent(
        """\
        from torch.cuda.amp import GradScaler, autocast

        scaler = GradScaler()
        with autocast():
            pass
        with autocast(dtype=None):
            pass
        """
    )
    findings = lint(source)
    [imported] = [f for f in findings if f.line == 1]
    assert len(findings) == 4
    assert "`torch.cuda.amp.autocast`, `torch.cuda.amp.GradScaler`" in imported.message
    assert "rewrites its 3 uses" in imported.message
    # Fixing the file migrates the import with its uses: nothing of torch.cuda.amp is left.
    only_import = fix_source(
        source.encode(), "example.py", Config(select=("AMP401",)), unsafe=False
    ).source.decode()
    assert only_import == fix(source)
    assert "cuda.amp" not in only_import and "import torch\n" in only_import


def test_on_an_old_torch_the_import_names_only_what_it_can_replace() -> None:
    source = dedent(
        """\
        from torch.cuda.amp import GradScaler, autocast

        scaler = GradScaler()
        with autocast():
            pass
        """
    )
    config = Config(select=("AMP401",), torch_version=(2, 1))
    findings = lint_source(source.encode(), "example.py", config)
    assert [f.line for f in findings] == [1, 4]  # GradScaler needs torch 2.3
    imported = findings[0]
    assert "on torch >= 2.4 calling them warns" in imported.message
    assert "(`torch.cuda.amp.autocast`):" in imported.message  # GradScaler is not named
    fixed = fix_source(source.encode(), "example.py", config, unsafe=False).source
    assert b"from torch.cuda.amp import GradScaler\n" in fixed  # still used, still imported
    assert fix_source(fixed, "example.py", config, unsafe=False).source == fixed
    only_scaler = "from torch.cuda.amp import GradScaler\nscaler = GradScaler()\n"
    assert lint_source(only_scaler.encode(), "example.py", config) == []


@pytest.mark.parametrize(
    "source",
    [
        # Compatibility imports: they run only on torch without the new API.
        "try:\n    from torch.amp import GradScaler\nexcept ImportError:\n"
        "    from torch.cuda.amp import GradScaler\ns = GradScaler('cuda')\n",
        "import torch\nif TORCH_GE_2_4:\n    from torch.amp import autocast\nelse:\n"
        "    from torch.cuda.amp import autocast\n",
        # Used only in an annotation, which never calls it: nothing warns.
        "from torch.cuda.amp import GradScaler\ndef f(s: GradScaler) -> None:\n    ...\n",
        # `import torch.cuda.amp` binds torch; the use is reported, not the import.
        "import torch.cuda.amp\n",
    ],
)
def test_imports_that_are_not_reported(source: str) -> None:
    assert [f for f in lint(source) if "imports AMP APIs" in f.message] == []
