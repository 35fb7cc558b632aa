"""The claims checked by running them (amp_lint.verify.claims): each experiment does, on this
torch, what the claims page says it does. Needs torch and pytest only.

Every expectation was measured: CPU on torch 2.13.0+cpu (and 2.11.0), CUDA on an H100 with torch
2.11.0+cu130 and torchmetrics 1.9.0. Each CUDA one also follows from CUDA's autocast lists (pow,
sum, softmax and the losses in float32; in-place and unlisted ops in the autocast dtype;
binary_cross_entropy refused).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

try:
    import amp_lint  # noqa: F401
except ImportError:  # torch and pytest only, as on the GPU machines
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from amp_lint.verify import claim_extension, claims  # noqa: E402
from amp_lint.verify.outcomes import Expectation, Outcome  # noqa: E402

DTYPES = ("float16", "bfloat16")
INDEX_PUT = "raised: RuntimeError: Index put requires the source and destination dtypes match"
BCE_REFUSED = (
    "raised: RuntimeError: torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are "
    "unsafe to autocast"
)

#: (experiment, device) -> expected outcome per dtype (float16, bfloat16); None: too close to
#: the tolerance to assert (reported, not checked).
EXPECTED: dict[tuple[str, str], tuple[str | None, str | None]] = {
    # 1. A scalar mask write is fine; a float32 source is what raises.
    ("mask-write-zero", "cpu"): ("clean", "clean"),
    ("mask-write-zero", "cuda"): ("clean", "clean"),
    ("mask-write-float32-source", "cpu"): (INDEX_PUT, INDEX_PUT),
    ("mask-write-float32-source", "cuda"): (INDEX_PUT, INDEX_PUT),
    # 2. Indexing does not depend on the dtype.
    ("index-half-output", "cpu"): ("clean", "clean"),
    ("index-half-output", "cuda"): ("clean", "clean"),
    # 3. CPU autocast leaves pow and sum in float16; CUDA runs them in float32, but not x * x.
    ("pow-sum-autocast", "cpu"): ("nonfinite", "clean"),
    ("pow-sum-autocast", "cuda"): ("clean", "clean"),
    ("mul-sum-autocast", "cpu"): ("nonfinite", "clean"),
    ("mul-sum-autocast", "cuda"): ("nonfinite", "clean"),
    ("pow-sum-converted-model", "cpu"): ("nonfinite", "clean"),
    ("pow-sum-converted-model", "cuda"): ("nonfinite", "clean"),
    # 4. The eps underflows to 0 (0 / 0); dividing by 1e-3 overflows.
    ("std-eps-dead-unit", "cpu"): ("nonfinite", "clean"),
    ("std-eps-dead-unit", "cuda"): ("nonfinite", "clean"),
    ("divide-by-1e-3", "cpu"): ("nonfinite", "clean"),
    ("divide-by-1e-3", "cuda"): ("nonfinite", "clean"),
    # 5. CPU float16: sum(x ** 2) overflows on 0..255 images, the eps vanishes on black regions,
    # bright images overflow SSIM's mu_x² + mu_y²; bfloat16 loses SSIM's variance.
    ("lpips-8bit", "cpu"): ("wrong", "clean"),
    ("lpips-unit", "cpu"): ("clean", "clean"),
    ("lpips-unit-black-region", "cpu"): ("nonfinite", "clean"),
    ("ssim-8bit", "cpu"): ("clean", "clean"),
    ("ssim-8bit-bright", "cpu"): ("nonfinite", "wrong"),
    ("ssim-unit", "cpu"): ("clean", "clean"),
    ("torchmetrics-ssim-8bit", "cpu"): ("clean", "clean"),
    ("torchmetrics-ssim-8bit-bright", "cpu"): ("nonfinite", "wrong"),  # 0.23 in bfloat16
    # CUDA runs pow and sum in float32, which keeps LPIPS's norms finite and its eps; SSIM's
    # overflow and cancellation come from convolutions and products, which CUDA autocast keeps
    # in the low dtype.
    ("lpips-8bit", "cuda"): ("clean", "clean"),
    ("lpips-unit", "cuda"): ("clean", "clean"),
    ("lpips-unit-black-region", "cuda"): ("clean", "clean"),
    ("ssim-8bit", "cuda"): ("clean", "clean"),
    ("ssim-8bit-bright", "cuda"): ("nonfinite", "wrong"),
    ("ssim-unit", "cuda"): ("clean", "clean"),
    ("torchmetrics-ssim-8bit", "cuda"): ("clean", "clean"),
    ("torchmetrics-ssim-8bit-bright", "cuda"): ("nonfinite", None),  # bfloat16: 0.06, "wrong"
    # Statistics (claim_sets/statistics.py): autocast lowers conv2d whatever its inputs, so
    # E[x²] - E[x]² cancels on smooth images; torch.var accumulates in float32. The CUDA rows
    # are predicted from CUDA's autocast list (conv2d lowered, var unlisted), not yet run.
    ("ssim-hand-float-inputs", "cpu"): ("wrong", "wrong"),
    ("ssim-hand-float-inputs", "cuda"): ("wrong", "wrong"),
    ("ssim-hand-autocast-off", "cpu"): ("clean", "clean"),
    ("ssim-hand-autocast-off", "cuda"): ("clean", "clean"),
    ("local-std-hand", "cpu"): ("nonfinite", "nonfinite"),
    ("local-std-hand", "cuda"): ("nonfinite", "nonfinite"),
    ("torch-var-half-output", "cpu"): ("clean", "clean"),
    ("torch-var-half-output", "cuda"): ("clean", "clean"),
    ("hand-var-half-output", "cpu"): ("wrong", "wrong"),
    ("hand-var-half-output", "cuda"): ("wrong", "wrong"),
    # 6. (when a compiler is there) the kernel has no Half case; custom_fwd casts to float32.
    ("extension-float-only", "cpu"): (
        "raised: NotImplementedError: \"square_cpu\" not implemented for 'Half'",
        "raised: NotImplementedError: \"square_cpu\" not implemented for 'BFloat16'",
    ),
    ("extension-float-only", "cuda"): (
        "raised: NotImplementedError: \"square_cuda\" not implemented for 'Half'",
        "raised: NotImplementedError: \"square_cuda\" not implemented for 'BFloat16'",
    ),
    ("extension-custom-fwd", "cpu"): ("clean", "clean"),
    ("extension-custom-fwd", "cuda"): ("clean", "clean"),
    # 7. Nothing crashes in backward. CUDA refuses BCE in the forward; a loss left in float16
    # gets the scale (65536) as its gradient, which is inf in float16.
    ("cross-entropy-plus-bce", "cpu"): ("clean", "clean"),
    ("cross-entropy-plus-bce", "cuda"): (BCE_REFUSED, BCE_REFUSED),
    ("cross-entropy-plus-bce-with-logits", "cpu"): ("clean", "clean"),
    ("cross-entropy-plus-bce-with-logits", "cuda"): ("clean", "clean"),
    ("cross-entropy-plus-mse-loss", "cpu"): ("clean", "clean"),
    ("cross-entropy-plus-mse-loss", "cuda"): ("clean", "clean"),
    ("cross-entropy-plus-hand-written-mse", "cpu"): ("clean", "clean"),
    ("cross-entropy-plus-hand-written-mse", "cuda"): ("clean", "clean"),
    ("cross-entropy-plus-half-penalty", "cpu"): ("nonfinite", "clean"),
    ("cross-entropy-plus-half-penalty", "cuda"): ("nonfinite", "clean"),
    # 8. bfloat16's range keeps tiny gradients; its 8 bits lose small updates of bfloat16 weights
    # (CUDA rows predicted: the same round-to-nearest when the optimizer writes the weight).
    ("tiny-gradients-under-autocast", "cpu"): ("wrong", "clean"),
    ("tiny-gradients-under-autocast", "cuda"): ("wrong", "clean"),
    ("half-params-adamw-small-updates", "cpu"): ("wrong", "wrong"),
    ("half-params-adamw-small-updates", "cuda"): ("wrong", "wrong"),
    ("float32-params-under-autocast", "cpu"): ("clean", "clean"),
    ("float32-params-under-autocast", "cuda"): ("clean", "clean"),
    ("half-params-float32-master-copy", "cpu"): ("clean", "clean"),
    ("half-params-float32-master-copy", "cuda"): ("clean", "clean"),
    # Casts (claim_sets/casts.py): `.float()` operands of a matmul are cast back by autocast,
    # of elementwise ops not; autocast disabled keeps them. CUDA rows predicted from CUDA's
    # table (matmul lower precision, mul unlisted, sum float32), not run.
    ("float-operands-matmul", "cpu"): ("nonfinite", "wrong"),
    ("float-operands-matmul", "cuda"): ("nonfinite", "wrong"),
    ("float-operands-elementwise", "cpu"): ("clean", "clean"),
    ("float-operands-elementwise", "cuda"): ("clean", "clean"),
    ("float-operands-autocast-disabled", "cpu"): ("clean", "clean"),
    ("float-operands-autocast-disabled", "cuda"): ("clean", "clean"),
    # FSDP (claim_sets/fsdp.py; dtype is the policy's): a float16 backward flushes 1e-8
    # gradients under fully_shard, a GradScaler keeps them; a float16 reduction pre-divided by
    # 8 loses 1e-7 gradients but not 1e-3 ones. CUDA rows predicted (same arithmetic), not run.
    ("fully-shard-small-gradients", "cpu"): ("wrong", "clean"),
    ("fully-shard-small-gradients", "cuda"): ("wrong", "clean"),
    ("fully-shard-grad-scaler", "cpu"): ("clean", "clean"),
    ("fully-shard-grad-scaler", "cuda"): ("clean", "clean"),
    ("fsdp-reduce-small-gradients", "cpu"): ("wrong", "clean"),
    ("fsdp-reduce-small-gradients", "cuda"): ("wrong", "clean"),
    ("fsdp-reduce-typical-gradients", "cpu"): ("clean", "clean"),
    ("fsdp-reduce-typical-gradients", "cuda"): ("clean", "clean"),
    # 9. GradScaler (claim_sets/scaler.py): a second step doubles the update and applies what
    # scaler.step skipped; a clip after the step changes nothing; a scaler without autocast
    # trains exactly as float32. CUDA rows predicted (the scaler's logic is the same), not run.
    ("optimizer-step-after-scaler-step", "cpu"): ("wrong", "wrong"),
    ("optimizer-step-after-scaler-step", "cuda"): ("wrong", "wrong"),
    ("optimizer-step-after-skipped-scaler-step", "cpu"): ("nonfinite", "nonfinite"),
    ("optimizer-step-after-skipped-scaler-step", "cuda"): ("nonfinite", "nonfinite"),
    ("clip-after-scaler-step", "cpu"): ("wrong", "wrong"),
    ("clip-after-scaler-step", "cuda"): ("wrong", "wrong"),
    ("grad-scaler-without-autocast", "cpu"): ("clean", "clean"),
    ("grad-scaler-without-autocast", "cuda"): ("clean", "clean"),
}

#: Experiments that may report "not run" (a missing compiler or package).
OPTIONAL = {
    "extension-float-only",
    "extension-custom-fwd",
    "torchmetrics-ssim-8bit",
    "torchmetrics-ssim-8bit-bright",
}

DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=pytest.mark.skipif(
            not torch.cuda.is_available(), reason="no CUDA device: the GPU run checks these"
        ),
    ),
]


@pytest.fixture(scope="module", params=DEVICES)
def rows(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return claims.run_claims([request.param], list(DTYPES))


def test_every_experiment_ran_once_per_dtype(rows: list[dict[str, Any]]) -> None:
    names = [(e.name, dtype) for c in claims.CLAIMS for e in c.experiments for dtype in DTYPES]
    assert [(row["experiment"], row["dtype"]) for row in rows] == names
    json.dumps(rows)  # the report is JSON


def test_outcomes_are_as_measured(rows: list[dict[str, Any]]) -> None:
    failures = []
    for row in rows:
        outcome = row["outcome"]
        if outcome["kind"] == claims.NOT_RUN:
            assert row["experiment"] in OPTIONAL, row
            continue
        spec = EXPECTED[row["experiment"], row["device"]][DTYPES.index(row["dtype"])]
        if spec is None:
            continue
        expected = Expectation.parse(spec)
        if not expected.matches(Outcome(**outcome)):
            failures.append(f"{row['experiment']} {row['dtype']}: expected {expected}, {outcome}")
    assert not failures, "\n".join(failures)


def test_the_extension_builds_where_a_compiler_is() -> None:
    from torch.utils import cpp_extension

    if shutil.which(os.environ.get("CXX", "c++")) is None:
        pytest.skip("no C++ compiler")
    try:
        cpp_extension.verify_ninja_availability()
    except RuntimeError:
        pytest.skip("ninja is not installed")
    assert claim_extension.extension_missing("cpu") == ""


def test_claims_are_well_formed() -> None:
    kebab = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
    keys = [claim.key for claim in claims.CLAIMS]
    names = [e.name for claim in claims.CLAIMS for e in claim.experiments]
    assert len(set(keys)) == len(keys) and len(set(names)) == len(names)
    for claim in claims.CLAIMS:
        assert kebab.match(claim.key) and claim.claim and claim.experiments
        assert claim.source == "" or claim.source.startswith("https://")
        for experiment in claim.experiments:
            assert kebab.match(experiment.name) and experiment.ran
            assert bool(experiment.needs) == (experiment.name in OPTIONAL)
    for device in ("cpu", "cuda"):
        assert {name for name, where in EXPECTED if where == device} == set(names)


def test_missing_ninja_is_reported_as_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    from torch.utils import cpp_extension

    def no_ninja() -> None:
        raise RuntimeError("Ninja is required to load C++ extensions")

    monkeypatch.setattr(claim_extension, "_built", {})
    monkeypatch.setattr(claim_extension.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(cpp_extension, "verify_ninja_availability", no_ninja)
    experiment = _experiment("extension-float-only")
    outcomes = claims.run_experiment(experiment, "cpu", list(DTYPES))
    assert outcomes == [{"kind": "not run", "detail": "ninja is not installed", "error": None}] * 2


def test_a_failed_build_is_reported_as_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    from torch.utils import cpp_extension

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("Error building extension 'amp_lint_claims_cpu'\nmore output")

    monkeypatch.setattr(claim_extension, "_built", {})
    monkeypatch.setattr(claim_extension.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(cpp_extension, "verify_ninja_availability", lambda: None)
    monkeypatch.setattr(cpp_extension, "load_inline", broken)
    [outcome] = claims.run_experiment(_experiment("extension-custom-fwd"), "cpu", ["float16"])
    assert outcome["kind"] == "not run"
    assert outcome["detail"] == (
        "build failed: RuntimeError: Error building extension 'amp_lint_claims_cpu'"
    )


def _experiment(name: str) -> claims.Experiment:
    [experiment] = [e for c in claims.CLAIMS for e in c.experiments if e.name == name]
    return experiment


def test_a_lock_left_by_a_killed_build_is_removed(tmp_path: Path) -> None:
    """torch's extension builder waits without end while its `lock` file exists: one left by
    a process killed mid-build hung every later run (seen: the suite in CI, after a killed
    run). A lock older than any build is removed; a fresh one, another build's, is kept."""
    lock = tmp_path / "lock"
    lock.touch()
    claim_extension._remove_stale_lock(tmp_path)
    assert lock.exists()
    old = time.time() - claim_extension.STALE_LOCK_SECONDS - 60
    os.utime(lock, (old, old))
    claim_extension._remove_stale_lock(tmp_path)
    assert not lock.exists()
    claim_extension._remove_stale_lock(tmp_path)  # nothing there: no error
