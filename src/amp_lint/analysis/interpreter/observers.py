"""What the interpreter hands nodes to as it executes them.

The analysis does not know rules exist: it calls observers, each declaring the node types it
wants. The engine adapts each rule into one (rule_reports.RuleObserver).
"""

from __future__ import annotations

from typing import Protocol

import libcst as cst

from amp_lint.analysis.interpreter.frames import ExecutionContext


class NodeObserver(Protocol):
    @property
    def node_types(self) -> tuple[type[cst.CSTNode], ...]: ...

    def observe(self, node: cst.CSTNode, ctx: ExecutionContext) -> None:
        """Called for each node of `node_types` as the interpreter executes it, in every
        context the node runs in (a function runs once per calling context)."""
