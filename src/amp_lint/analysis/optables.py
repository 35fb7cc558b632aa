"""PyTorch's autocast op lists (package data ``amp_lint/data/autocast_ops.toml``).

The tables say, per device, what ``torch.autocast`` does to the output dtype of an aten op:
cast to the autocast dtype, run in float32, run in the widest input dtype, refuse to run,
or (unlisted) run in whatever dtype the inputs already have.
"""

from __future__ import annotations

import enum
import functools
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11 only
    import tomli as tomllib

__all__ = ["DATA_FILE", "OpCategory", "OpTables", "load_op_tables", "parse_op_tables"]

#: The package-data file, relative to the ``amp_lint`` package.
DATA_FILE = "data/autocast_ops.toml"
_DATA_PARTS = ("data", "autocast_ops.toml")


class OpCategory(enum.Enum):
    """What autocast does to the output dtype of one op on one device."""

    LOWER_PRECISION = "lower_precision"  # output in the autocast dtype (fp16/bf16)
    FLOAT32 = "float32"  # output float32
    PROMOTE = "promote"  # output in the widest floating input dtype
    BANNED = "banned"  # raises under autocast
    UNLISTED = "unlisted"  # not touched: output in the input dtype


# The table keys of one device section, in TOML order.
_LISTED: tuple[OpCategory, ...] = (
    OpCategory.LOWER_PRECISION,
    OpCategory.FLOAT32,
    OpCategory.PROMOTE,
    OpCategory.BANNED,
)

# Devices without their own section that register the same lists as another one.
# XPU registers the CUDA macros and the binary_cross_entropy ban (autocast_mode.cpp).
_SHARED_TABLES: dict[str, str] = {"xpu": "cuda"}


@dataclass(frozen=True)
class OpTables:
    """The autocast op lists for one torch version."""

    torch_version: str
    #: device ("cuda", "cpu") -> aten op name -> category; unlisted ops are absent.
    devices: dict[str, dict[str, OpCategory]]
    #: Python-level callable name -> aten op name that decides its category.
    python_aliases: dict[str, str]

    def _table(self, device: str) -> Mapping[str, OpCategory] | None:
        name = device.strip().lower().split(":", 1)[0]  # "cuda:0" -> "cuda"
        name = _SHARED_TABLES.get(name, name)
        return self.devices.get(name)

    def resolve(self, op: str) -> str:
        """The aten op name for ``op`` (a Python-level name or already an aten name)."""
        return self.python_aliases.get(op, op)

    def category(self, device: str, op: str) -> OpCategory:
        """The category of ``op`` under autocast on ``device``.

        ``op`` is an aten name or a Python-level name from ``python_aliases``. ``device`` is
        "cuda", "cpu" or "xpu" (which shares the CUDA lists), optionally with an index
        ("cuda:0"). Any other device has no lists here, so every op is UNLISTED there.
        """
        table = self._table(device)
        if table is None:
            return OpCategory.UNLISTED
        return table.get(self.resolve(op), OpCategory.UNLISTED)

    def categories_for_unknown_device(self, op: str) -> set[OpCategory]:
        """The categories ``op`` may have when the device is not known: CUDA's and CPU's."""
        return {self.category("cuda", op), self.category("cpu", op)}

    def ops(self, device: str, category: OpCategory) -> frozenset[str]:
        """The aten op names of one category on ``device`` (empty for UNLISTED)."""
        table = self._table(device)
        if table is None:
            return frozenset()
        return frozenset(op for op, cat in table.items() if cat is category)


def _str_list(value: object, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"{DATA_FILE}: {where} must be a list of strings")
    return [item for item in value if isinstance(item, str)]


def parse_op_tables(text: str) -> OpTables:
    """Build :class:`OpTables` from the TOML text of ``autocast_ops.toml``."""
    data = tomllib.loads(text)
    meta = data.get("meta")
    if not isinstance(meta, dict) or not isinstance(meta.get("torch_version"), str):
        raise ValueError(f"{DATA_FILE}: [meta] torch_version must be a string")
    torch_version: str = meta["torch_version"]

    devices: dict[str, dict[str, OpCategory]] = {}
    for device in ("cuda", "cpu"):
        section = data.get(device)
        if not isinstance(section, dict):
            raise ValueError(f"{DATA_FILE}: missing [{device}] table")
        unknown = set(section) - {cat.value for cat in _LISTED}
        if unknown:
            raise ValueError(f"{DATA_FILE}: unknown keys in [{device}]: {sorted(unknown)}")
        table: dict[str, OpCategory] = {}
        for category in _LISTED:
            for op in _str_list(section.get(category.value, []), f"{device}.{category.value}"):
                previous = table.setdefault(op, category)
                if previous is not category:
                    raise ValueError(
                        f"{DATA_FILE}: {op!r} is both {previous.value} and "
                        f"{category.value} in [{device}]"
                    )
        devices[device] = table

    aliases_raw = data.get("python_aliases", {})
    if not isinstance(aliases_raw, dict) or not all(
        isinstance(value, str) for value in aliases_raw.values()
    ):
        raise ValueError(f"{DATA_FILE}: [python_aliases] values must be strings")
    python_aliases = {str(key): str(value) for key, value in aliases_raw.items()}
    return OpTables(torch_version=torch_version, devices=devices, python_aliases=python_aliases)


@functools.lru_cache(maxsize=1)
def load_op_tables() -> OpTables:
    """The op tables shipped with amp-lint (read once, then cached)."""
    resource = resources.files("amp_lint")
    for part in _DATA_PARTS:  # one part per joinpath: Python 3.9's Traversable takes one
        resource = resource.joinpath(part)
    text = resource.read_text(encoding="utf-8")
    return parse_op_tables(text)
