"""Generate amp-lint's autocast op tables, one per torch release, from PyTorch's own files.

    python tools/optables/generate.py            # every release from 2.4 to the newest on PyPI
    python tools/optables/generate.py 2.11 2.12  # only these
    python tools/optables/generate.py --check    # exit 1 if a committed table differs

For each release (the newest patch of each minor) it reads, from the release's Linux wheel on
PyPI, `torch/include/ATen/autocast_mode.h` over HTTP range requests (a few MB, not the whole
wheel), and writes `src/amp_lint/data/autocast_ops/torch-<minor>.toml`:

- CUDA: the header's op-list macros (AT_FORALL_LOWER_PRECISION_FP, AT_FORALL_FP32,
  AT_FORALL_FP32_SET_OPT_DTYPE, AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE, AT_FORALL_PROMOTE),
  the `binary_cross_entropy` ban, and the ops that PyTorch registers for AutocastCUDA outside
  those macros (REGISTERED_OUTSIDE_THE_MACROS), kept where the release registers them.
- CPU: the AutocastCPU lists of autocast_mode.cpp (cpu_source.toml: wheels do not ship the
  .cpp), kept where the release registers the op for AutocastCPU.

Which ops a release registers comes from `registrations/<minor>.json`, written by
`dump_registrations.py` run under that release (`check_releases.sh` installs each release
and does it). An AutocastCUDA or AutocastCPU registration that no list explains stops the
generator: a table must not silently miss an op (the 2.13 table once lacked `_cudnn_rnn`).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import io
import json
import re
import sys
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OUTPUT_DIR = ROOT / "src" / "amp_lint" / "data" / "autocast_ops"
REGISTRATIONS_DIR = HERE / "registrations"
CPU_SOURCE = HERE / "cpu_source.toml"
HEADER_MEMBER = "torch/include/ATen/autocast_mode.h"
AUTOCAST_PY_MEMBER = "torch/amp/autocast_mode.py"
MPS_DISPATCH_HEADERS = "torch/include/ATen/ops"
SCALER_OPS = ("_amp_foreach_non_finite_check_and_unscale", "_amp_update_scale")
OLDEST = (2, 4)
PYPI_JSON = "https://pypi.org/pypi/torch/json"
# The wheel read for each release: CPython 3.11 on x86_64 Linux (every release from 2.4 has one).
WHEEL_TAG = re.compile(r"-cp311-cp311-(manylinux\S*_x86_64)\.whl$")
MACOS_WHEEL_TAG = re.compile(r"-cp311-(cp311|none)-macosx_\S*_arm64\.whl$")

# Header macro -> category. FP32_SET_OPT_DTYPE ops get dtype=float32 filled in when the caller
# passed none; DIFFERENT_REDISPATCH_SIGNATURE ops (norm) are redirected to their float32
# overload. Both give float32 output, as AT_FORALL_FP32 does.
MACRO_CATEGORIES = {
    "AT_FORALL_LOWER_PRECISION_FP": "lower_precision",
    "AT_FORALL_FP32": "float32",
    "AT_FORALL_FP32_SET_OPT_DTYPE": "float32",
    "AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE": "float32",
    "AT_FORALL_PROMOTE": "promote",
}
CATEGORIES = ("lower_precision", "float32", "promote", "banned")

# Ops registered for AutocastCUDA outside the header's macros: op -> (category, where).
REGISTERED_OUTSIDE_THE_MACROS = {
    "cudnn_convolution": ("lower_precision", "KERNEL_CUDA in autocast_mode.cpp"),
    "cudnn_convolution_transpose": ("lower_precision", "KERNEL_CUDA in autocast_mode.cpp"),
    # Casts input and weights to float16 (kHalf, whatever the autocast dtype) and re-flattens
    # the weights; registered only in builds with cuDNN.
    "_cudnn_rnn": ("lower_precision", "aten/src/ATen/native/cudnn/AutocastRNN.cpp"),
    "binary_cross_entropy": ("banned", "binary_cross_entropy_banned in autocast_mode.cpp"),
    # New in 2.14, registered for CUDA and CPU but not XPU, so not through the macros. float32
    # as measured under CPU autocast on torch 2.14.1 (bfloat16 input -> float32 output); the
    # CUDA policy is taken to be the same until a CUDA run checks it.
    "linalg_matrix_sqrth": ("float32", "KERNEL_CUDA in autocast_mode.cpp (torch 2.14)"),
}


@dataclass(frozen=True)
class Wheel:
    version: str
    filename: str
    url: str
    sha256: str


class HttpRangeFile(io.RawIOBase):
    """A read-only, seekable view of a remote file, read with HTTP range requests."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url
        self.position = 0
        request = urllib.request.Request(url, method="HEAD")
        with urllib.request.urlopen(request, timeout=60) as response:
            self.size = int(response.headers["Content-Length"])

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.size}[whence]
        self.position = base + offset
        return self.position

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        if self.position >= self.size:
            return 0
        end = min(self.position + len(buffer), self.size) - 1
        request = urllib.request.Request(
            self.url, headers={"Range": f"bytes={self.position}-{end}"}
        )
        with urllib.request.urlopen(request, timeout=120) as response:
            data = response.read()
        buffer[: len(data)] = data
        self.position += len(data)
        return len(data)


@functools.lru_cache(maxsize=1)
def _releases() -> dict[str, list[dict]]:
    """PyPI's release -> files of torch (one request: per-release JSON is not always served)."""
    with urllib.request.urlopen(PYPI_JSON, timeout=60) as response:
        releases: dict[str, list[dict]] = json.load(response)["releases"]
    return releases


def newest_patches() -> dict[str, str]:
    """minor ("2.12") -> the newest final patch release on PyPI ("2.12.1"), from 2.4 on."""
    newest: dict[str, tuple[int, ...]] = {}
    for version, files in _releases().items():
        if not files:  # a yanked or empty release
            continue
        if not re.fullmatch(r"\d+\.\d+\.\d+", version):
            continue
        parts = tuple(int(p) for p in version.split("."))
        if parts[:2] < OLDEST:
            continue
        minor = f"{parts[0]}.{parts[1]}"
        newest[minor] = max(newest.get(minor, parts), parts)
    ordered = sorted(newest, key=lambda m: tuple(int(p) for p in m.split(".")))
    return {minor: ".".join(map(str, newest[minor])) for minor in ordered}


def linux_wheel(version: str) -> Wheel:
    for entry in _releases()[version]:
        if WHEEL_TAG.search(entry["filename"]):
            url = urllib.parse.urljoin(PYPI_JSON, entry["url"])  # a mirror serves relative URLs
            return Wheel(version, entry["filename"], url, entry["digests"]["sha256"])
    raise SystemExit(f"torch {version}: no cp311 x86_64 Linux wheel on PyPI")


@dataclass(frozen=True)
class ReleaseFiles:
    """What is read of one release: the Linux wheel's autocast header and autocast_mode.py,
    and which GradScaler kernels the macOS wheel has for MPS."""

    header: str
    autocast_py: str
    macos_wheel: str
    mps_scaler_kernels: bool


def _open_remote_zip(url: str) -> zipfile.ZipFile:
    return zipfile.ZipFile(io.BufferedReader(HttpRangeFile(url), buffer_size=1 << 20))


def macos_wheel(version: str) -> Wheel | None:
    for entry in _releases()[version]:
        if MACOS_WHEEL_TAG.search(entry["filename"]):
            url = urllib.parse.urljoin(PYPI_JSON, entry["url"])
            return Wheel(version, entry["filename"], url, entry["digests"]["sha256"])
    return None


def read_release(wheel: Wheel) -> ReleaseFiles:
    with _open_remote_zip(wheel.url) as archive:
        header = archive.read(HEADER_MEMBER).decode("utf-8")
        autocast_py = archive.read(AUTOCAST_PY_MEMBER).decode("utf-8")
    mac = macos_wheel(wheel.version)
    kernels = False
    if mac is not None:
        # Only the zip's directory is read: the MPS dispatch headers of both ops exist when
        # the macOS build registers MPS kernels for them.
        with _open_remote_zip(mac.url) as archive:
            names = set(archive.namelist())
        kernels = all(f"{MPS_DISPATCH_HEADERS}/{op}_mps_dispatch.h" in names for op in SCALER_OPS)
    return ReleaseFiles(header, autocast_py, mac.filename if mac else "", kernels)


def mps_autocast_dtypes(autocast_py: str, registrations: dict | None) -> list[str]:
    """The dtypes `torch.autocast("mps", dtype=...)` accepts (torch/amp/autocast_mode.py).
    Up to 2.9 MPS has its own branch with its own list; from 2.10 every device available to
    autocast shares `device_supported_dtypes`, and whether MPS is one is decided in C++: the
    release's `is_autocast_available("mps")` (registrations/<X.Y>.json), or, without a dump,
    whether the file names MPS at all. Empty: MPS is not an autocast device there."""
    own = re.search(r'self\.device == "mps":\s*supported_dtype = \[([^\]]*)\]', autocast_py)
    shared = re.search(r"device_supported_dtypes = \[([^\]]*)\]", autocast_py)
    available = (registrations or {}).get("autocast_available", {}).get("mps")
    if available is None:
        available = '"mps"' in autocast_py
    if own is not None:
        listed = own.group(1)
    elif shared is not None and available:
        listed = shared.group(1)
    else:
        return []
    return sorted(re.findall(r"torch\.(float16|bfloat16)", listed))


def macro_entries(header: str, macro: str) -> list[str]:
    """The aten base names a `#define MACRO(_)` op list names, in order, deduplicated."""
    match = re.search(rf"#define {macro}\(_\)(.*?)(?<!\\)\n", header, re.S)
    if match is None:
        raise SystemExit(f"autocast_mode.h has no {macro}(_)")
    body = match.group(1)
    if macro == "AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE":
        names = re.findall(r'"([A-Za-z0-9_]+)\.[A-Za-z0-9_]+"', body)
    else:
        names = re.findall(r"\b_\(\s*([A-Za-z0-9_]+)", body)
    return list(dict.fromkeys(names))


def header_lists(header: str) -> dict[str, set[str]]:
    lists: dict[str, set[str]] = {category: set() for category in CATEGORIES}
    for macro, category in MACRO_CATEGORIES.items():
        lists[category].update(macro_entries(header, macro))
    return lists


def load_registrations(minor: str) -> dict | None:
    path = REGISTRATIONS_DIR / f"{minor}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def cuda_lists(header: str, registered: set[str] | None, minor: str) -> dict[str, set[str]]:
    lists = header_lists(header)
    for op, (category, _where) in REGISTERED_OUTSIDE_THE_MACROS.items():
        if registered is None or op in registered:
            lists[category].add(op)
    if registered is not None:
        listed = set().union(*lists.values())
        unexplained = registered - listed
        if unexplained:
            raise SystemExit(
                f"torch {minor}: AutocastCUDA registers {sorted(unexplained)}, which no list "
                "explains; add them to REGISTERED_OUTSIDE_THE_MACROS with their source"
            )
    return lists


def cpu_lists(registered: set[str] | None, minor: str) -> dict[str, set[str]]:
    source = tomllib.loads(CPU_SOURCE.read_text())["cpu"]
    lists = {category: set(source.get(category, [])) for category in CATEGORIES}
    if registered is None:
        return lists
    unexplained = registered - set().union(*lists.values())
    if unexplained:
        raise SystemExit(
            f"torch {minor}: AutocastCPU registers {sorted(unexplained)}, which "
            f"{CPU_SOURCE.name} does not list"
        )
    return {category: ops & registered for category, ops in lists.items()}


def _toml_list(name: str, ops: set[str]) -> str:
    lines, line = [f"{name} = ["], "   "
    for op in sorted(ops):
        item = f' "{op}",'
        if len(line) + len(item) > 96:
            lines.append(line)
            line = "   "
        line += item
    if line.strip():
        lines.append(line)
    lines.append("]")
    return "\n".join(lines) if ops else f"{name} = []"


def table_text(wheel: Wheel, files: ReleaseFiles, registrations: dict | None) -> str:
    header = files.header
    minor = ".".join(wheel.version.split(".")[:2])
    keys = (registrations or {}).get("registrations", {})
    cuda = cuda_lists(header, set(keys["AutocastCUDA"]) if registrations else None, minor)
    cpu = cpu_lists(set(keys["AutocastCPU"]) if registrations else None, minor)
    cpu_source = tomllib.loads(CPU_SOURCE.read_text())["source"]
    checked = (
        f"registrations of torch {registrations['torch_version']} "
        f"(git {registrations['git_version'][:12]})"
        if registrations
        else "none: no registrations dump for this release"
    )
    parts = [
        "# Generated by tools/optables/generate.py; do not edit by hand.",
        "[meta]",
        f'torch_version = "{wheel.version}"',
        f'wheel = "{wheel.filename}"',
        f'wheel_sha256 = "{wheel.sha256}"',
        f'header_sha256 = "{hashlib.sha256(header.encode()).hexdigest()}"',
        f'cpu_source = "{cpu_source["file"]} @ {cpu_source["commit"]}"',
        f'registrations = "{checked}"',
        "",
    ]
    for device, lists in (("cuda", cuda), ("cpu", cpu)):
        parts.append(f"[{device}]")
        parts.extend(_toml_list(category, lists[category]) for category in CATEGORIES)
        parts.append("")
    dtypes = ", ".join(
        f'"{dtype}"' for dtype in mps_autocast_dtypes(files.autocast_py, registrations)
    )
    parts += [
        "[support]",
        '# The dtypes torch.autocast("mps") accepts (torch/amp/autocast_mode.py); none: "mps"',
        "# is not an autocast device in this release.",
        f"mps_autocast_dtypes = [{dtypes}]",
        "# GradScaler on MPS: the macOS wheel has MPS kernels for "
        + " and ".join(f"{op}_" for op in SCALER_OPS)
        + f" ({files.macos_wheel or 'no macOS wheel'}).",
        f"mps_grad_scaler = {'true' if files.mps_scaler_kernels else 'false'}",
        "",
    ]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("minors", nargs="*", help="releases as X.Y (default: 2.4 to newest)")
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args(argv)
    patches = newest_patches()
    minors = args.minors or list(patches)
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    stale = []
    for minor in minors:
        wheel = linux_wheel(patches[minor])
        text = table_text(wheel, read_release(wheel), load_registrations(minor))
        target = OUTPUT_DIR / f"torch-{minor}.toml"
        if args.check:
            if not target.is_file() or target.read_text() != text:
                stale.append(target.name)
            continue
        target.write_text(text)
        print(f"{target.relative_to(ROOT)}: torch {wheel.version}")
    if stale:
        print("out of date: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
