"""`amp-lint check` on small multi-file projects (tests/projects/*), through the real command.

The linted files are analysed as one project: calls made under autocast into other linted
files are followed (functions, methods, module instances, relative imports, re-exports
through a package `__init__.py`), framework trainers elsewhere in the project put methods
under autocast (Lightning, Hugging Face, accelerate), and library mode analyses every
`forward`. Each project directory holds `expected*.txt`: the findings of
`amp-lint check --no-cache [mode] .` run inside it, reviewed line by line, as
`path:line:col: CODE message` lines with the full message (from `--output-format json`): the
concise default prints one-line summaries, and what these projects test is the chain or the
assumption each message names.

Variants (bf16 trainers, settings in pyproject.toml) are built from the fixtures in tmp_path,
so every fixture file exists once.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from runners import amp_lint, flake8

PROJECTS = Path(__file__).parent / "projects"
CROSS_FILE = PROJECTS / "cross_file"
LIGHTNING = PROJECTS / "lightning"
HF_TRAINER = PROJECTS / "hf_trainer"
ACCELERATE = PROJECTS / "accelerate"
LIBRARY = PROJECTS / "library"
DISPATCH = PROJECTS / "dispatch"

LIBRARY_FP16 = ("--assume-autocast", "float16", "--device", "cuda")
LIBRARY_BF16 = ("--assume-autocast", "bfloat16")

LIGHTNING_WHY = (
    "(a LightningModule step, run under float16 autocast by Lightning's "
    '`Trainer(precision="16-mixed")`)'
)

# `path:line:col: CODE` at the start of a finding line.
_POSITION = re.compile(r"^(\S+:\d+:\d+: AMP\d{3}) ")


def check(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return with_messages(amp_lint(project, "check", "--no-cache", *json_format(args), "."))


def json_format(args: tuple[str, ...]) -> tuple[str, ...]:
    return ("--output-format", "json", *args)


def with_messages(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    """The JSON findings as `path:line:col: CODE message` lines, with the full message."""
    try:
        findings = json.loads(result.stdout)
    except json.JSONDecodeError:
        return result  # an error: the test sees what was printed
    stdout = "".join(
        f"{f['path']}:{f['line']}:{f['column']}: {f['code']} {f['message']}\n" for f in findings
    )
    return subprocess.CompletedProcess(result.args, result.returncode, stdout, result.stderr)


def expected(project: Path, name: str = "expected.txt") -> str:
    return (project / name).read_text(encoding="utf-8")


def positions(stdout: str) -> list[str]:
    """`path:line:col: CODE` of each finding, in output order."""
    found = []
    for line in stdout.splitlines():
        match = _POSITION.match(line)
        assert match is not None, f"not a finding line: {line!r}"
        found.append(match.group(1))
    return found


def finding(stdout: str, position: str) -> str:
    """The one output line starting with `position` (`losses.py:7:47: AMP102`)."""
    lines = [line for line in stdout.splitlines() if line.startswith(position + " ")]
    assert len(lines) == 1, f"{position} in:\n{stdout}"
    return lines[0]


def source_line(path: Path, line: int) -> str:
    return path.read_text(encoding="utf-8").splitlines()[line - 1]


def copy(project: Path, tmp_path: Path) -> Path:
    target = tmp_path / project.name
    shutil.copytree(project, target)
    return target


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def replace_in(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new), encoding="utf-8")


# --- the expected outputs -------------------------------------------------------------------

# (id, project, mode, expected output file)
RUNS = [
    ("cross_file", CROSS_FILE, (), "expected.txt"),
    ("lightning", LIGHTNING, (), "expected.txt"),
    ("hf_trainer", HF_TRAINER, (), "expected.txt"),
    ("library-default", LIBRARY, (), "expected.txt"),
    ("library-fp16-cuda", LIBRARY, LIBRARY_FP16, "expected-float16-cuda.txt"),
    ("library-bf16", LIBRARY, LIBRARY_BF16, "expected-bfloat16.txt"),
    ("dispatch", DISPATCH, (), "expected.txt"),
]


@pytest.mark.parametrize(
    ("project", "args", "name"), [pytest.param(*run[1:], id=run[0]) for run in RUNS]
)
def test_expected_output(project: Path, args: tuple[str, ...], name: str) -> None:
    result = check(project, *args)
    want = expected(project, name)
    assert result.stdout == want, result.stderr
    assert result.returncode == (1 if want else 0), result.stderr


# --- cross-file calls -----------------------------------------------------------------------

# One finding per way a call reaches another linted file: (position, chain, the call in the
# chain's first step, as written in train.py).
CROSS_FILE_KINDS = {
    # `import losses as L` ... `L.bce(p, y)`
    "function": ("losses.py:11:28: AMP102", "(via train.py:25)", "L.bce(p, y)"),
    # `self.criterion = FocalLoss()` in `__init__`, then `self.criterion(p, y)`
    "module instance": ("losses.py:7:47: AMP102", "(via train.py:25)", "self.criterion(p, y)"),
    # `self.model.encode(x)` on an instance of a class from another linted file
    "method": ("models/attn.py:20:16: AMP004", "(via train.py:24)", "self.model.encode(x)"),
    # `from models import Attention`, re-exported by models/__init__.py from models/attn.py
    "re-export": ("models/attn.py:14:29: AMP003", "(via train.py:22)", "self.model(x, mask)"),
    # `from .masking import apply_mask` inside models/attn.py
    "relative import": (
        "models/masking.py:2:12: AMP101",
        "(via train.py:22 → models/attn.py:15)",
        "self.model(x, mask)",
    ),
}


@pytest.mark.parametrize("kind", list(CROSS_FILE_KINDS))
def test_cross_file_finding_in_the_callee_names_the_chain(kind: str) -> None:
    position, chain, call = CROSS_FILE_KINDS[kind]
    line = finding(check(CROSS_FILE).stdout, position)
    assert line.endswith(" " + chain), line
    # The chain names the lines of the calls themselves.
    first = re.search(r"train\.py:(\d+)", chain)
    assert first is not None
    assert call in source_line(CROSS_FILE / "train.py", int(first.group(1)))


def test_relative_import_chain_names_the_call_in_the_package() -> None:
    assert "apply_mask(" in source_line(CROSS_FILE / "models" / "attn.py", 15)


def test_cross_file_reports_nothing_in_the_training_loop_itself() -> None:
    """train.py has no hazard of its own: each finding belongs to the file holding the code."""
    found = positions(check(CROSS_FILE).stdout)
    assert sorted(found) == sorted(position for position, _, _ in CROSS_FILE_KINDS.values())


def test_the_callee_package_alone_enters_no_autocast() -> None:
    """Without train.py nothing calls models/ under autocast: no findings there."""
    result = amp_lint(CROSS_FILE, "check", "--no-cache", "models/")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""


def test_the_callee_package_in_library_mode() -> None:
    """`--assume-autocast float16` analyses `Attention.forward` as the entry point; the
    masked_fill in models/masking.py is reached through the relative import."""
    library_mode = json_format(("--assume-autocast", "float16"))
    result = with_messages(amp_lint(CROSS_FILE, "check", "--no-cache", *library_mode, "models/"))
    assert result.returncode == 1, result.stderr
    assert positions(result.stdout) == [
        "models/attn.py:14:29: AMP003",
        "models/masking.py:2:12: AMP101",
    ]
    masked = finding(result.stdout, "models/masking.py:2:12: AMP101")
    assert "`scores.masked_fill(mask, -1e9)` fills a float16 tensor" in masked
    assert masked.endswith(" (via models/attn.py:15)"), masked
    forward = finding(result.stdout, "models/attn.py:14:29: AMP003")
    assert forward.endswith(
        " (`Attention.forward` analysed under unknown-device float16 autocast (library mode))"
    ), forward


def test_cross_file_without_autocast_is_silent(tmp_path: Path) -> None:
    """The same project with the autocast region replaced by `torch.enable_grad()` (float32
    training, the GradScaler left in place) has no findings in the callees: their code is only
    a hazard when something runs it under autocast. What is left is the scaler itself, which
    now scales a float32 loss (AMP310)."""
    project = copy(CROSS_FILE, tmp_path)
    replace_in(
        project / "train.py", 'torch.autocast("cuda", dtype=torch.float16)', "torch.enable_grad()"
    )
    result = check(project)
    assert result.returncode == 1, result.stdout + result.stderr
    found = [
        line.split(": ")[1].split()[0] + " " + line.split(":")[0]
        for line in result.stdout.splitlines()
    ]
    assert found == ["AMP310 train.py"], result.stdout


# --- fixes in callee files ------------------------------------------------------------------

CALLEE_FILES = {"losses.py", "models/attn.py", "models/masking.py"}


def test_fix_rewrites_the_callee_files(tmp_path: Path) -> None:
    project = copy(CROSS_FILE, tmp_path)
    before = tree_bytes(project)
    result = amp_lint(project, "check", "--no-cache", "--fix", "--unsafe-fixes", ".")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Fixed 5 findings, 0 remaining." in result.stderr
    after = tree_bytes(project)
    assert {path for path in before if before[path] != after[path]} == CALLEE_FILES
    masking = (project / "models" / "masking.py").read_text(encoding="utf-8")
    assert masking.startswith("import torch\n")
    assert "scores.masked_fill(mask, torch.finfo(scores.dtype).min)" in masking
    losses = (project / "losses.py").read_text(encoding="utf-8")
    # p may be float64 (autocast leaves float64 alone): the upcast keeps it (fixes/upcasts.py).
    assert "torch.log(p.to(torch.promote_types(p.dtype, torch.float32)) + 1e-10)" in losses
    # Fixed means fixed: the project is clean, and a second --fix changes no byte.
    assert check(project).stdout == ""
    again = amp_lint(project, "check", "--no-cache", "--fix", "--unsafe-fixes", ".")
    assert again.returncode == 0, again.stdout + again.stderr
    assert tree_bytes(project) == after


def test_diff_shows_callee_changes_and_writes_nothing(tmp_path: Path) -> None:
    project = copy(CROSS_FILE, tmp_path)
    before = tree_bytes(project)
    result = amp_lint(project, "check", "--no-cache", "--diff", "--unsafe-fixes", ".")
    assert result.returncode == 1, result.stderr
    headers = re.findall(r"^\+\+\+ b/(\S+)$", result.stdout, flags=re.MULTILINE)
    assert set(headers) == CALLEE_FILES
    assert "+    return scores.masked_fill(mask, torch.finfo(scores.dtype).min)" in result.stdout
    assert tree_bytes(project) == before
    # Every fix here is unsafe: --diff alone shows nothing.
    safe = amp_lint(project, "check", "--no-cache", "--diff", ".")
    assert safe.returncode == 0, safe.stdout + safe.stderr
    assert safe.stdout == ""


def test_flake8_plugin_sees_one_file_at_a_time() -> None:
    """The flake8 plugin analyses each file on its own: it cannot see that train.py calls
    losses.py and models/ under autocast, and assumes nothing about callers. So the callee
    files, which hold every finding of `amp-lint check .`, get none from flake8, alone or
    with the whole project (train.py has no hazard of its own)."""
    for path in sorted(CALLEE_FILES):
        result = flake8(CROSS_FILE, "--select=AMP", path)
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout == ""
    whole = flake8(CROSS_FILE, "--select=AMP", ".")
    assert whole.returncode == 0, whole.stdout + whole.stderr
    assert whole.stdout == ""


# --- framework entry points -----------------------------------------------------------------


def test_lightning_trainer_in_another_file() -> None:
    stdout = check(LIGHTNING).stdout
    assert positions(stdout) == ["model.py:19:18: AMP101", "model.py:25:40: AMP102"]
    # training_step and validation_step, both run under the Trainer's autocast.
    assert "masked_fill" in source_line(LIGHTNING / "model.py", 19)
    assert "1e-10" in source_line(LIGHTNING / "model.py", 25)
    for line in stdout.splitlines():
        assert line.endswith(" " + LIGHTNING_WHY), line


def test_a_trainer_in_a_test_runs_only_the_tests_modules(tmp_path: Path) -> None:
    """A "16-mixed" Trainer in a test does not put every LightningModule of the project
    under autocast (Lightning's own tests fit other models with the default precision;
    repository triage)."""
    project = copy(LIGHTNING, tmp_path)
    (project / "tests").mkdir()
    (project / "train.py").rename(project / "tests" / "test_train.py")
    assert positions(check(project).stdout) == []


def lightning_bf16(tmp_path: Path) -> Path:
    project = copy(LIGHTNING, tmp_path)
    replace_in(project / "train.py", 'precision="16-mixed"', 'precision="bf16-mixed"')
    return project


def lightning_config(tmp_path: Path, precision: str = "16-mixed") -> Path:
    """Only the LightningModule, with the Trainer's precision in pyproject.toml."""
    project = tmp_path / "lightning_config"
    project.mkdir()
    shutil.copy(LIGHTNING / "model.py", project / "model.py")
    (project / "pyproject.toml").write_text(
        f'[tool.amp-lint]\nlightning-precision = "{precision}"\n', encoding="utf-8"
    )
    return project


def test_lightning_bf16_mixed_reports_no_fp16_only_hazard(tmp_path: Path) -> None:
    """bfloat16 has float32's range: -1e9 fits and 1e-10 does not round to 0."""
    result = check(lightning_bf16(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""


def test_lightning_precision_from_config(tmp_path: Path) -> None:
    stdout = check(lightning_config(tmp_path)).stdout
    assert positions(stdout) == positions(expected(LIGHTNING))
    for line in stdout.splitlines():
        assert 'lightning-precision = "16-mixed"' in line, line


def test_lightning_bf16_precision_from_config(tmp_path: Path) -> None:
    result = check(lightning_config(tmp_path, "bf16-mixed"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""


def test_hf_trainer_compute_loss_in_another_file() -> None:
    stdout = check(HF_TRAINER).stdout
    assert positions(stdout) == ["trainer.py:11:15: AMP004"]
    assert stdout.rstrip("\n").endswith(
        "(run under float16 autocast by the Hugging Face Trainer's `TrainingArguments(fp16=True)`)"
    )


def hf_bf16(tmp_path: Path) -> Path:
    project = copy(HF_TRAINER, tmp_path)
    replace_in(project / "train.py", "fp16=True", "bf16=True")
    return project


def test_hf_trainer_bf16_reports_no_fp16_only_hazard(tmp_path: Path) -> None:
    result = check(hf_bf16(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""


def test_accelerate_prepared_model_in_another_file() -> None:
    result = check(ACCELERATE)
    assert result.stdout == expected(ACCELERATE), result.stderr


def test_accelerate_prepared_model_in_the_same_file(tmp_path: Path) -> None:
    (tmp_path / "one.py").write_text(
        "from accelerate import Accelerator\n"
        "from torch import nn\n"
        "\n"
        "\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.head = nn.Linear(8, 2)\n"
        "\n"
        "    def forward(self, x, valid):\n"
        "        return self.head(x).masked_fill(~valid, -1e9)\n"
        "\n"
        "\n"
        'accelerator = Accelerator(mixed_precision="fp16")\n'
        "model = Net()\n"
        "model = accelerator.prepare(model)\n",
        encoding="utf-8",
    )
    assert positions(check(tmp_path).stdout) == ["one.py:11:16: AMP101"]


# --- library mode ---------------------------------------------------------------------------


def test_library_mode_messages() -> None:
    stdout = check(LIBRARY, *LIBRARY_FP16).stdout
    assert positions(stdout) == [
        "zoo/blocks.py:13:16: AMP004",  # eps 1e-10 in a norm
        "zoo/blocks.py:24:16: AMP101",  # masked_fill(-1e9)
        "zoo/geometry.py:12:16: AMP202",  # torch.linalg.inv
    ]
    for line, cls in zip(stdout.splitlines(), ["ScaleNorm", "TokenClassifier", "PoseRefiner"]):
        assert line.endswith(
            f" (`{cls}.forward` analysed under cuda float16 autocast (library mode))"
        ), line


def test_library_mode_bf16_keeps_only_what_bf16_breaks() -> None:
    """The fp16-only hazards (range, eps underflow) go; linalg.inv has no bf16 kernel either."""
    assert positions(check(LIBRARY, *LIBRARY_BF16).stdout) == ["zoo/geometry.py:12:16: AMP202"]


def library_config(tmp_path: Path) -> Path:
    project = copy(LIBRARY, tmp_path)
    (project / "pyproject.toml").write_text(
        '[tool.amp-lint]\nassume-autocast = "float16"\nassume-device = "cuda"\n', encoding="utf-8"
    )
    return project


def test_library_mode_from_config(tmp_path: Path) -> None:
    result = check(library_config(tmp_path))
    assert result.stdout == expected(LIBRARY, "expected-float16-cuda.txt"), result.stderr


# --- the first pass changes nothing -----------------------------------------------------------

FIXTURE_RUNS = [
    pytest.param(CROSS_FILE, ("--assume-autocast", "float16"), id="cross_file-library"),
    pytest.param(ACCELERATE, (), id="accelerate"),
    *(pytest.param(project, args, id=name) for name, project, args, _ in RUNS),
]
VARIANTS: dict[str, Callable[[Path], Path]] = {
    "lightning-bf16": lightning_bf16,
    "lightning-config": lightning_config,
    "hf-bf16": hf_bf16,
    "library-config": library_config,
}


def assert_first_pass_changes_nothing(project: Path, args: tuple[str, ...]) -> None:
    with_pass = check(project, *args)
    without = check(project, "--no-first-pass", *args)
    assert (without.stdout, without.returncode) == (with_pass.stdout, with_pass.returncode)


@pytest.mark.parametrize(("project", "args"), FIXTURE_RUNS)
def test_no_first_pass_gives_the_same_output(project: Path, args: tuple[str, ...]) -> None:
    assert_first_pass_changes_nothing(project, args)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_no_first_pass_gives_the_same_output_for_variants(variant: str, tmp_path: Path) -> None:
    assert_first_pass_changes_nothing(VARIANTS[variant](tmp_path), ())


# --- the result cache -----------------------------------------------------------------------


def cached(project: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    return with_messages(
        amp_lint(project, "check", "--cache-dir", str(cache), *json_format(()), ".")
    )


def test_cache_gives_the_same_output_and_follows_callee_edits(tmp_path: Path) -> None:
    project = copy(CROSS_FILE, tmp_path)
    cache = tmp_path / "c"
    first = cached(project, cache)
    assert first.stdout == expected(CROSS_FILE)
    assert cache.is_dir() and any(cache.rglob("*"))
    assert cached(project, cache).stdout == first.stdout
    # -1e4 fits float16: the masked_fill finding goes, reached only through two calls.
    replace_in(project / "models" / "masking.py", "-1e9", "-1e4")
    edited = cached(project, cache)
    masked = "models/masking.py:2:12: AMP101"
    assert positions(edited.stdout) == [p for p in positions(first.stdout) if p != masked]
    assert edited.stdout == check(project).stdout
    # An edit in the middle of the chain: the call through which masking.py is reached goes.
    replace_in(project / "models" / "masking.py", "-1e4", "-1e9")
    replace_in(
        project / "models" / "attn.py",
        "scores = apply_mask(q @ k.transpose(-2, -1), mask)",
        "scores = q @ k.transpose(-2, -1)",
    )
    assert masked not in cached(project, cache).stdout
    assert cached(project, cache).stdout == check(project).stdout


def test_no_cache_writes_no_cache_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AMP_LINT_CACHE_DIR", raising=False)
    monkeypatch.delenv("AMP_LINT_NO_CACHE", raising=False)
    project = copy(CROSS_FILE, tmp_path)
    result = check(project)
    assert result.stdout == expected(CROSS_FILE)
    assert sorted(p.name for p in project.iterdir()) == sorted(p.name for p in CROSS_FILE.iterdir())
    # Without --no-cache the same run does write one (so the check above means something).
    amp_lint(project, "check", ".")
    assert (project / ".amp_lint_cache").is_dir()


# --- regressions, each reduced to a minimal project ---------------------------------------

HEAD_LIB = (
    "from torch import nn\n"
    "\n"
    "\n"
    "class Head(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.proj = nn.Linear(8, 8)\n"
    "\n"
    "    def forward(self, x):\n"
    "        return self.proj(x)\n"
)
HEAD_TRAIN = (
    "import torch\n"
    "\n"
    "from lib import Head\n"
    "\n"
    "head = Head()\n"
    "\n"
    "\n"
    "def step(x):\n"
    '    with torch.autocast("cuda", dtype=torch.float16):\n'
    "        return torch.log(head(x) + 1e-10)\n"
)


def test_return_dtype_from_another_file(tmp_path: Path) -> None:
    """The baseline for the cache bug below: the float16 returned by Head.forward in lib.py
    makes `head(x) + 1e-10` in train.py an AMP102."""
    (tmp_path / "lib.py").write_text(HEAD_LIB, encoding="utf-8")
    (tmp_path / "train.py").write_text(HEAD_TRAIN, encoding="utf-8")
    assert positions(check(tmp_path).stdout) == ["train.py:10:26: AMP102"]
    replace_in(tmp_path / "lib.py", "return self.proj(x)", "return self.proj(x).float()")
    assert check(tmp_path).stdout == ""


def test_cache_follows_return_dtypes_of_edited_callees(tmp_path: Path) -> None:
    (tmp_path / "lib.py").write_text(HEAD_LIB, encoding="utf-8")
    (tmp_path / "train.py").write_text(HEAD_TRAIN, encoding="utf-8")
    cache = tmp_path / "c"
    assert positions(cached(tmp_path, cache).stdout) == ["train.py:10:26: AMP102"]
    replace_in(tmp_path / "lib.py", "return self.proj(x)", "return self.proj(x).float()")
    assert cached(tmp_path, cache).stdout == ""


def test_return_dtype_through_a_re_export(tmp_path: Path) -> None:
    project = copy(CROSS_FILE, tmp_path)
    (project / "train.py").write_text(
        "import torch\n"
        "\n"
        "from models import Attention\n"
        "\n"
        "model = Attention(8)\n"
        "\n"
        "\n"
        "def step(x, mask):\n"
        '    with torch.autocast("cuda", dtype=torch.float16):\n'
        "        return torch.log(model(x, mask) + 1e-10)\n",
        encoding="utf-8",
    )
    assert "train.py:10:26: AMP102" in positions(check(project).stdout)


def test_return_dtype_through_a_direct_import(tmp_path: Path) -> None:
    """The baseline for the re-export bug above."""
    project = copy(CROSS_FILE, tmp_path)
    (project / "train.py").write_text(
        "import torch\n"
        "\n"
        "from models.attn import Attention\n"
        "\n"
        "model = Attention(8)\n"
        "\n"
        "\n"
        "def step(x, mask):\n"
        '    with torch.autocast("cuda", dtype=torch.float16):\n'
        "        return torch.log(model(x, mask) + 1e-10)\n",
        encoding="utf-8",
    )
    assert "train.py:10:26: AMP102" in positions(check(project).stdout)


@pytest.mark.parametrize("suffix", [".cuda()", '.to("cuda")'])
def test_module_moved_to_device_in_init(tmp_path: Path, suffix: str) -> None:
    project = copy(CROSS_FILE, tmp_path)
    for constructor in ("Attention(dim)", "nn.Linear(dim, 1)"):
        replace_in(project / "train.py", f"= {constructor}\n", f"= {constructor}{suffix}\n")
    assert check(project).stdout == expected(CROSS_FILE)


def test_module_level_instance_in_a_callee_file(tmp_path: Path) -> None:
    (tmp_path / "lib.py").write_text(
        "import torch\n"
        "from torch import nn\n"
        "\n"
        "proj = nn.Linear(8, 8)\n"
        "\n"
        "\n"
        "def head(x):\n"
        "    return torch.log(proj(x) + 1e-10)\n",
        encoding="utf-8",
    )
    (tmp_path / "train.py").write_text(
        "import torch\n"
        "\n"
        "from lib import head\n"
        "\n"
        "\n"
        "def step(x):\n"
        '    with torch.autocast("cuda", dtype=torch.float16):\n'
        "        return head(x)\n",
        encoding="utf-8",
    )
    assert positions(check(tmp_path).stdout) == ["lib.py:8:22: AMP102"]


LOSS_LIB = (
    "import torch\n"
    "import torch.nn.functional as F\n"
    "\n"
    "\n"
    "def compute_loss(model, x, y):\n"
    '    with torch.autocast("cuda"):\n'
    "        logits = model(x)\n"
    "    return F.cross_entropy(logits.float(), y)\n"
)
LOSS_TRAIN = (
    "from losses import compute_loss\n"
    "\n"
    "\n"
    'def train(model, loader, optimizer, precision="fp16"):\n'
    "    for x, y in loader:\n"
    "        loss = compute_loss(model, x, y)\n"
    "        loss.backward()\n"
    "        optimizer.step()\n"
)


def test_fp16_region_in_another_file_reaches_the_backward(tmp_path: Path) -> None:
    """AMP304 by value flow across files: the loss computed under float16 autocast in
    losses.py is backpropagated in train.py, which enters no region itself (it names a
    precision, so it is analysed from its own roots)."""
    (tmp_path / "losses.py").write_text(LOSS_LIB, encoding="utf-8")
    (tmp_path / "train.py").write_text(LOSS_TRAIN, encoding="utf-8")
    result = check(tmp_path, "--select", "AMP304")
    assert positions(result.stdout) == ["train.py:7:9: AMP304"]
    assert "region `torch.autocast` in losses.py without a GradScaler" in result.stdout
    # Under `torch.no_grad()` the region records no graph: nothing to report.
    replace_in(
        tmp_path / "losses.py",
        '    with torch.autocast("cuda"):',
        '    with torch.no_grad(), torch.autocast("cuda"):',
    )
    assert check(tmp_path, "--select", "AMP304").stdout == ""
