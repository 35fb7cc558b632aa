"""tools/optables/generate.py without the network: how it reads a release's header, its
autocast_mode.py and its registrations, and that it refuses registrations no list explains.
The committed tables themselves are checked against each installed release by
tests/test_optables.py (tools/optables/check_releases.sh runs it under every release)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
TABLES = ROOT / "src" / "amp_lint" / "data" / "autocast_ops"
REGISTRATIONS = ROOT / "tools" / "optables" / "registrations"

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")


@pytest.fixture(scope="module")
def generate() -> ModuleType:
    name = "amp_lint_tools_optables_generate"
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools/optables/generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


HEADER = """\
#define AT_FORALL_LOWER_PRECISION_FP(_)  \\
  _(_convolution, deprecated)            \\
  _(conv1d)                              \\
  _(mm)

#define AT_FORALL_FP32(_) \\
  _(acos)                 \\
  _(rms_norm)

#define AT_FORALL_FP32_SET_OPT_DTYPE(_) \\
  _(softmax)                            \\
  _(sum, dim_IntList)

#define AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(_)                  \\
  _(ADD_NS(norm),                                                    \\
    "norm.Scalar",                                                   \\
    Tensor(const Tensor&, const Scalar&),                            \\
    Tensor(const Tensor&, const std::optional<Scalar>&, ScalarType), \\
    fp32_append_dtype)

#define AT_FORALL_PROMOTE(_) \\
  _(addcdiv)                 \\
  _(cat)
"""


def test_header_macros_become_categories(generate: ModuleType) -> None:
    lists = generate.header_lists(HEADER)
    assert lists["lower_precision"] == {"_convolution", "conv1d", "mm"}
    assert lists["float32"] == {"acos", "rms_norm", "softmax", "sum", "norm"}
    assert lists["promote"] == {"addcdiv", "cat"}


def test_a_missing_macro_stops_the_generator(generate: ModuleType) -> None:
    with pytest.raises(SystemExit, match="AT_FORALL_PROMOTE"):
        generate.header_lists(HEADER.split("#define AT_FORALL_PROMOTE")[0])


def test_registrations_outside_the_macros(generate: ModuleType) -> None:
    registered = {"_convolution", "conv1d", "mm", "acos", "rms_norm", "softmax", "sum", "norm"}
    registered |= {"addcdiv", "cat", "binary_cross_entropy", "_cudnn_rnn"}
    lists = generate.cuda_lists(HEADER, registered, "9.9")
    assert "_cudnn_rnn" in lists["lower_precision"]
    assert lists["banned"] == {"binary_cross_entropy"}
    # Known extras the release does not register are left out.
    assert "cudnn_convolution" not in lists["lower_precision"]
    with pytest.raises(SystemExit, match="'new_op'"):
        generate.cuda_lists(HEADER, registered | {"new_op"}, "9.9")


def test_cpu_lists_keep_what_the_release_registers(generate: ModuleType) -> None:
    lists = generate.cpu_lists({"mm", "cat", "linalg_inv"}, "9.9")
    assert lists["lower_precision"] == {"mm"}
    assert lists["float32"] == {"linalg_inv"}
    assert lists["promote"] == {"cat"}
    with pytest.raises(SystemExit, match="'new_op'"):
        generate.cpu_lists({"mm", "new_op"}, "9.9")


OWN_BRANCH = """
        elif self.device == "mps":
            supported_dtype = [torch.float16]
            if self.fast_dtype not in supported_dtype:
"""
SHARED_LIST = """
        device_supported_dtypes = [torch.bfloat16, torch.float16]
"""


def test_mps_autocast_dtypes(generate: ModuleType) -> None:
    dtypes = generate.mps_autocast_dtypes
    assert dtypes(OWN_BRANCH, None) == ["float16"]
    assert dtypes(SHARED_LIST, {"autocast_available": {"mps": True}}) == ["bfloat16", "float16"]
    assert dtypes(SHARED_LIST, {"autocast_available": {"mps": False}}) == []
    assert dtypes(SHARED_LIST + 'if self.device == "mps":', None) == ["bfloat16", "float16"]
    assert dtypes("no such branch", None) == []


def test_every_committed_table_is_for_a_release_with_registrations() -> None:
    """Each table was checked against its release's dispatcher registrations, and records
    which torch build they came from."""
    for table in sorted(TABLES.glob("torch-*.toml")):
        minor = table.stem.split("-", 1)[1]
        meta = tomllib.loads(table.read_text())["meta"]
        dump = json.loads((REGISTRATIONS / f"{minor}.json").read_text())
        assert dump["torch_version"].split(".")[:2] == minor.split("."), table.name
        assert meta["registrations"].startswith(f"registrations of torch {dump['torch_version']}")
        assert "+cpu" not in dump["torch_version"], f"{minor}: a CPU build lacks _cudnn_rnn"
