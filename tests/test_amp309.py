"""AMP309 fsdp-fp16-without-sharded-scaler: its messages beyond the fixtures, and the
two-rank measurements its documentation quotes (a plain GradScaler with FSDP1, a float16
gradient reduction), rerun on CPU with gloo so that the numbers stay true."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from runners import amp_lint

from amp_lint.findings import Finding
from amp_lint.run.engine import lint_source
from amp_lint.settings.config import Config

CONFIG = Config(select=("AMP309",))


def lint(source: str) -> list[Finding]:
    return lint_source(textwrap.dedent(source).encode(), "example.py", CONFIG)


def test_a_policy_chosen_from_two_reports_only_the_float16_one() -> None:
    findings = lint(
        """
        import torch
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, MixedPrecision

        def train(model, args, loader, optimizer):
            fp16 = MixedPrecision(param_dtype=torch.float16)
            bf16 = MixedPrecision(param_dtype=torch.bfloat16)
            model = FSDP(model, mixed_precision=fp16 if args.fp16 else bf16)
            for x in loader:
                model(x).sum().backward()
                optimizer.step()
        """
    )
    assert [f.line for f in findings] == [6]
    assert "(given to `FSDP(model, " in findings[0].message
    assert "line 8)" in findings[0].message


def test_fsdp2_is_told_a_plain_grad_scaler_works() -> None:
    [finding] = lint(
        """
        import torch
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        def train(model, batch):
            fully_shard(model, mp_policy=MixedPrecisionPolicy(param_dtype=torch.float16))
            model(batch).sum().backward()
        """
    )
    assert "`torch.amp.GradScaler`" in finding.message
    assert "ShardedGradScaler" not in finding.message


def test_a_float16_reduction_of_float32_gradients_says_so() -> None:
    [finding] = lint(
        """
        import torch
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, MixedPrecision

        def train(model, batch):
            policy = MixedPrecision(reduce_dtype=torch.float16)
            model = FSDP(model, mixed_precision=policy)
            model(batch).sum().backward()
        """
    )
    assert "reduce the gradients across ranks in float16" in finding.message
    assert "`reduce_dtype=torch.float32`" in finding.message


def test_keep_low_precision_grads_names_the_unscale_error() -> None:
    [finding] = lint(
        """
        import torch
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, MixedPrecision

        policy = MixedPrecision(param_dtype=torch.float16, keep_low_precision_grads=True)
        model = FSDP(model, mixed_precision=policy)
        scaler = torch.cuda.amp.GradScaler()
        """
    )
    assert finding.line == 7
    assert '"ValueError: Attempting to unscale FP16 gradients."' in finding.message


@pytest.mark.parametrize(
    "source",
    [
        # A dtype from configuration is not known.
        "FSDP(model, mixed_precision=MixedPrecision(param_dtype=cfg.dtype))",
        # A policy from another module is not followed in a file linted on its own.
        "FSDP(model, mixed_precision=policies.fpSixteen)",
        # FSDP2 with a plain GradScaler is fine.
        "fully_shard(model, mp_policy=MixedPrecisionPolicy(param_dtype=torch.float16))\n"
        "scaler = torch.amp.GradScaler('cuda')",
    ],
)
def test_what_stays_clean(source: str) -> None:
    header = (
        "import torch\n"
        "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n"
        "from torch.distributed.fsdp import MixedPrecision, MixedPrecisionPolicy, fully_shard\n"
    )
    code = header + source + "\nmodel(x).sum().backward()\n"
    assert lint_source(code.encode(), "example.py", CONFIG) == []


# Two ranks on CPU (gloo, a file store: no port), one run of each probe per rank. FSDP1
# FULL_SHARD with a float16 policy; rank 1 alone gets an inf in its gradient shard at step 0.
TWO_RANKS = r"""
import json, os, sys
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, MixedPrecision
from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler


def scalers(rank):
    found = {}
    for name, cls in (("plain", torch.amp.GradScaler), ("sharded", ShardedGradScaler)):
        torch.manual_seed(0)
        model = FSDP(torch.nn.Linear(8, 8), device_id=torch.device("cpu"),
                     mixed_precision=MixedPrecision(param_dtype=torch.float16))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
        scaler = cls("cpu", init_scale=1024.0)
        for step in range(2):
            optimizer.zero_grad()
            scaler.scale(model(torch.full((4, 8), 0.1)).float().sum()).backward()
            if step == 0 and rank == 1:
                for p in model.parameters():
                    p.grad[0] = float("inf")
            scaler.unscale_(optimizer)
            grad = [p.grad[1].item() for p in model.parameters()][0]
            scaler.step(optimizer)
            scaler.update()
        found[name] = {"scale": scaler.get_scale(), "grad": grad}
    return found


def reductions(rank):
    found = {}
    for name, dtype in (("float32", torch.float32), ("float16", torch.float16)):
        torch.manual_seed(0)
        model = FSDP(torch.nn.Linear(8, 8), device_id=torch.device("cpu"),
                     mixed_precision=MixedPrecision(param_dtype=torch.float32, reduce_dtype=dtype))
        (model(torch.ones(4, 8)).sum() * (2e-8 if rank == 0 else 1e-8)).backward()
        grad = next(iter(model.parameters())).grad
        found[name] = {"first": grad[0].item(), "zeros": int((grad == 0).sum()), "n": grad.numel()}
    return found


def worker(rank, store, out):
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    try:
        result = {"scalers": scalers(rank), "reductions": reductions(rank)}
    finally:
        dist.destroy_process_group()
    with open(f"{out}.{rank}", "w") as file:
        json.dump(result, file)


if __name__ == "__main__":
    store, out = sys.argv[1], sys.argv[2]
    mp.start_processes(worker, args=(store, out), nprocs=2, start_method="spawn")
"""


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, dict[str, dict]]]:
    pytest.importorskip("torch.distributed.fsdp")
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    directory = tmp_path_factory.mktemp("two_ranks")
    script = directory / "two_ranks.py"
    script.write_text(TWO_RANKS)
    out = directory / "result"
    subprocess.run(
        [sys.executable, str(script), str(directory / "store"), str(out)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return [json.loads(Path(f"{out}.{rank}").read_text()) for rank in (0, 1)]


def test_a_plain_grad_scaler_lets_the_ranks_scales_drift_apart(
    two_ranks: list[dict[str, dict[str, dict]]],
) -> None:
    plain = [rank["scalers"]["plain"] for rank in two_ranks]
    sharded = [rank["scalers"]["sharded"] for rank in two_ranks]
    # Only rank 1 saw the inf: it halved its scale, rank 0 kept its own.
    assert [r["scale"] for r in plain] == [1024.0, 512.0]
    assert [r["scale"] for r in sharded] == [512.0, 512.0]
    # The next step's unscaled gradients: x0.75 and x1.5 of the right ones.
    right = sharded[0]["grad"]
    assert sharded[1]["grad"] == right
    assert plain[0]["grad"] / right == pytest.approx(0.75, rel=2e-3)
    assert plain[1]["grad"] / right == pytest.approx(1.5, rel=2e-3)


def test_a_float16_reduction_flushes_gradients_of_6e_8(
    two_ranks: list[dict[str, dict[str, dict]]],
) -> None:
    for rank in two_ranks:
        float32, float16 = rank["reductions"]["float32"], rank["reductions"]["float16"]
        assert float32["first"] == pytest.approx(6e-8, rel=1e-3)
        assert float32["zeros"] == 0
        assert float16["zeros"] == float16["n"]


# A policy imported from another file of the project (the llama-recipes layout)

POLICIES = """\
import torch
from torch.distributed.fsdp import MixedPrecision

fpSixteen = MixedPrecision(param_dtype=torch.float16, reduce_dtype=torch.float16)
bfSixteen = MixedPrecision(param_dtype=torch.bfloat16)


def get_policies(cfg):
    return fpSixteen if cfg.fp16 else bfSixteen
"""

TRAINING = """\
import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

{imports}


def main(model, loader, optimizer, args):
    model = FSDP(model, mixed_precision={policy})
    for x in loader:
        model(x).sum().backward()
        optimizer.step()
"""


def _project(tmp_path: Path, imports: str, policy: str) -> Path:
    package = tmp_path / "policies"
    package.mkdir()
    (package / "__init__.py").write_text("from .mixed_precision import *\n")
    (package / "mixed_precision.py").write_text(POLICIES)
    (tmp_path / "train.py").write_text(TRAINING.format(imports=imports, policy=policy))
    return tmp_path


@pytest.mark.parametrize(
    ("imports", "policy"),
    [
        ("from policies import fpSixteen", "fpSixteen"),
        ("from policies.mixed_precision import fpSixteen as fp16", "fp16"),
        ("from policies import bfSixteen, fpSixteen", "fpSixteen if args.fp16 else bfSixteen"),
    ],
)
def test_a_float16_policy_imported_from_the_project_is_followed(
    tmp_path: Path, imports: str, policy: str
) -> None:
    project = _project(tmp_path, imports, policy)
    result = amp_lint(project, "check", "--select", "AMP309", "--format", "json", ".")
    [finding] = json.loads(result.stdout)
    assert finding["path"].endswith("train.py")
    assert finding["line"] == 8  # the FSDP call's `mixed_precision=` argument
    assert "(`MixedPrecision(param_dtype=torch.floa" in finding["message"]
    assert "mixed_precision.py:4)" in finding["message"]


@pytest.mark.parametrize(
    ("imports", "policy"),
    [
        ("from policies import bfSixteen", "bfSixteen"),
        # Built by a function: not followed.
        ("from policies import get_policies", "get_policies(args)"),
    ],
)
def test_other_imported_policies_stay_clean(tmp_path: Path, imports: str, policy: str) -> None:
    project = _project(tmp_path, imports, policy)
    result = amp_lint(project, "check", "--select", "AMP309", "--format", "json", ".")
    assert json.loads(result.stdout) == []


def test_a_load_only_wrap_beside_a_trained_one_stays_clean() -> None:
    findings = lint(
        """
        import torch
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, MixedPrecision

        def test_save_load(make_model, checkpointer, batch):
            bf16 = MixedPrecision(param_dtype=torch.bfloat16)
            fp16 = MixedPrecision(param_dtype=torch.float16)
            model = FSDP(make_model(), mixed_precision=bf16)
            model(batch).sum().backward()
            checkpointer.save(model)
            model_new = FSDP(make_model(), mixed_precision=fp16)
            checkpointer.load(model_new)
        """
    )
    assert findings == []
