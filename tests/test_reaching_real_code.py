"""How the analysis reaches the code real trainers run, through the real `amp-lint` command
and flake8: models and losses built by registries (dispatch, with its bounds), models cast
to half, Lightning modules whose base class is in another file, `Trainer(**config)`, and
library mode's entry points beyond `forward`.

tests/projects/dispatch is checked against its expected output in test_project_analysis.py;
here its variants are built in tmp_path, and the smaller projects are written inline.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

from runners import amp_lint, flake8
from test_project_analysis import DISPATCH, check, expected, finding, positions, replace_in

LIBRARY_FP16 = ("--assume-autocast", "float16", "--device", "cuda")


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return root


def dispatch_copy(tmp_path: Path) -> Path:
    target = tmp_path / "dispatch"
    shutil.copytree(DISPATCH, target, ignore=shutil.ignore_patterns(".amp_lint_cache"))
    return target


# --- dispatch: a model and a loss built by a registry ---------------------------------------

DETECTOR = "detection/detector.py:20:22: AMP101"
SET_LOSS = "detection/loss.py:15:38: AMP102"


def test_a_registry_built_model_runs_under_the_trainers_region_and_says_so() -> None:
    line = finding(check(DISPATCH).stdout, DETECTOR)
    assert 'raises "value cannot be converted to type c10::Half without overflow"' in line
    assert line.endswith(
        "(assumed to run under the cuda float16 autocast in train.py, where `model(images)` "
        "calls a model amp-lint cannot resolve)"
    )


def test_a_loss_method_gets_the_assumed_model_output_as_its_argument() -> None:
    """`criterion.loss(outputs, targets)`: the loss classes' `loss` methods run with
    `outputs` the model's assumed float16 output, and the finding names both assumptions."""
    line = finding(check(DISPATCH).stdout, SET_LOSS)
    assert "1e-10 rounds to 0 in float16" in line
    assert "where `criterion.loss(outputs, targets)` calls a loss amp-lint cannot resolve" in line
    assert "assumes `model(images)` returns float16 under autocast" in line


def test_dispatch_needs_an_enabled_half_region(tmp_path: Path) -> None:
    project = dispatch_copy(tmp_path)
    replace_in(
        project / "train.py",
        'with torch.autocast("cuda", dtype=torch.float16):',
        'with torch.autocast("cuda", dtype=torch.float16, enabled=False):',
    )
    result = check(project)
    assert (result.stdout, result.returncode) == ("", 0), result.stderr


def test_dispatch_under_bfloat16_keeps_what_bfloat16_represents(tmp_path: Path) -> None:
    """-1e9 and 1e-10 are both representable in bfloat16: the model and loss give nothing
    under a bf16 region; only the now useless GradScaler is reported."""
    project = dispatch_copy(tmp_path)
    replace_in(project / "train.py", "dtype=torch.float16", "dtype=torch.bfloat16")
    result = check(project)
    assert positions(result.stdout) == ["train.py:14:14: AMP306"], result.stderr


def test_the_files_of_the_program_alone_give_nothing() -> None:
    """Without the trainer there is no region, so the model package is not assumed to run
    under autocast (library mode is how to ask for that)."""
    result = amp_lint(DISPATCH, "check", "--no-cache", "detection", "registry.py")
    assert (result.stdout, result.returncode) == ("", 0), result.stderr


def zoo(root: Path, models: int) -> Path:
    """A trainer calling a model built by name, and a package of `models` modules it
    imports, each with a forward that overflows float16."""
    files = {
        "train.py": """
            import torch

            import zoo


            def step(cfg, x, mask):
                model = zoo.build(cfg)
                with torch.autocast("cuda", dtype=torch.float16):
                    return model(x, mask)
            """,
        "zoo/__init__.py": "".join(f"from .m{i} import M{i}\n" for i in range(models))
        + "\n\ndef build(cfg):\n    return globals()[cfg.name]()\n",
    }
    for i in range(models):
        files[f"zoo/m{i}.py"] = f"""
            from torch import nn


            class M{i}(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 8)

                def forward(self, x, mask):
                    return self.fc(x).masked_fill(mask, -1e9)
            """
    return write(root, files)


def test_dispatch_reaches_a_program_of_64_files(tmp_path: Path) -> None:
    result = check(zoo(tmp_path, 63))  # 63 models and the trainer
    found = positions(result.stdout)
    assert found == sorted(f"zoo/m{i}.py:10:16: AMP101" for i in range(63)), result.stderr


def test_dispatch_does_not_guess_in_a_model_zoo(tmp_path: Path) -> None:
    """Past 64 candidate files, which module runs is a guess among too many: none is
    analysed, and nothing is reported."""
    result = check(zoo(tmp_path, 65))
    assert (result.stdout, result.returncode) == ("", 0), result.stderr


SINGLE_FILE = """
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def predict(self, x, mask):
            return self.fc(x).masked_fill(mask, -1e9)


    def evaluate(build, cfg, x, mask):
        model = build(cfg)
        with torch.autocast("cuda"):
            return model.predict(x, mask)
    """


def test_flake8_dispatches_within_the_one_file_it_sees(tmp_path: Path) -> None:
    write(tmp_path, {"single.py": SINGLE_FILE})
    result = flake8(tmp_path, "--select", "AMP", "single.py")
    assert result.stdout.startswith("single.py:11:16: AMP101 "), result.stdout + result.stderr
    assert len(result.stdout.splitlines()) == 1
    # flake8 prints the one-line summary; the full message names the assumption.
    cli = check(tmp_path)
    assert positions(cli.stdout) == ["single.py:11:16: AMP101"]
    assert cli.stdout.rstrip().endswith(
        "(assumed to run under the cuda float16 autocast in single.py, where "
        "`model.predict(x, mask)` calls a model amp-lint cannot resolve)"
    )


def test_flake8_cannot_see_dispatch_into_another_file() -> None:
    result = flake8(DISPATCH, "--select", "AMP", ".")
    assert (result.stdout, result.returncode) == ("", 0), result.stderr


# --- a model cast to half -------------------------------------------------------------------

HALF_MODEL = {
    "nets/__init__.py": "from .head import Head\n",
    "nets/consts.py": "MASK_VALUE = -1e9\n",
    "nets/head.py": """
        from torch import nn

        from .consts import MASK_VALUE


        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, x, mask):
                return self.proj(x).masked_fill(mask, MASK_VALUE)
        """,
    "infer.py": """
        import torch

        import nets


        def load(path):
            model = torch.load(path)
            return model.half().cuda().eval()


        def predict(model, x, mask):
            with torch.no_grad():
                return model(x.half(), mask)
        """,
}


def test_a_model_cast_to_half_runs_its_modules_with_half_parameters(tmp_path: Path) -> None:
    result = check(write(tmp_path, HALF_MODEL))
    line = finding(result.stdout, "nets/head.py:12:16: AMP101")
    assert "fills a float16 tensor with -1e+09" in line  # the imported constant's value
    # The assumption is said once.
    assert line.endswith(
        "(assumed to run with float16 parameters: `model.half()` in infer.py casts a model "
        "amp-lint cannot resolve)"
    )


def test_a_model_cast_to_bfloat16_keeps_minus_1e9(tmp_path: Path) -> None:
    files = dict(HALF_MODEL)
    files["infer.py"] = files["infer.py"].replace("model.half()", "model.bfloat16()")
    result = check(write(tmp_path, files))
    assert (result.stdout, result.returncode) == ("", 0), result.stderr


# --- Lightning across files -----------------------------------------------------------------

LIGHTNING = {
    "base.py": """
        import lightning.pytorch as pl
        import torch


        class BaseModule(pl.LightningModule):
            def configure_optimizers(self):
                return torch.optim.AdamW(self.parameters())
        """,
    "model.py": """
        from torch import nn

        from base import BaseModule


        class Classifier(BaseModule):
            def __init__(self):
                super().__init__()
                self.head = nn.Linear(16, 4)

            def training_step(self, batch, batch_idx):
                x, mask = batch
                logits = self.head(x).masked_fill(mask, -1e9)
                return logits.logsumexp(-1).mean()
        """,
    "train.py": """
        import lightning.pytorch as pl

        from model import Classifier

        config = {"precision": "16-mixed", "max_epochs": 1}
        trainer = pl.Trainer(**config)
        trainer.fit(Classifier())
        """,
}
LIGHTNING_STEP = "model.py:13:18: AMP101"


def test_a_lightning_module_whose_base_is_in_another_file(tmp_path: Path) -> None:
    """`Classifier(BaseModule)`, BaseModule a LightningModule in base.py; the precision in a
    dict given as `Trainer(**config)`."""
    line = finding(check(write(tmp_path, LIGHTNING)).stdout, LIGHTNING_STEP)
    assert line.endswith(
        "(a LightningModule step, run under float16 autocast by Lightning's "
        '`Trainer(precision="16-mixed")`)'
    )


def test_trainer_config_without_precision_is_no_region(tmp_path: Path) -> None:
    files = dict(LIGHTNING)
    files["train.py"] = files["train.py"].replace('"precision": "16-mixed", ', "")
    result = check(write(tmp_path, files))
    assert (result.stdout, result.returncode) == ("", 0), result.stderr


def test_trainer_config_with_bf16_keeps_minus_1e9(tmp_path: Path) -> None:
    files = dict(LIGHTNING)
    files["train.py"] = files["train.py"].replace('"16-mixed"', '"bf16-mixed"')
    result = check(write(tmp_path, files))
    assert (result.stdout, result.returncode) == ("", 0), result.stderr


# --- library mode: more than forward --------------------------------------------------------

LIBRARY = {
    "ops.py": """
        import torch
        from torch import nn


        def masked_scores(q, k, mask):
            scores = torch.matmul(q, k.transpose(-2, -1))
            return scores.masked_fill(mask, -1e9)


        def _private_scores(q, k, mask):
            return torch.matmul(q, k).masked_fill(mask, -1e9)


        class Pooler:
            def __init__(self):
                self.proj = nn.Linear(8, 8)

            def pool(self, x, mask):
                h = self.proj(x)
                return h.masked_fill(mask, -1e9).amax(1)
        """,
    "encoders.py": """
        from torch import nn


        class Encoder(nn.Module):
            def forward(self, x):
                return self._encode(x)

            def _encode(self, x):
                return x


        class MaskedEncoder(Encoder):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def _encode(self, x):
                h = self.proj(x)
                return h.masked_fill(h < 0, -1e9)
        """,
}


def test_library_mode_runs_public_functions_plain_classes_and_overrides(tmp_path: Path) -> None:
    project = write(tmp_path, LIBRARY)
    result = check(project, *LIBRARY_FP16)
    assert positions(result.stdout) == [
        "encoders.py:19:16: AMP101",  # MaskedEncoder._encode, run by the inherited forward
        "ops.py:7:12: AMP101",  # a public function
        "ops.py:20:16: AMP101",  # a method of a plain (non-Module) class
    ], result.stderr
    assert finding(result.stdout, "encoders.py:19:16: AMP101").endswith("(via encoders.py:6)")
    assert finding(result.stdout, "ops.py:7:12: AMP101").endswith(
        "(`masked_scores` analysed under cuda float16 autocast (library mode))"
    )
    # Default mode assumes no region at all.
    default = check(project)
    assert (default.stdout, default.returncode) == ("", 0), default.stderr


def test_library_mode_in_bfloat16_keeps_minus_1e9(tmp_path: Path) -> None:
    result = check(write(tmp_path, LIBRARY), "--assume-autocast", "bfloat16")
    assert (result.stdout, result.returncode) == ("", 0), result.stderr


def test_dispatch_expected_output_is_what_the_tests_above_read() -> None:
    """The two findings the dispatch tests above pick out are the whole expected output."""
    assert positions(expected(DISPATCH)) == [DETECTOR, SET_LOSS]


LOSS_CLASSES = {
    "train.py": """
        import torch

        import nets


        def step(build, cfg, x, y):
            model = build(cfg.model)
            criterion = build(cfg.loss)
            with torch.autocast("cuda", dtype=torch.float16):
                out = model(x)
                return CALL
        """,
    "nets.py": """
        import torch
        from torch import nn


        class DiceLoss(nn.Module):
            def forward(self, logits, target):
                p = logits.sigmoid()
                return 1 - (2 * p * target).sum() / torch.log(p + 1e-10).sum()
        """,
}


def test_a_model_call_does_not_run_the_projects_losses(tmp_path: Path) -> None:
    """`model(x)` may be any of the project's modules, but not one named as a loss or a
    metric; `criterion(out, y)` may be."""
    files = dict(LOSS_CLASSES)
    files["train.py"] = files["train.py"].replace("CALL", "out.sum()")
    result = check(write(tmp_path / "model_call", files))
    assert (result.stdout, result.returncode) == ("", 0), result.stderr
    files["train.py"] = LOSS_CLASSES["train.py"].replace("CALL", "criterion(out, y)")
    result = check(write(tmp_path / "loss_call", files))
    assert positions(result.stdout) == ["nets.py:8:55: AMP102"], result.stderr
    assert "where `criterion(out, y)` calls a loss amp-lint cannot resolve" in result.stdout
