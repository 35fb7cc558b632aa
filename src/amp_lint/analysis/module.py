"""Per-module facts shared by every rule: the tree, its imports, its path."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from amp_lint.analysis.names import ModuleNames
from amp_lint.config import Config


@dataclass
class ModuleFacts:
    path: str
    module: cst.Module
    names: ModuleNames
    config: Config
