"""Print, as JSON, the autocast kernels that the importable torch registers, per dispatch key.

Run it with the Python of the torch release to inspect (any build; a CUDA build imports on a
machine without a GPU once its nvidia packages are installed). The generator
(`generate.py`) reads this output to find ops registered outside the header's macros, and
the truth test reads the same registrations of the torch it runs against.
"""

from __future__ import annotations

import json
import sys

import torch

KEYS = ("AutocastCPU", "AutocastCUDA", "AutocastXPU", "AutocastMPS")
# The kernels GradScaler needs, and the backends whose kernels it may find for them.
SCALER_OPS = ("_amp_foreach_non_finite_check_and_unscale_", "_amp_update_scale_")
BACKENDS = ("CPU", "CUDA", "MPS", "XPU")
AUTOCAST_DEVICES = ("cpu", "cuda", "mps", "xpu")


def base_names(key: str) -> list[str]:
    try:
        registrations = torch._C._dispatch_get_registrations_for_dispatch_key(key)
    except (RuntimeError, AttributeError):  # a key this release does not have
        return []
    names = set()
    for entry in registrations:
        name = entry.split("::", 1)[-1].split(".", 1)[0]
        if entry.startswith("aten::"):
            names.add(name)
    return sorted(names)


def scaler_kernels() -> dict[str, list[str]]:
    """op -> the backends with a kernel for it (GradScaler on that device needs both ops)."""
    has_kernel = getattr(torch._C, "_dispatch_has_kernel_for_dispatch_key", None)
    if has_kernel is None:
        return {}
    return {op: [key for key in BACKENDS if has_kernel(f"aten::{op}", key)] for op in SCALER_OPS}


def autocast_available() -> dict[str, bool]:
    check = getattr(torch.amp.autocast_mode, "is_autocast_available", None)
    return {device: bool(check(device)) if check else False for device in AUTOCAST_DEVICES}


def main() -> None:
    json.dump(
        {
            "torch_version": torch.__version__,
            "git_version": getattr(torch.version, "git_version", ""),
            "cuda": torch.version.cuda,
            "registrations": {key: base_names(key) for key in KEYS},
            "scaler_kernels": scaler_kernels(),
            "autocast_available": autocast_available(),
        },
        sys.stdout,
        indent=1,
        sort_keys=True,
    )
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
