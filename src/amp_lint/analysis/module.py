"""Per-module facts shared by every rule: the tree, its imports, its path."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import CodeRange

from amp_lint.analysis.names import ModuleNames
from amp_lint.config import Config


@dataclass
class ModuleFacts:
    path: str
    module: cst.Module
    names: ModuleNames
    config: Config
    positions: Mapping[cst.CSTNode, CodeRange] = field(default_factory=dict)

    def line_of(self, node: cst.CSTNode) -> int:
        return self.positions[node].start.line
