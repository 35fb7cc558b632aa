"""The compiled extension behind the claim about custom kernels: a torch op with float and
double kernels only, none for Half. It is built once per device and torch version and loaded
into the process. claim_programs.py runs it under autocast; `extension_missing` says why it
cannot run here.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from amp_lint.verify.outcomes import first_line

if TYPE_CHECKING:
    import torch

_EXTENSION = "amp_lint_claims_{device}"
_CPU_SOURCE = r"""
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <torch/library.h>

at::Tensor square_cpu(const at::Tensor& x) {
  at::Tensor input = x.contiguous();
  at::Tensor out = at::empty_like(input);
  AT_DISPATCH_FLOATING_TYPES(input.scalar_type(), "square_cpu", [&] {
    const scalar_t* src = input.data_ptr<scalar_t>();
    scalar_t* dst = out.data_ptr<scalar_t>();
    for (int64_t i = 0; i < input.numel(); ++i) dst[i] = src[i] * src[i];
  });
  return out;
}

TORCH_LIBRARY(amp_lint_claims_cpu, m) { m.def("square(Tensor x) -> Tensor"); }
TORCH_LIBRARY_IMPL(amp_lint_claims_cpu, CPU, m) { m.impl("square", &square_cpu); }
"""
_CUDA_REGISTRATION = r"""
#include <ATen/ATen.h>
#include <torch/library.h>

at::Tensor square_cuda(const at::Tensor& x);

TORCH_LIBRARY(amp_lint_claims_cuda, m) { m.def("square(Tensor x) -> Tensor"); }
TORCH_LIBRARY_IMPL(amp_lint_claims_cuda, CUDA, m) { m.impl("square", &square_cuda); }
"""
_CUDA_SOURCE = r"""
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

template <typename scalar_t>
__global__ void square_kernel(const scalar_t* src, scalar_t* dst, int64_t n) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = src[i] * src[i];
}

at::Tensor square_cuda(const at::Tensor& x) {
  at::Tensor input = x.contiguous();
  at::Tensor out = at::empty_like(input);
  int64_t n = input.numel();
  if (n == 0) return out;
  const int threads = 256;
  const int blocks = static_cast<int>((n + threads - 1) / threads);
  AT_DISPATCH_FLOATING_TYPES(input.scalar_type(), "square_cuda", [&] {
    square_kernel<scalar_t><<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        input.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), n);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
"""

#: device -> why the extension is not available ("" once built and loaded), per process.
_built: dict[str, str] = {}


def extension_missing(device: str) -> str:
    if device not in _built:
        _built[device] = _build_extension(device)
    return _built[device]


def _build_extension(device: str) -> str:
    import torch
    from torch.utils import cpp_extension

    load_inline: Any = cpp_extension.load_inline  # untyped in torch
    compiler = os.environ.get("CXX", "c++")
    if shutil.which(compiler) is None:
        return f"no C++ compiler ({compiler}) on PATH"
    try:
        cpp_extension.verify_ninja_availability()
    except RuntimeError:
        return "ninja is not installed"
    if device == "cuda" and shutil.which("nvcc") is None and cpp_extension.CUDA_HOME is None:
        return "no CUDA compiler (nvcc)"
    # One directory per torch version and user, kept across processes: torch rebuilds only
    # when the sources change, so the build (about 20 s on CPU) is paid once.
    user = getattr(os, "getuid", lambda: "user")()
    directory = Path(tempfile.gettempdir()) / f"amp-lint-claims-{user}-torch-{torch.__version__}"
    directory = directory / device
    name = _EXTENSION.format(device=device)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        _remove_stale_lock(directory)
        if device == "cuda":
            load_inline(
                name,
                cpp_sources=[_CUDA_REGISTRATION],
                cuda_sources=[_CUDA_SOURCE],
                build_directory=str(directory),
                is_python_module=False,
                no_implicit_headers=True,
            )
        else:
            load_inline(
                name,
                cpp_sources=[_CPU_SOURCE],
                build_directory=str(directory),
                is_python_module=False,
                no_implicit_headers=True,
            )
    except Exception as exc:
        return f"build failed: {first_line(exc)}"
    return ""


# torch's builder waits, without end, while its `lock` file exists; a build takes about 20 s,
# so a lock this old was left by a process killed while it built.
STALE_LOCK_SECONDS = 600


def _remove_stale_lock(directory: Path) -> None:
    lock = directory / "lock"
    try:
        if time.time() - lock.stat().st_mtime > STALE_LOCK_SECONDS:
            lock.unlink()
    except OSError:  # no lock, or another process removed it first
        pass


def square_op(device: str) -> Callable[[torch.Tensor], torch.Tensor]:
    import torch

    square: Callable[[torch.Tensor], torch.Tensor] = getattr(
        torch.ops, _EXTENSION.format(device=device)
    ).square
    return square
