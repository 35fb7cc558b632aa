"""The autocast op tables (src/amp_lint/data/autocast_ops/torch-<X.Y>.toml, one per torch
release): the loader, and the table of the installed torch's release against what that torch
really does under torch.autocast (AMP_LINT_TABLE_RELEASE=X.Y picks another table for the
release-independent tests). tools/optables/check_releases.sh runs this file under every
release it can install.

The torch tests read the TOML file directly (tomllib) and import nothing from amp_lint, so
they also run on a GPU machine that has torch and pytest but not libcst:

    python -m pytest tests/test_optables.py -rs

Each table entry is checked by calling the op with small made-up inputs under autocast:
lower_precision ops get float32 inputs and must return the autocast dtype; float32 ops get
inputs in the autocast dtype and must return float32; promote ops must return float32 for an
(autocast dtype, float32) input pair and the autocast dtype for a pair of autocast-dtype
inputs; banned ops must raise; unlisted ops must return the dtype they were given.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli", reason="Python < 3.11 needs tomli to read TOML")

DATA = Path(__file__).resolve().parents[1] / "src" / "amp_lint" / "data"
TABLES = DATA / "autocast_ops"
RELEASES = sorted(
    (tuple(int(part) for part in path.stem.split("-")[1].split(".")) for path in TABLES.iterdir()),
)


def installed_torch_release() -> tuple[int, ...] | None:
    """(major, minor) of the installed torch, read without importing it."""
    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None
    return tuple(int(part) for part in version.split("+")[0].split(".")[:2])


def release_under_test() -> tuple[int, ...]:
    chosen = os.environ.get("AMP_LINT_TABLE_RELEASE")
    if chosen:
        return tuple(int(part) for part in chosen.split("."))
    installed = installed_torch_release()
    return installed if installed in RELEASES else RELEASES[-1]


RELEASE = release_under_test()
TOML_PATH = TABLES / f"torch-{RELEASE[0]}.{RELEASE[1]}.toml"
RAW: dict[str, Any] = tomllib.loads(TOML_PATH.read_text(encoding="utf-8"))
RAW["python_aliases"] = tomllib.loads((DATA / "autocast_aliases.toml").read_text(encoding="utf-8"))[
    "python_aliases"
]
LISTED = ("lower_precision", "float32", "promote", "banned")
DEVICES = ("cuda", "cpu")
LOW_DTYPES = ("bfloat16", "float16")


def table_ops(device: str) -> dict[str, str]:
    """aten op -> category for one device section of the TOML file."""
    return {op: cat for cat in LISTED for op in RAW[device][cat]}


def table_category(device: str, name: str) -> str:
    """The category of an aten or Python-level name, read straight from the TOML file."""
    op = RAW["python_aliases"].get(name, name)
    return table_ops(device).get(op, "unlisted")


# ---------------------------------------------------------------------------------------
# The loader (amp_lint.analysis.values.optables)
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def optables() -> Any:
    return pytest.importorskip(
        "amp_lint.analysis.values.optables",
        reason="amp_lint is not importable here (not installed)",
    )


def test_loader_reads_the_package_data(optables: Any) -> None:
    tables = optables.op_tables_for_release(RELEASE[:2])
    assert tables is optables.op_tables_for_release(RELEASE[:2])  # cached
    assert tables.torch_version == RAW["meta"]["torch_version"]
    assert tables.release == RELEASE[:2]
    assert set(tables.devices) == {"cuda", "cpu"}
    for device in DEVICES:
        assert {op: cat.value for op, cat in tables.devices[device].items()} == table_ops(device)
    assert tables.python_aliases == RAW["python_aliases"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("category", ["lower_precision", "float32", "promote"])
def test_every_category_list_is_non_empty(optables: Any, device: str, category: str) -> None:
    tables = optables.op_tables_for_release(RELEASE[:2])
    assert tables.ops(device, optables.OpCategory(category))


def test_banned_lists(optables: Any) -> None:
    tables = optables.op_tables_for_release(RELEASE[:2])
    assert tables.ops("cuda", optables.OpCategory.BANNED) == {"binary_cross_entropy"}
    assert tables.ops("cpu", optables.OpCategory.BANNED) == set()


@pytest.mark.parametrize("device", DEVICES)
def test_toml_lists_are_sorted_deduplicated_and_disjoint(device: str) -> None:
    seen: dict[str, str] = {}
    for cat in LISTED:
        ops = RAW[device][cat]
        assert ops == sorted(set(ops)), f"[{device}] {cat} is not sorted and deduplicated"
        for op in ops:
            assert "." not in op, f"[{device}] {op}: write aten names without overloads"
            assert op not in seen, f"[{device}] {op} is both {seen[op]} and {cat}"
            seen[op] = cat


def test_an_op_in_two_categories_is_rejected(optables: Any) -> None:
    text = """
        [meta]
        torch_version = "0"
        [cuda]
        lower_precision = ["mm"]
        float32 = ["mm"]
        promote = []
        banned = []
        [cpu]
        lower_precision = []
        float32 = []
        promote = []
        banned = []
    """
    with pytest.raises(ValueError, match="'mm' is both lower_precision and float32"):
        optables.parse_op_tables(text.replace("\n        ", "\n"))


@pytest.mark.parametrize("op", ["sum", "pow", "softmax", "exp", "log"])
def test_cuda_upcasts_what_cpu_leaves_alone(optables: Any, op: str) -> None:
    tables = optables.op_tables_for_release(RELEASE[:2])
    assert tables.category("cuda", op) is optables.OpCategory.FLOAT32
    assert tables.category("cpu", op) is optables.OpCategory.UNLISTED


@pytest.mark.parametrize("op", ["matmul", "linear", "conv2d"])
@pytest.mark.parametrize("device", DEVICES)
def test_matmul_like_ops_are_lower_precision(optables: Any, op: str, device: str) -> None:
    assert (
        optables.op_tables_for_release(RELEASE[:2]).category(device, op)
        is optables.OpCategory.LOWER_PRECISION
    )


def test_binary_cross_entropy(optables: Any) -> None:
    tables = optables.op_tables_for_release(RELEASE[:2])
    cat = optables.OpCategory
    assert tables.category("cuda", "binary_cross_entropy") is cat.BANNED
    assert tables.category("cpu", "binary_cross_entropy") is cat.FLOAT32
    assert tables.categories_for_unknown_device("binary_cross_entropy") == {
        cat.BANNED,
        cat.FLOAT32,
    }


def test_devices_and_aliases(optables: Any) -> None:
    tables = optables.op_tables_for_release(RELEASE[:2])
    cat = optables.OpCategory
    assert tables.category("cuda", "__matmul__") is cat.LOWER_PRECISION
    assert tables.category("cuda", "__pow__") is cat.FLOAT32
    assert tables.category("cuda", "__rtruediv__") is cat.FLOAT32
    assert tables.category("cuda", "cross_entropy") is cat.FLOAT32
    assert tables.category("cpu", "cross_entropy") is cat.FLOAT32
    assert tables.category("cpu", "cross_entropy_loss") is cat.FLOAT32
    assert tables.category("cuda", "interpolate") is cat.FLOAT32
    assert tables.category("cpu", "interpolate") is cat.UNLISTED
    assert tables.category("cpu", "grid_sample") is cat.FLOAT32
    assert tables.category("cuda", "grid_sample") is cat.PROMOTE
    assert tables.category("cpu", "linalg_inv") is cat.FLOAT32
    assert tables.category("cpu", "fft_fft") is cat.FLOAT32
    assert tables.category("cuda", "linalg_inv") is cat.UNLISTED
    # XPU registers the CUDA lists; a device index is ignored; other devices have no lists.
    assert tables.category("xpu", "sum") is cat.FLOAT32
    assert tables.category("CUDA:1", "mm") is cat.LOWER_PRECISION
    assert tables.category("mps", "mm") is cat.UNLISTED
    assert tables.category("cuda", "relu") is cat.UNLISTED
    assert tables.categories_for_unknown_device("sum") == {cat.FLOAT32, cat.UNLISTED}
    assert tables.categories_for_unknown_device("relu") == {cat.UNLISTED}


@pytest.mark.parametrize("alias", sorted(RAW["python_aliases"]))
def test_alias_targets_are_listed_somewhere(alias: str) -> None:
    target = RAW["python_aliases"][alias]
    assert alias not in table_ops("cuda") and alias not in table_ops("cpu"), (
        f"{alias} is itself an aten name in the tables; an alias would shadow it"
    )
    assert any(target in table_ops(device) for device in DEVICES), (
        f"python_aliases.{alias} -> {target}, which no device lists"
    )


# ---------------------------------------------------------------------------------------
# Small made-up inputs and one call per op
# ---------------------------------------------------------------------------------------


class Maker:
    """Inputs for one call: `f` tensors in the first dtype, `g` tensors in the second one
    (promote's second input). Derived inputs are computed in float32 on the CPU with CPU
    autocast off, then converted."""

    def __init__(self, torch: Any, device: str, first: Any, second: Any) -> None:
        self.t = torch
        self.F = torch.nn.functional
        self.device = device
        self.first = first
        self.second = second
        self._gen = torch.Generator().manual_seed(0)

    @contextlib.contextmanager
    def _plain(self) -> Iterator[None]:
        with self.t.autocast("cpu", enabled=False):
            yield

    def _rand(self, shape: tuple[int, ...], lo: float, hi: float) -> Any:
        return self.t.rand(shape, generator=self._gen) * (hi - lo) + lo

    def _to(self, x: Any, dtype: Any) -> Any:
        return x.to(device=self.device, dtype=dtype)

    def f(self, *shape: int, lo: float = -1.0, hi: float = 1.0) -> Any:
        return self._to(self._rand(shape, lo, hi), self.first)

    def g(self, *shape: int, lo: float = -1.0, hi: float = 1.0) -> Any:
        return self._to(self._rand(shape, lo, hi), self.second)

    def pos(self, *shape: int) -> Any:
        return self.f(*shape, lo=0.5, hi=1.5)

    def prob(self, *shape: int) -> Any:
        return self.g(*shape, lo=0.1, hi=0.9)

    def sign(self, *shape: int) -> Any:
        return self._to(self._rand(shape, -1, 1).sign(), self.second)

    def long(self, high: int, *shape: int) -> Any:
        return self.t.randint(high, shape, generator=self._gen).to(self.device)

    def ints(self, values: list[Any]) -> Any:
        return self.t.tensor(values, device=self.device)

    def _spd32(self, n: int) -> Any:
        with self._plain():
            a = self._rand((n, n), -1, 1)
            return a @ a.T + n * self.t.eye(n)

    def spd(self, n: int = 3) -> Any:
        return self._to(self._spd32(n), self.first)

    def chol(self, n: int = 3) -> Any:
        with self._plain():
            return self._to(self.t.linalg.cholesky(self._spd32(n)), self.first)

    def upper(self, n: int = 3) -> Any:
        with self._plain():
            return self._to(self._rand((n, n), -1, 1).triu() + n * self.t.eye(n), self.first)

    def geqrf(self) -> tuple[Any, Any]:
        with self._plain():
            a, tau = self.t.geqrf(self._rand((4, 3), -1, 1))
            return self._to(a, self.first), self._to(tau, self.first)

    def lu(self) -> tuple[Any, Any]:
        with self._plain():
            lu, pivots = self.t.linalg.lu_factor(self._spd32(3))
            return self._to(lu, self.first), pivots.to(self.device)

    def pooled(self, dims: int) -> tuple[Any, Any]:
        with self._plain():
            pool = self.F.max_pool2d if dims == 2 else self.F.max_pool3d
            out, idx = pool(self._rand((1, 1) + (4,) * dims, -1, 1), 2, return_indices=True)
            return self._to(out, self.first), idx.to(self.device)


Case = Callable[[Maker], Any]


def _interp(m: Maker, dims: int, mode: str, **kw: Any) -> Any:
    return m.F.interpolate(m.f(1, 2, *(4,) * dims), scale_factor=2, mode=mode, **kw)


def _mha(m: Maker) -> Any:
    q = m.f(1, 4, 8)
    out, _weights = m.t._native_multi_head_attention(
        q, q, q, 8, 2, m.g(24, 8), m.g(24), m.g(8, 8), m.g(8), need_weights=False
    )
    return out


def _mkldnn_lstm_layer(m: Maker) -> Any:
    # One unidirectional LSTM layer: input (seq, batch, in), weights as nn.LSTM keeps them.
    return m.t.mkldnn_rnn_layer(
        m.f(5, 2, 3),
        m.g(16, 3),
        m.g(16, 4),
        m.g(16),
        m.g(16),
        m.f(2, 4),
        m.f(2, 4),
        False,
        [],
        2,
        4,
        1,
        True,
        False,
        False,
        False,
    )[:3]  # output, hy, cy (the workspace is an internal buffer)


def _conv_args(m: Maker) -> tuple[Any, Any]:
    return m.f(1, 2, 6, 6), m.g(3, 2, 3, 3)


# aten op name -> a call that reaches it from Python. Calls return a tensor or a tuple of
# tensors; every floating (or complex) tensor returned is checked.
CASES: dict[str, Case] = {
    # --- matrix products and convolutions
    "mm": lambda m: m.t.mm(m.f(3, 4), m.g(4, 5)),
    "bmm": lambda m: m.t.bmm(m.f(2, 3, 4), m.g(2, 4, 5)),
    "matmul": lambda m: m.t.matmul(m.f(3, 4), m.g(4, 5)),
    "linear": lambda m: m.F.linear(m.f(2, 4), m.g(3, 4), m.g(3)),
    "addmm": lambda m: m.t.addmm(m.f(3, 5), m.f(3, 4), m.g(4, 5)),
    "_addmm_activation": lambda m: m.t._addmm_activation(m.f(3, 5), m.f(3, 4), m.g(4, 5)),
    "addbmm": lambda m: m.t.addbmm(m.f(3, 5), m.f(2, 3, 4), m.g(2, 4, 5)),
    "baddbmm": lambda m: m.t.baddbmm(m.f(2, 3, 5), m.f(2, 3, 4), m.g(2, 4, 5)),
    "addmv": lambda m: m.t.addmv(m.f(3), m.f(3, 4), m.g(4)),
    "addr": lambda m: m.t.addr(m.f(3, 4), m.f(3), m.g(4)),
    "mv": lambda m: m.t.mv(m.f(3, 4), m.g(4)),
    "einsum": lambda m: m.t.einsum("ij,jk->ik", m.f(3, 4), m.g(4, 5)),
    "chain_matmul": lambda m: m.t.chain_matmul(m.f(2, 3), m.f(3, 4), m.g(4, 5)),
    "linalg_multi_dot": lambda m: m.t.linalg.multi_dot([m.f(2, 3), m.f(3, 4), m.g(4, 5)]),
    "linalg_vecdot": lambda m: m.t.linalg.vecdot(m.f(3, 4), m.g(3, 4)),
    "conv1d": lambda m: (
        m.F.conv1d(m.f(1, 2, 8), m.g(3, 2, 3)),
        m.F.conv1d(m.f(1, 2, 8), m.g(3, 2, 3), padding="same"),
    ),
    "conv2d": lambda m: (
        m.F.conv2d(*_conv_args(m)),
        m.F.conv2d(*_conv_args(m), padding="same"),
    ),
    "conv3d": lambda m: (
        m.F.conv3d(m.f(1, 2, 4, 4, 4), m.g(3, 2, 2, 2, 2)),
        m.F.conv3d(m.f(1, 2, 4, 4, 4), m.g(3, 2, 2, 2, 2), padding="same"),
    ),
    "conv_tbc": lambda m: m.t.conv_tbc(m.f(5, 2, 3), m.g(3, 3, 4), m.g(4), 1),
    "conv_transpose1d": lambda m: m.F.conv_transpose1d(m.f(1, 2, 5), m.g(2, 3, 3)),
    "conv_transpose2d": lambda m: m.F.conv_transpose2d(m.f(1, 2, 5, 5), m.g(2, 3, 3, 3)),
    "conv_transpose3d": lambda m: m.F.conv_transpose3d(m.f(1, 2, 3, 3, 3), m.g(2, 3, 2, 2, 2)),
    "convolution": lambda m: m.t.convolution(
        *_conv_args(m), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1
    ),
    # The 12-argument call is the `_convolution.deprecated` overload, the only one that
    # AutocastCPU registers; CUDA registers it and the 13-argument `_convolution` too.
    "_convolution": lambda m: (
        (
            m.t._convolution(
                *_conv_args(m), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1, False, False, True
            ),
        )
        + (
            ()
            if m.device == "cpu"
            else (
                m.t._convolution(
                    *_conv_args(m),
                    None,
                    [1, 1],
                    [0, 0],
                    [1, 1],
                    False,
                    [0, 0],
                    1,
                    False,
                    False,
                    True,
                    True,
                ),
            )
        )
    ),
    "prelu": lambda m: m.F.prelu(m.f(2, 3, 4), m.g(3)),
    "scaled_dot_product_attention": lambda m: m.F.scaled_dot_product_attention(
        m.f(1, 2, 4, 8), m.g(1, 2, 4, 8), m.g(1, 2, 4, 8)
    ),
    "_native_multi_head_attention": _mha,
    "mkldnn_rnn_layer": _mkldnn_lstm_layer,
    "lstm_cell": lambda m: m.t.lstm_cell(
        m.f(2, 3), [m.f(2, 4), m.f(2, 4)], m.g(16, 3), m.g(16, 4), m.g(16), m.g(16)
    ),
    "gru_cell": lambda m: m.t.gru_cell(
        m.f(2, 3), m.f(2, 4), m.g(12, 3), m.g(12, 4), m.g(12), m.g(12)
    ),
    "rnn_tanh_cell": lambda m: m.t.rnn_tanh_cell(
        m.f(2, 3), m.f(2, 4), m.g(4, 3), m.g(4, 4), m.g(4), m.g(4)
    ),
    "rnn_relu_cell": lambda m: m.t.rnn_relu_cell(
        m.f(2, 3), m.f(2, 4), m.g(4, 3), m.g(4, 4), m.g(4), m.g(4)
    ),
    # CUDA-only kernels (see CUDA_ONLY)
    # nn.LSTM on a CUDA build with cuDNN runs aten::_cudnn_rnn; its autocast kernel
    # (native/cudnn/AutocastRNN.cpp) casts input and weights to float16 (see CUDA_FLOAT16).
    "_cudnn_rnn": lambda m: m.t.nn.LSTM(3, 4).to(device=m.device, dtype=m.second)(m.f(5, 2, 3)),
    "cudnn_convolution": lambda m: m.t.cudnn_convolution(
        *_conv_args(m), [0, 0], [1, 1], [1, 1], 1, False, False, True
    ),
    "cudnn_convolution_transpose": lambda m: m.t.cudnn_convolution_transpose(
        m.f(1, 2, 5, 5), m.g(2, 3, 3, 3), [0, 0], [0, 0], [1, 1], [1, 1], 1, False, False, True
    ),
    "_thnn_fused_lstm_cell": lambda m: m.t.ops.aten._thnn_fused_lstm_cell(
        m.f(2, 16), m.f(2, 16), m.g(2, 4)
    ),
    "_thnn_fused_gru_cell": lambda m: m.t.ops.aten._thnn_fused_gru_cell(
        m.f(2, 12), m.f(2, 12), m.g(2, 4)
    ),
    # Output only: the other results (logsumexp, seeds) have fixed dtypes.
    "_scaled_dot_product_flash_attention": lambda m: (
        m.t.ops.aten._scaled_dot_product_flash_attention(
            m.f(1, 2, 16, 64), m.g(1, 2, 16, 64), m.g(1, 2, 16, 64)
        )[0]
    ),
    # --- pointwise
    "acos": lambda m: m.t.acos(m.f(4, lo=-0.5, hi=0.5)),
    "asin": lambda m: m.t.asin(m.f(4, lo=-0.5, hi=0.5)),
    "cosh": lambda m: m.t.cosh(m.f(4)),
    "sinh": lambda m: m.t.sinh(m.f(4)),
    "tan": lambda m: m.t.tan(m.f(4)),
    "erfinv": lambda m: m.t.erfinv(m.f(4, lo=-0.5, hi=0.5)),
    "exp": lambda m: m.t.exp(m.f(4)),
    "expm1": lambda m: m.t.expm1(m.f(4)),
    "log": lambda m: m.t.log(m.pos(4)),
    "log10": lambda m: m.t.log10(m.pos(4)),
    "log2": lambda m: m.t.log2(m.pos(4)),
    "log1p": lambda m: m.t.log1p(m.pos(4)),
    "reciprocal": lambda m: m.t.reciprocal(m.pos(4)),
    "rsqrt": lambda m: m.t.rsqrt(m.pos(4)),
    # pow.Tensor_Scalar (x ** 2), pow.Tensor_Tensor, pow.Scalar (2 ** x)
    "pow": lambda m: (m.f(4) ** 2, m.pos(4).pow(m.f(4)), m.t.pow(2, m.f(4))),
    "softplus": lambda m: m.F.softplus(m.f(4)),
    "atan2": lambda m: m.t.atan2(m.f(4), m.g(4)),
    "addcdiv": lambda m: m.t.addcdiv(m.f(4), m.g(4), m.g(4, lo=0.5, hi=1.5)),
    "addcmul": lambda m: m.t.addcmul(m.f(4), m.g(4), m.g(4)),
    "polar": lambda m: m.t.polar(m.pos(3), m.g(3)),
    "view_as_complex": lambda m: m.t.view_as_complex(m.f(3, 2)),
    "fake_quantize_per_tensor_affine": lambda m: m.t.fake_quantize_per_tensor_affine(
        m.f(4), 0.1, 0, -128, 127
    ),
    # --- normalisation and reductions
    "layer_norm": lambda m: m.F.layer_norm(m.f(2, 4), (4,), m.g(4), m.g(4)),
    "native_layer_norm": lambda m: m.t.native_layer_norm(m.f(2, 4), [4], m.g(4), m.g(4), 1e-5),
    "rms_norm": lambda m: m.F.rms_norm(m.f(2, 4), (4,), m.g(4)),
    "group_norm": lambda m: m.F.group_norm(m.f(2, 4, 3), 2, m.g(4), m.g(4)),
    "frobenius_norm": lambda m: m.t.ops.aten.frobenius_norm.dim(m.f(3, 4), [0, 1]),
    "nuclear_norm": lambda m: (m.t.nuclear_norm(m.f(3, 4)), m.t.nuclear_norm(m.f(3, 4), [0, 1])),
    # norm.Scalar and norm.ScalarOpt_dim, the two overloads CUDA redirects to float32
    "norm": lambda m: (
        m.t.ops.aten.norm.Scalar(m.f(3, 4), 2),
        m.t.ops.aten.norm.ScalarOpt_dim(m.f(3, 4), 2, [1]),
    ),
    "renorm": lambda m: m.t.renorm(m.f(3, 4), 2, 0, 1.0),
    "logsumexp": lambda m: m.t.logsumexp(m.f(3, 4), 1),
    "prod": lambda m: (m.f(4).prod(), m.f(3, 4).prod(1)),
    "sum": lambda m: (m.f(3, 4).sum(), m.f(3, 4).sum(1)),
    "cumprod": lambda m: m.t.cumprod(m.f(4), 0),
    "cumsum": lambda m: m.t.cumsum(m.f(4), 0),
    "softmax": lambda m: m.t.softmax(m.f(3, 4), 1),
    "log_softmax": lambda m: m.t.log_softmax(m.f(3, 4), 1),
    "linalg_vector_norm": lambda m: m.t.linalg.vector_norm(m.f(3, 4)),
    # linalg_matrix_norm.str_ord (ord="fro") and linalg_matrix_norm (a numeric ord)
    "linalg_matrix_norm": lambda m: (
        m.t.linalg.matrix_norm(m.f(3, 4)),
        m.t.linalg.matrix_norm(m.f(3, 4), ord=1),
    ),
    "trace": lambda m: m.t.trace(m.f(3, 3)),
    "quantile": lambda m: (
        m.t.quantile(m.f(5), 0.5),
        m.t.quantile(m.f(5), m.g(2, lo=0.0, hi=1.0)),
    ),
    "nanquantile": lambda m: (
        m.t.nanquantile(m.f(5), 0.5),
        m.t.nanquantile(m.f(5), m.g(2, lo=0.0, hi=1.0)),
    ),
    # --- distances and similarities
    "cosine_similarity": lambda m: m.F.cosine_similarity(m.f(2, 4), m.g(2, 4)),
    "dist": lambda m: m.t.dist(m.f(4), m.g(4)),
    "pdist": lambda m: m.F.pdist(m.f(3, 4)),
    "cdist": lambda m: m.t.cdist(m.f(3, 4), m.g(2, 4)),
    # --- losses
    "mse_loss": lambda m: m.F.mse_loss(m.f(2, 4), m.g(2, 4)),
    "l1_loss": lambda m: m.F.l1_loss(m.f(2, 4), m.g(2, 4)),
    "smooth_l1_loss": lambda m: m.F.smooth_l1_loss(m.f(2, 4), m.g(2, 4)),
    "huber_loss": lambda m: m.F.huber_loss(m.f(2, 4), m.g(2, 4)),
    "kl_div": lambda m: m.F.kl_div(m.f(2, 4), m.prob(2, 4), reduction="batchmean"),
    "nll_loss": lambda m: m.F.nll_loss(m.f(3, 5), m.long(5, 3)),
    "nll_loss2d": lambda m: m.F.nll_loss(m.f(2, 5, 3, 3), m.long(5, 2, 3, 3)),
    "cross_entropy_loss": lambda m: m.F.cross_entropy(m.f(3, 5), m.long(5, 3)),
    "binary_cross_entropy": lambda m: m.F.binary_cross_entropy(m.prob(2, 4), m.prob(2, 4)),
    "binary_cross_entropy_with_logits": lambda m: m.F.binary_cross_entropy_with_logits(
        m.f(2, 4), m.prob(2, 4)
    ),
    "poisson_nll_loss": lambda m: m.F.poisson_nll_loss(m.f(2, 4), m.g(2, 4, lo=0.0, hi=3.0)),
    "cosine_embedding_loss": lambda m: m.F.cosine_embedding_loss(m.f(2, 4), m.g(2, 4), m.sign(2)),
    "hinge_embedding_loss": lambda m: m.F.hinge_embedding_loss(m.f(2, 4), m.sign(2, 4)),
    "margin_ranking_loss": lambda m: m.F.margin_ranking_loss(m.f(4), m.g(4), m.sign(4)),
    "soft_margin_loss": lambda m: m.F.soft_margin_loss(m.f(2, 4), m.sign(2, 4)),
    "triplet_margin_loss": lambda m: m.F.triplet_margin_loss(m.f(2, 4), m.g(2, 4), m.g(2, 4)),
    "multi_margin_loss": lambda m: m.F.multi_margin_loss(m.f(3, 5), m.long(5, 3)),
    "multilabel_margin_loss": lambda m: m.F.multilabel_margin_loss(
        m.f(2, 4), m.ints([[3, 0, -1, 1], [0, 1, 2, -1]])
    ),
    # (output, is_target): both floating
    "multilabel_margin_loss_forward": lambda m: m.t.ops.aten.multilabel_margin_loss_forward(
        m.f(2, 4), m.ints([[3, 0, -1, 1], [0, 1, 2, -1]]), 1
    ),
    # ctc_loss.Tensor (tensor lengths) and ctc_loss.IntList (tuple lengths)
    "ctc_loss": lambda m: (
        m.F.ctc_loss(m.f(6, 2, 4), m.long(3, 2, 3) + 1, m.ints([6, 6]), m.ints([3, 2])),
        m.F.ctc_loss(m.f(6, 2, 4), m.long(3, 2, 3) + 1, (6, 6), (3, 2)),
    ),
    # --- pooling, padding, sampling, resizing
    "avg_pool3d": lambda m: m.F.avg_pool3d(m.f(1, 2, 4, 4, 4), 2),
    "max_pool3d": lambda m: m.F.max_pool3d(m.f(1, 2, 4, 4, 4), 2),
    "max_unpool2d": lambda m: m.F.max_unpool2d(*m.pooled(2), 2),
    "max_unpool3d": lambda m: m.F.max_unpool3d(*m.pooled(3), 2),
    "adaptive_avg_pool3d": lambda m: m.F.adaptive_avg_pool3d(m.f(1, 2, 4, 4, 4), 2),
    "adaptive_max_pool3d": lambda m: m.F.adaptive_max_pool3d(m.f(1, 2, 4, 4, 4), 2),
    "fractional_max_pool2d": lambda m: m.F.fractional_max_pool2d(m.f(1, 2, 8, 8), 2, output_size=4),
    "fractional_max_pool3d": lambda m: m.F.fractional_max_pool3d(
        m.f(1, 1, 6, 6, 6), 2, output_size=3
    ),
    "reflection_pad1d": lambda m: m.F.pad(m.f(1, 2, 5), (1, 1), mode="reflect"),
    "reflection_pad2d": lambda m: m.F.pad(m.f(1, 2, 5, 5), (1, 1, 1, 1), mode="reflect"),
    "replication_pad1d": lambda m: m.F.pad(m.f(1, 2, 5), (1, 1), mode="replicate"),
    "replication_pad2d": lambda m: m.F.pad(m.f(1, 2, 5, 5), (1, 1, 1, 1), mode="replicate"),
    "replication_pad3d": lambda m: m.F.pad(m.f(1, 2, 3, 3, 3), (1,) * 6, mode="replicate"),
    "grid_sampler": lambda m: m.t.grid_sampler(m.f(1, 2, 4, 4), m.g(1, 3, 3, 2), 0, 0, False),
    "grid_sampler_2d": lambda m: m.t.grid_sampler_2d(m.f(1, 2, 4, 4), m.g(1, 3, 3, 2), 0, 0, False),
    "_grid_sampler_2d_cpu_fallback": lambda m: m.t._grid_sampler_2d_cpu_fallback(
        m.f(1, 2, 4, 4), m.g(1, 3, 3, 2), 0, 0, False
    ),
    "grid_sampler_3d": lambda m: m.t.grid_sampler_3d(
        m.f(1, 2, 3, 3, 3), m.g(1, 2, 2, 2, 3), 0, 0, False
    ),
    "upsample_nearest1d": lambda m: _interp(m, 1, "nearest"),
    "upsample_nearest2d": lambda m: _interp(m, 2, "nearest"),
    "upsample_nearest3d": lambda m: _interp(m, 3, "nearest"),
    "_upsample_nearest_exact1d": lambda m: _interp(m, 1, "nearest-exact"),
    "_upsample_nearest_exact2d": lambda m: _interp(m, 2, "nearest-exact"),
    "_upsample_nearest_exact3d": lambda m: _interp(m, 3, "nearest-exact"),
    "upsample_linear1d": lambda m: _interp(m, 1, "linear"),
    "upsample_bilinear2d": lambda m: _interp(m, 2, "bilinear"),
    "_upsample_bilinear2d_aa": lambda m: _interp(m, 2, "bilinear", antialias=True),
    "upsample_trilinear3d": lambda m: _interp(m, 3, "trilinear"),
    "upsample_bicubic2d": lambda m: _interp(m, 2, "bicubic"),
    "_upsample_bicubic2d_aa": lambda m: _interp(m, 2, "bicubic", antialias=True),
    # --- widest-input ops
    "cat": lambda m: m.t.cat([m.f(2, 3), m.g(2, 3)]),
    "stack": lambda m: m.t.stack([m.f(2, 3), m.g(2, 3)]),
    "index_copy": lambda m: m.t.index_copy(m.f(4, 3), 0, m.ints([0, 2]), m.g(2, 3)),
    "index_put": lambda m: m.t.index_put(m.f(4, 3), (m.ints([0, 2]),), m.g(2, 3)),
    "scatter_add": lambda m: m.t.scatter_add(m.f(3, 4), 1, m.long(4, 3, 2), m.g(3, 2)),
    "bilinear": lambda m: m.F.bilinear(m.f(2, 3), m.g(2, 4), m.g(5, 3, 4), m.g(5)),
    "cross": lambda m: m.t.cross(m.f(2, 3), m.g(2, 3), dim=1),
    "dot": lambda m: m.t.dot(m.f(3), m.g(3)),
    "vdot": lambda m: m.t.vdot(m.f(3), m.g(3)),
    "tensordot": lambda m: m.t.tensordot(m.f(3, 4), m.g(4, 5), dims=1),
    # --- fft
    "fft_fft": lambda m: m.t.fft.fft(m.f(8)),
    "fft_ifft": lambda m: m.t.fft.ifft(m.f(8)),
    "fft_fft2": lambda m: m.t.fft.fft2(m.f(4, 4)),
    "fft_ifft2": lambda m: m.t.fft.ifft2(m.f(4, 4)),
    "fft_fftn": lambda m: m.t.fft.fftn(m.f(2, 4, 4)),
    "fft_ifftn": lambda m: m.t.fft.ifftn(m.f(2, 4, 4)),
    "fft_rfft": lambda m: m.t.fft.rfft(m.f(8)),
    "fft_irfft": lambda m: m.t.fft.irfft(m.f(5)),
    "fft_rfft2": lambda m: m.t.fft.rfft2(m.f(4, 4)),
    "fft_irfft2": lambda m: m.t.fft.irfft2(m.f(4, 3)),
    "fft_rfftn": lambda m: m.t.fft.rfftn(m.f(2, 4, 4)),
    "fft_irfftn": lambda m: m.t.fft.irfftn(m.f(2, 4, 3)),
    "fft_hfft": lambda m: m.t.fft.hfft(m.f(5)),
    "fft_ihfft": lambda m: m.t.fft.ihfft(m.f(8)),
    "stft": lambda m: m.t.stft(m.f(64), 16, window=m.g(16, lo=0.5, hi=1.0), return_complex=True),
    # --- linear algebra
    "inverse": lambda m: m.t.inverse(m.spd()),
    "pinverse": lambda m: m.t.pinverse(m.f(3, 4)),
    "linalg_inv": lambda m: m.t.linalg.inv(m.spd()),
    "linalg_inv_ex": lambda m: m.t.linalg.inv_ex(m.spd()),
    "linalg_solve": lambda m: m.t.linalg.solve(m.spd(), m.f(3, 2)),
    "linalg_cholesky": lambda m: m.t.linalg.cholesky(m.spd()),
    "linalg_cholesky_ex": lambda m: m.t.linalg.cholesky_ex(m.spd()),
    "linalg_cond": lambda m: (m.t.linalg.cond(m.spd()), m.t.linalg.cond(m.spd(), "fro")),
    "linalg_svd": lambda m: m.t.linalg.svd(m.f(3, 4)),
    "linalg_svdvals": lambda m: m.t.linalg.svdvals(m.f(3, 4)),
    "linalg_eig": lambda m: m.t.linalg.eig(m.spd()),
    "linalg_eigvals": lambda m: m.t.linalg.eigvals(m.spd()),
    "linalg_eigh": lambda m: m.t.linalg.eigh(m.spd()),
    "linalg_eigvalsh": lambda m: m.t.linalg.eigvalsh(m.spd()),
    "linalg_qr": lambda m: m.t.linalg.qr(m.f(4, 3)),
    "linalg_lstsq": lambda m: m.t.linalg.lstsq(m.f(4, 3), m.f(4, 2)),
    "linalg_householder_product": lambda m: m.t.linalg.householder_product(*m.geqrf()),
    "linalg_tensorinv": lambda m: m.t.linalg.tensorinv(m.spd(6).reshape(2, 3, 6), ind=2),
    "linalg_tensorsolve": lambda m: m.t.linalg.tensorsolve(m.spd(6).reshape(2, 3, 6), m.f(2, 3)),
    "cholesky": lambda m: m.t.cholesky(m.spd()),
    "cholesky_inverse": lambda m: m.t.cholesky_inverse(m.chol()),
    "cholesky_solve": lambda m: m.t.cholesky_solve(m.f(3, 2), m.chol()),
    "lu_solve": lambda m: m.t.lu_solve(m.f(3, 2), *m.lu()),
    "_lu_with_info": lambda m: m.t._lu_with_info(m.spd()),
    "triangular_solve": lambda m: m.t.triangular_solve(m.f(3, 2), m.upper()),
    "geqrf": lambda m: m.t.geqrf(m.f(4, 3)),
    "orgqr": lambda m: m.t.orgqr(*m.geqrf()),
    "ormqr": lambda m: m.t.ormqr(*m.geqrf(), m.f(4, 2)),
    "qr": lambda m: m.t.qr(m.f(4, 3)),
    "linalg_matrix_sqrth": lambda m: m.t.linalg.matrix_sqrth(m.spd()),
    "svd": lambda m: m.t.svd(m.f(3, 4)),
    # --- unlisted everywhere (controls)
    "relu": lambda m: m.F.relu(m.f(4)),
    "gelu": lambda m: m.F.gelu(m.f(4)),
    "sigmoid": lambda m: m.t.sigmoid(m.f(4)),
    "tanh": lambda m: m.t.tanh(m.f(4)),
    "mean": lambda m: m.f(3, 4).mean(),
    "mul": lambda m: m.f(4) * m.f(4),
    "add": lambda m: m.f(4) + m.f(4),
    "div": lambda m: m.f(4) / m.pos(4),
    "var": lambda m: m.f(3, 4).var(),
}

# Python-level names of [python_aliases], called the way user code calls them.
ALIAS_CASES: dict[str, Case] = {
    "__matmul__": lambda m: m.f(3, 4) @ m.g(4, 5),
    "__rmatmul__": lambda m: m.g(4, 5).__rmatmul__(m.f(3, 4)),
    "__pow__": lambda m: m.f(4) ** 2,
    "__rpow__": lambda m: 2 ** m.f(4),
    "square": lambda m: (m.t.square(m.f(4)), m.f(4).square()),
    "__rdiv__": lambda m: m.pos(4).__rdiv__(1),
    "__rtruediv__": lambda m: 1 / m.pos(4),
    "cross_entropy": lambda m: (
        m.F.cross_entropy(m.f(3, 5), m.long(5, 3)),
        m.F.cross_entropy(m.f(3, 5), m.long(5, 3), label_smoothing=0.1),
        m.F.cross_entropy(m.f(3, 5), m.prob(3, 5)),
    ),
    "softmin": lambda m: m.F.softmin(m.f(3, 4), dim=1),
    "interpolate": lambda m: (
        m.F.interpolate(m.f(1, 2, 4, 4), scale_factor=2),
        m.F.interpolate(m.f(1, 2, 4, 4), scale_factor=2, mode="bilinear"),
    ),
    "upsample": lambda m: m.F.upsample(m.f(1, 2, 4, 4), scale_factor=2),
    "upsample_nearest": lambda m: m.F.upsample_nearest(m.f(1, 2, 4, 4), scale_factor=2),
    "upsample_bilinear": lambda m: m.F.upsample_bilinear(m.f(1, 2, 4, 4), scale_factor=2),
    "normalize": lambda m: m.F.normalize(m.f(3, 4), dim=1),
    "linalg_norm": lambda m: (m.t.linalg.norm(m.f(3, 4)), m.t.linalg.norm(m.f(3, 4), dim=1)),
    "pairwise_distance": lambda m: m.F.pairwise_distance(m.f(3, 4), m.g(3, 4)),
    "grid_sample": lambda m: m.F.grid_sample(m.f(1, 2, 4, 4), m.g(1, 3, 3, 2), align_corners=False),
}

# Autocast kernels registered only by builds with cuDNN.
CUDNN_BUILD_ONLY = {"_cudnn_rnn"}

# Lower-precision CUDA kernels that cast to one dtype whatever the autocast dtype:
# _cudnn_rnn_cast_reflatten casts input and weights to kHalf (read in AutocastRNN.cpp; a
# prediction until a CUDA run checks it: under bfloat16 autocast nn.LSTM returns float16).
CUDA_FLOAT16 = {"_cudnn_rnn": "float16"}

# Kernels that exist only for CUDA.
CUDA_ONLY = {
    "_cudnn_rnn",
    "cudnn_convolution",
    "cudnn_convolution_transpose",
    "_thnn_fused_lstm_cell",
    "_thnn_fused_gru_cell",
    "_scaled_dot_product_flash_attention",
}

# Listed ops that the dtype test does not call, and why.
NOT_CALLED = {
    "linalg_matrix_rank": "returns an int64 rank; its dtype says nothing about the cast",
}

# The tables describe each op's own autocast registration. An unlisted composite op
# (CompositeImplicitAutograd) runs its inner ops through autocast again, so a listed inner op
# can decide its output dtype. (device, op) -> (the category it behaves as, why).
EFFECTIVE: dict[tuple[str, str], tuple[str, str]] = {
    ("cpu", "einsum"): ("lower_precision", "composite: bmm"),
    ("cpu", "tensordot"): ("lower_precision", "composite: mm"),
    ("cpu", "chain_matmul"): ("lower_precision", "composite: mm"),
    ("cpu", "linalg_multi_dot"): ("lower_precision", "composite: mm"),
    ("cpu", "rnn_tanh_cell"): ("lower_precision", "composite: tanh(linear + linear)"),
    ("cpu", "rnn_relu_cell"): ("lower_precision", "composite: relu(linear + linear)"),
}

# Unlisted ops whose CPU kernel has no bf16/fp16 version: with low-precision inputs under
# CPU autocast they raise (op -> the error, a regex), which shows that autocast leaves their
# inputs alone. Code that feeds them the output of a listed op fails the same way.
CPU_NO_LOW_PRECISION_KERNEL = {
    "pdist": '"pdist" not implemented for',
    "nuclear_norm": "linalg.matrix_norm: Low precision dtypes not supported",
    "_upsample_bilinear2d_aa": '"compute_index_ranges_weights" not implemented for',
    "_upsample_bicubic2d_aa": '"compute_index_ranges_weights" not implemented for',
}

# Listed ops whose kernel may be missing for low precision on the machine running the test:
# oneDNN has bf16/fp16 LSTM primitives only on CPUs with the matching instructions
# (AVX512-BF16/AMX); elsewhere the cast inputs make it raise this message.
ONEDNN_LOW_PRECISION = {"mkldnn_rnn_layer": "could not create a primitive descriptor"}


def floating_dtypes(torch: Any, result: Any) -> list[Any]:
    """The dtypes of the floating and complex tensors in a result (complex -> its real)."""
    items = result if isinstance(result, (tuple, list)) else (result,)
    dtypes = []
    for item in items:
        if isinstance(item, torch.Tensor) and (item.is_floating_point() or item.is_complex()):
            dtypes.append(item.real.dtype if item.is_complex() else item.dtype)
    return dtypes


def run_case(torch: Any, device: str, low: Any | None, case: Case, first: Any, second: Any) -> Any:
    """Call `case` with inputs in (first, second), under torch.autocast(device, dtype=low)
    unless `low` is None."""
    maker = Maker(torch, device, first, second)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        region = torch.autocast(device, dtype=low) if low is not None else contextlib.nullcontext()
        with region:
            return case(maker)


def check_op(
    torch: Any,
    device: str,
    low_name: str,
    op: str,
    case: Case,
    category: str,
    *,
    no_low_kernel: str | None = None,
    note: str = "",
    produces: str | None = None,
) -> None:
    """Call `op` under autocast and check its output dtype against `category`.

    `no_low_kernel`: for an unlisted op, the error (regex) that low-precision inputs raise.
    `produces`: for a lower_precision op that casts to a fixed dtype, not the autocast one.
    """
    low = getattr(torch, low_name)
    f32 = torch.float32
    where = f"{op} on {device} under autocast({low_name}), torch {torch.__version__}{note}"

    def expect(first: Any, second: Any, want: Any, what: str) -> None:
        got = floating_dtypes(torch, run_case(torch, device, low, case, first, second))
        assert got, f"{where}: the call returned no floating tensor"
        assert all(dtype == want for dtype in got), (
            f"{where}: table says {category}; {what} gave {got}, expected {want}"
        )

    if category == "lower_precision":
        expect(f32, f32, getattr(torch, produces) if produces else low, "float32 inputs")
    elif category == "float32":
        expect(low, low, f32, f"{low_name} inputs")
    elif category == "promote":
        expect(low, f32, f32, f"({low_name}, float32) inputs")
        expect(low, low, low, f"{low_name} inputs")
    elif category == "banned":
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            run_case(torch, device, low, case, low, low)
    else:
        assert category == "unlisted", category
        expect(f32, f32, f32, "float32 inputs")
        if no_low_kernel is not None:
            with pytest.raises(RuntimeError, match=no_low_kernel):
                run_case(torch, device, low, case, low, low)
        else:
            expect(low, low, low, f"{low_name} inputs")


# ---------------------------------------------------------------------------------------
# CPU: the installed torch
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def torch() -> Any:
    return pytest.importorskip(
        "torch", reason="torch is not installed: the op tables are checked against it"
    )


CPU_OPS = sorted(
    op for op in CASES if op not in CUDA_ONLY and table_category("cpu", op) != "banned"
)


def test_every_table_op_is_called_or_explained() -> None:
    for device in DEVICES:
        missing = set(table_ops(device)) - set(CASES) - set(NOT_CALLED)
        assert not missing, f"[{device}] ops with neither a call nor a reason: {sorted(missing)}"
    assert set(ALIAS_CASES) == set(RAW["python_aliases"])


@pytest.mark.parametrize("low_name", LOW_DTYPES)
@pytest.mark.parametrize("op", CPU_OPS)
def test_cpu_autocast_output_dtype(torch: Any, op: str, low_name: str) -> None:
    category = table_category("cpu", op)
    skip_if_not_in_this_torch(torch, op, category)
    note = ""
    if ("cpu", op) in EFFECTIVE:
        assert category == "unlisted", f"{op} is listed on cpu now: drop it from EFFECTIVE"
        category, why = EFFECTIVE["cpu", op]
        note = f" (unlisted, expected to behave as {category}: {why})"
    no_low_kernel = CPU_NO_LOW_PRECISION_KERNEL.get(op)
    try:
        check_op(
            torch, "cpu", low_name, op, CASES[op], category, no_low_kernel=no_low_kernel, note=note
        )
    except RuntimeError as exc:
        if op in ONEDNN_LOW_PRECISION and ONEDNN_LOW_PRECISION[op] in str(exc):
            xfail_without_onednn_kernel(torch, op, low_name, exc)
        raise


def skip_if_not_in_this_torch(torch: Any, op: str, category: str) -> None:
    """Ops come and go between releases (2.14 removed aten::cholesky and aten::qr and added
    linalg_matrix_sqrth): an op the installed torch lacks is skipped, but only where the
    table agrees that the release has no autocast kernel for it."""
    try:
        getattr(torch.ops.aten, op)
    except (AttributeError, RuntimeError):
        assert category == "unlisted", f"the table lists {op} as {category}, torch has no such op"
        pytest.skip(f"torch {torch.__version__} has no aten::{op}")


def xfail_without_onednn_kernel(torch: Any, op: str, low_name: str, exc: Exception) -> None:
    """Show that autocast did cast: the same call runs in float32 without autocast and raises
    the same error with explicit low-precision inputs; then report an expected failure."""
    low = getattr(torch, low_name)
    plain = floating_dtypes(
        torch, run_case(torch, "cpu", None, CASES[op], torch.float32, torch.float32)
    )
    assert plain and all(dtype == torch.float32 for dtype in plain)
    with pytest.raises(RuntimeError, match=ONEDNN_LOW_PRECISION[op]):
        run_case(torch, "cpu", None, CASES[op], low, low)
    pytest.xfail(
        f"{op} is cast to {low_name} by CPU autocast (torch {torch.__version__}), but this "
        f"CPU ({torch.backends.cpu.get_cpu_capability()}) has no oneDNN {low_name} kernel "
        f"for it: {str(exc).splitlines()[0]}"
    )


@pytest.mark.parametrize("low_name", LOW_DTYPES)
@pytest.mark.parametrize("alias", sorted(ALIAS_CASES))
def test_cpu_python_alias_output_dtype(torch: Any, alias: str, low_name: str) -> None:
    check_op(torch, "cpu", low_name, alias, ALIAS_CASES[alias], table_category("cpu", alias))


@pytest.mark.parametrize(
    ("device", "dispatch_key"), [("cpu", "AutocastCPU"), ("cuda", "AutocastCUDA")]
)
def test_tables_match_the_dispatcher_registrations(
    torch: Any, device: str, dispatch_key: str
) -> None:
    """Every op with an autocast kernel for the device is in the table, and nothing else.
    The registrations are compiled into every build, so a CPU-only torch has the CUDA ones."""
    registered = autocast_registrations(torch, device)
    if registered is None:
        pytest.skip("this torch has no _dispatch_get_registrations_for_dispatch_key")
    listed = set(table_ops(device))
    if not torch.version.cuda and device == "cuda":
        # Registered in aten/src/ATen/native/cudnn, compiled only into builds with cuDNN.
        listed -= CUDNN_BUILD_ONLY
    wanted = RAW["meta"]["torch_version"]
    if not same_release(torch.__version__, wanted):
        pytest.skip(
            f"tables are for torch {wanted}, installed {torch.__version__}: only registered "
            f"{sorted(registered - listed)}, only listed {sorted(listed - registered)}"
        )
    assert registered == listed, (
        f"{dispatch_key} in torch {torch.__version__}: registered but not listed "
        f"{sorted(registered - listed)}; listed but not registered {sorted(listed - registered)}"
    )


# ---------------------------------------------------------------------------------------
# CUDA: runs only where torch.cuda.is_available()
# ---------------------------------------------------------------------------------------


CUDA_OPS = sorted(set(table_ops("cuda")) - set(NOT_CALLED)) + sorted(
    {"relu", "gelu", "sigmoid", "tanh", "mean", "mul", "add", "div", "var"}
)


@pytest.fixture(scope="module")
def cuda_torch(torch: Any) -> Any:
    if not torch.cuda.is_available():
        pytest.skip(f"CUDA is not available (torch {torch.__version__}): CUDA table not checked")
    return torch


def _skip_unsupported_bf16(torch: Any, low_name: str) -> None:
    if low_name == "bfloat16" and not torch.cuda.is_bf16_supported():
        pytest.skip("this GPU does not support bfloat16")


@pytest.mark.parametrize("low_name", LOW_DTYPES)
@pytest.mark.parametrize("op", CUDA_OPS)
def test_cuda_autocast_output_dtype(cuda_torch: Any, op: str, low_name: str) -> None:
    _skip_unsupported_bf16(cuda_torch, low_name)
    category = table_category("cuda", op)
    skip_if_not_in_this_torch(cuda_torch, op, category)
    produces = CUDA_FLOAT16.get(op)
    try:
        check_op(cuda_torch, "cuda", low_name, op, CASES[op], category, produces=produces)
    except AssertionError:
        xfail_if_version_drift(cuda_torch, "cuda", op, category)
        raise


DISPATCH_KEYS = {"cpu": "AutocastCPU", "cuda": "AutocastCUDA"}


def same_release(installed: str, table: str) -> bool:
    """Whether an installed torch ("2.12.0+cu130") is the release a table describes
    ("2.12.1"): tables are per minor release; patch releases do not change autocast."""
    return installed.split("+")[0].split(".")[:2] == table.split(".")[:2]


def autocast_registrations(torch: Any, device: str) -> set[str] | None:
    registrations = getattr(torch._C, "_dispatch_get_registrations_for_dispatch_key", None)
    if registrations is None:
        return None
    return {
        name[len("aten::") :].split(".")[0]
        for name in registrations(DISPATCH_KEYS[device])
        if name.startswith("aten::")
    }


def xfail_if_version_drift(torch: Any, device: str, op: str, category: str) -> None:
    """A mismatch on an op whose autocast registration differs between the tables' torch and
    the installed one is a version difference, reported as such (the tables follow one torch)."""
    wanted = RAW["meta"]["torch_version"]
    installed = torch.__version__
    registered = autocast_registrations(torch, device)
    if same_release(installed, wanted) or registered is None:
        return
    if (op in registered) != (op in table_ops(device)):
        pytest.xfail(
            f"{op} on {device}: the tables (torch {wanted}) say {category}, but torch "
            f"{installed} {'registers' if op in registered else 'has no'} autocast kernel for "
            "it: a difference between torch versions"
        )


@pytest.mark.parametrize("low_name", LOW_DTYPES)
@pytest.mark.parametrize("alias", sorted(ALIAS_CASES))
def test_cuda_python_alias_output_dtype(cuda_torch: Any, alias: str, low_name: str) -> None:
    _skip_unsupported_bf16(cuda_torch, low_name)
    check_op(cuda_torch, "cuda", low_name, alias, ALIAS_CASES[alias], table_category("cuda", alias))
