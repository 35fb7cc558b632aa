"""The result cache's entries as data: JSON that names only the types listed here.

A cache directory may be shared between CI jobs or come from someone else's checkout, so
reading an entry must never run code (pickle would: an entry is a program). An entry is
JSON; a dataclass or enum is tagged with its name and rebuilt only if the name is one of
CACHED_TYPES below; tuples, sets and dicts keep their Python type; anything else is refused
when the entry is written, and an entry that does not decode is treated as missing.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from typing import Any, TypeVar

from amp_lint.analysis.project.index import ClassAssumption, EntryContext
from amp_lint.analysis.regions.region import AutocastRegion
from amp_lint.analysis.values.dtypes import DType, DTypeKind
from amp_lint.analysis.values.value import Fp16Graph, Origin, Value
from amp_lint.findings import Finding, Fix, FixSafety, TextEdit

# What the cache holds: findings and their fixes' plain parts, the calls a file makes into
# others with their portable values. The run's own records (a file's cached result, the warm
# run's index and remembered run, run summaries) register themselves with `cached_type`
# where they are defined.
CACHED_TYPES: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (
        AutocastRegion,
        ClassAssumption,
        DType,
        DTypeKind,
        EntryContext,
        Finding,
        Fix,
        FixSafety,
        Fp16Graph,
        Origin,
        TextEdit,
        Value,
    )
}


class CacheCodecError(ValueError):
    """An entry that is not data of the listed types."""


Listed = TypeVar("Listed", bound=type)


def cached_type(cls: Listed) -> Listed:
    """Class decorator: instances of `cls` (a dataclass) may be cache entries."""
    CACHED_TYPES[cls.__name__] = cls
    return cls


def encode(value: object) -> bytes:
    return json.dumps(_to_data(value), separators=(",", ":")).encode("utf-8")


def decode(payload: bytes) -> object:
    try:
        return _from_data(json.loads(payload.decode("utf-8")))
    except (ValueError, TypeError, KeyError, RecursionError) as error:
        raise CacheCodecError(str(error)) from None


def _to_data(value: object) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, enum.Enum):
        return {"$enum": _listed_name(value), "value": value.value}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: _to_data(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"$class": _listed_name(value), "fields": fields}
    if isinstance(value, tuple):
        return {"$tuple": [_to_data(item) for item in value]}
    if isinstance(value, list):
        return [_to_data(item) for item in value]
    if isinstance(value, (set, frozenset)):
        tag = "$frozenset" if isinstance(value, frozenset) else "$set"
        return {tag: [_to_data(item) for item in value]}
    if isinstance(value, dict):
        return {"$dict": [[_to_data(key), _to_data(item)] for key, item in value.items()]}
    raise CacheCodecError(f"not cache data: {type(value).__qualname__}")


def _listed_name(value: object) -> str:
    name = type(value).__name__
    if CACHED_TYPES.get(name) is not type(value):
        raise CacheCodecError(f"not a cached type: {type(value).__qualname__}")
    return name


def _from_data(data: Any) -> Any:
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, list):
        return [_from_data(item) for item in data]
    if not isinstance(data, dict) or len(data) not in (1, 2):
        raise CacheCodecError("not an entry of this cache")
    if "$class" in data:
        cls = _listed_type(data["$class"])
        if not dataclasses.is_dataclass(cls):
            raise CacheCodecError(f"{data['$class']} is not a dataclass")
        values = {name: _from_data(item) for name, item in data["fields"].items()}
        return _rebuild(cls, values)
    if "$enum" in data:
        return _listed_type(data["$enum"])(data["value"])
    if "$tuple" in data:
        return tuple(_from_data(item) for item in data["$tuple"])
    if "$frozenset" in data:
        return frozenset(_from_data(item) for item in data["$frozenset"])
    if "$set" in data:
        return {_from_data(item) for item in data["$set"]}
    if "$dict" in data:
        return {_from_data(key): _from_data(item) for key, item in data["$dict"]}
    raise CacheCodecError("not an entry of this cache")


def _listed_type(name: object) -> type[Any]:
    cls = CACHED_TYPES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise CacheCodecError(f"not a cached type: {name!r}")
    return cls


def _rebuild(cls: type[Any], values: dict[str, Any]) -> Any:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if set(values) != set(fields):
        raise CacheCodecError(f"{cls.__name__}: other fields than this version's")
    instance = cls(**{name: item for name, item in values.items() if fields[name].init})
    for name, item in values.items():
        if not fields[name].init:
            object.__setattr__(instance, name, item)
    return instance
