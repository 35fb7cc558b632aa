"""When an fp32 island (`with torch.autocast(device, enabled=False):` around one statement) can
change nothing but the call it was opened for."""

from __future__ import annotations

import libcst as cst


class _CallCounter(cst.CSTVisitor):
    def __init__(self) -> None:
        self.calls = 0
        self.matmuls = 0

    def visit_Call(self, node: cst.Call) -> None:
        self.calls += 1

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, cst.MatrixMultiply):
            self.matmuls += 1


def island_changes_only_the_call(line: cst.SimpleStatementLine) -> bool:
    """Whether the statement holds a single call (the one the island is for) and multiplies no
    matrices: autocast then has nothing else in the statement to cast, so disabling it around the
    statement changes only that call."""
    counter = _CallCounter()
    line.visit(counter)
    return counter.calls == 1 and counter.matmuls == 0
