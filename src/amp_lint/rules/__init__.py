"""Rule modules register themselves by subclassing Rule; importing this package loads them all."""

from __future__ import annotations

import importlib
import pkgutil

from amp_lint.rules.base import Report, Rule, registered_rules


def all_rules() -> list[type[Rule]]:
    """Every rule class, ordered by code."""
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("amp"):
            importlib.import_module(f"{__name__}.{info.name}")
    return list(registered_rules().values())


__all__ = ["Report", "Rule", "all_rules"]
