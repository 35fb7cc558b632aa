"""AMP402 amp-unsupported-on-target-torch: MPS autocast or GradScaler on a torch release that
the project supports but that lacks them."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from amp_lint.analysis.regions.finder import (
    accelerate_settings,
    grad_scaler_device,
    region_from_call,
)
from amp_lint.analysis.scaler.names import all_calls
from amp_lint.analysis.syntax.module import ModuleFacts
from amp_lint.analysis.values.optables import OpTables, load_op_tables
from amp_lint.rules.base import Report, Rule
from amp_lint.settings.torch_version import TorchVersion, format_torch_version

_NO_MPS_AUTOCAST = "\"User specified an unsupported autocast device_type 'mps'\""
_MPS_DTYPE_DISABLED = (
    '"In MPS autocast, but the target dtype is not supported. Disabling autocast."'
)
_NO_MPS_SCALER = (
    "\"The operator 'aten::_amp_foreach_non_finite_check_and_unscale_' is not currently "
    'implemented for the MPS device"'
)


class AmpUnsupportedOnTargetTorch(Rule):
    code = "AMP402"
    name = "amp-unsupported-on-target-torch"
    summary = (
        "Checks for MPS autocast and GradScaler uses that the oldest torch the project "
        "supports (`torch-version`) does not have."
    )
    why = """\
Mixed precision on Apple GPUs arrived over several releases, read from each release's own
files (`tools/optables/generate.py`: `torch/amp/autocast_mode.py` of the wheel, and the MPS
kernels of the macOS wheel):

* torch 2.4: `torch.autocast("mps")` raises
  `RuntimeError: User specified an unsupported autocast device_type 'mps'`;
* torch 2.5: float16 runs; `dtype=torch.bfloat16` warns "In MPS autocast, but the target dtype
  is not supported. Disabling autocast." and runs the region in float32;
* torch 2.6 and newer: float16 and bfloat16 run (bfloat16 on macOS 14 or newer);
* `GradScaler("mps")`: the macOS wheels have MPS kernels for its unscale and update ops from
  torch 2.8 only; before, its first `unscale_` or `step` raises.

A project that declares support for an older release (`torch>=2.4` in its dependencies, a
`requirements.txt` pin, or `torch-version`) fails there, or, worse, trains its "mixed
precision" run entirely in float32 without saying so. The GradScaler failure is
`NotImplementedError: The operator 'aten::_amp_foreach_non_finite_check_and_unscale_' is
not currently implemented for the MPS device`, at the first `unscale_` or `step`. Unset,
`torch-version` means the newest torch, where everything here runs: the rule then says
nothing. While it reports a region, amp-lint treats that region as disabled (float32)."""
    example = """\
import torch

model = torch.nn.Linear(8, 8).to("mps")
with torch.autocast("mps", dtype=torch.bfloat16):
    out = model(torch.randn(4, 8, device="mps"))
"""
    fixed_example = """\
import torch

model = torch.nn.Linear(8, 8).to("mps")
with torch.autocast("mps", dtype=torch.float16):
    out = model(torch.randn(4, 8, device="mps"))
"""
    # The examples hold on torch 2.5 (`amp-lint check --torch-version 2.5`).
    example_arguments = ("--torch-version", "2.5")
    fix_safety = """\
There is no automatic fix: raising the supported torch is the project's decision. Otherwise
use `dtype=torch.float16` on torch 2.5, and skip the GradScaler on MPS before 2.8 (bfloat16
needs none)."""
    known_limitations = """\
Only a literal `"mps"` device is checked. The examples are checked with
`--torch-version 2.5`. bfloat16 on MPS also needs macOS 14, which no project file states, so
that case is not reported. The rule has no runtime evidence from our machines (no Apple GPU):
its table is read from each release's files, as above."""
    # MPS only: nothing to run on the CPU and CUDA machines that produce the evidence.
    runtime_evidence = False
    vocabulary = (b"mps",)

    def check_module(self, facts: ModuleFacts) -> Iterator[Report]:
        target = facts.config.torch_version
        if target is None:
            return
        tables = load_op_tables()
        accelerate = accelerate_settings(facts.module, facts.names)
        for call in all_calls(facts.module):
            region = region_from_call(call, facts.names, accelerate)
            if region is not None and region.device == "mps":
                report = _autocast_report(call, region.dtype, tables, target)
                if report is not None:
                    yield report
                continue
            is_scaler, device = grad_scaler_device(call, facts.names)
            if is_scaler and device == "mps" and not tables.mps_grad_scaler:
                yield _scaler_report(call, target)


def _autocast_report(
    call: cst.Call, dtype: str | None, tables: OpTables, target: TorchVersion
) -> Report | None:
    release = format_torch_version(target)
    if not tables.mps_autocast_dtypes:
        message = (
            f'`torch.autocast("mps")` raises {_NO_MPS_AUTOCAST} on torch {release} (the '
            "project's torch-version): MPS autocast needs torch 2.5 (float16) or 2.6 "
            "(bfloat16); raise the supported torch or leave MPS out of autocast"
        )
        summary = f"MPS autocast raises on torch {release}; it needs torch 2.5"
        return Report(call, message, None, summary=summary)
    if dtype is None or dtype in tables.mps_autocast_dtypes:
        return None
    message = (
        f'`torch.autocast("mps", dtype={dtype})` warns {_MPS_DTYPE_DISABLED} on torch '
        f"{release} (the project's torch-version) and runs the region in float32: MPS "
        f"autocast takes only {', '.join(sorted(tables.mps_autocast_dtypes))} there; use "
        f"that dtype or require torch 2.6"
    )
    summary = f"MPS {dtype} autocast is silently disabled on torch {release}; needs torch 2.6"
    return Report(call, message, None, summary=summary)


def _scaler_report(call: cst.Call, target: TorchVersion) -> Report:
    release = format_torch_version(target)
    message = (
        f"`GradScaler` on MPS: its `unscale_`/`step` raise NotImplementedError {_NO_MPS_SCALER} "
        f"on torch {release} (the project's torch-version); GradScaler on MPS needs torch 2.8; "
        "train in bfloat16 without a scaler or require torch 2.8"
    )
    summary = f"GradScaler on MPS raises NotImplementedError on torch {release}; needs 2.8"
    return Report(call, message, None, summary=summary)
