"""Apply the edits of many fixes to one module in a single pass, then fix up imports."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor

from amp_lint.findings import Finding, Replacement


class FixConflict(Exception):
    pass


def apply_fixes(module: cst.Module, findings: list[Finding]) -> tuple[cst.Module, list[Finding]]:
    """Apply the fixes whose edits do not overlap an earlier fix's edits.

    Returns the new module and the findings whose fixes were applied. Overlapping fixes are
    left for the next pass, which re-lints the result.
    """
    claimed: set[int] = set()
    replacements: dict[int, Replacement] = {}
    applied: list[Finding] = []
    subtree_ids: dict[int, set[int]] = {}
    for finding in findings:
        assert finding.fix is not None
        edits = finding.fix.edits
        if not edits:
            continue
        ids = set()
        for edit in edits:
            key = id(edit.target)
            if key not in subtree_ids:
                subtree_ids[key] = _subtree_ids(edit.target)
            ids |= subtree_ids[key]
        if ids & claimed:
            continue
        claimed |= ids
        for edit in edits:
            replacements[id(edit.target)] = edit.replacement
        applied.append(finding)
    if not applied:
        return module, []
    new_module = module.visit(_ReplaceByIdentity(replacements))
    if not isinstance(new_module, cst.Module):
        raise FixConflict("the module itself was replaced")
    islands = {id(r) for r in replacements.values() if isinstance(r, cst.With)}
    if islands:
        new_module = new_module.visit(_MergeAdjacentIslands(islands))
    return _fix_imports(new_module, applied), applied


def _subtree_ids(node: cst.CSTNode) -> set[int]:
    ids: set[int] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        ids.add(id(current))
        stack.extend(current.children)
    return ids


class _ReplaceByIdentity(cst.CSTTransformer):
    def __init__(self, replacements: dict[int, Replacement]) -> None:
        self.replacements = replacements

    def on_visit(self, node: cst.CSTNode) -> bool:
        # A replaced node's children are not visited: the replacement is final.
        return id(node) not in self.replacements

    def on_leave(  # type: ignore[override]
        self, original_node: cst.CSTNode, updated_node: cst.CSTNode
    ) -> Replacement:
        return self.replacements.get(id(original_node), updated_node)


class _MergeAdjacentIslands(cst.CSTTransformer):
    """Fixes that wrap consecutive statements in the same fp32 island produce one `with`
    block, as a person would write it, rather than one per statement."""

    def __init__(self, created: set[int]) -> None:
        self.created = created

    def leave_IndentedBlock(
        self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        merged: list[cst.BaseStatement] = []
        previous_created = False
        # Identity is checked on the original children: this visit rebuilds the updated ones.
        for original, statement in zip(original_node.body, updated_node.body):
            created = id(original) in self.created
            previous = merged[-1] if merged else None
            if (
                created
                and previous_created
                and isinstance(previous, cst.With)
                and isinstance(statement, cst.With)
                and not statement.leading_lines
                and _same_items(previous, statement)
                and isinstance(previous.body, cst.IndentedBlock)
                and isinstance(statement.body, cst.IndentedBlock)
            ):
                merged[-1] = previous.with_changes(
                    body=previous.body.with_changes(
                        body=[*previous.body.body, *statement.body.body]
                    )
                )
            else:
                merged.append(statement)
            previous_created = created
        return updated_node.with_changes(body=merged)


def _same_items(first: cst.With, second: cst.With) -> bool:
    render = cst.Module([]).code_for_node
    return [render(i) for i in first.items] == [render(i) for i in second.items]


def _fix_imports(module: cst.Module, applied: list[Finding]) -> cst.Module:
    context = CodemodContext()
    needs_work = False
    for finding in applied:
        assert finding.fix is not None
        for module_name in finding.fix.imports:
            AddImportsVisitor.add_needed_import(context, module_name)
            needs_work = True
        for from_module, name, alias in finding.fix.unused_imports:
            RemoveImportsVisitor.remove_unused_import(context, from_module, name, alias)
            needs_work = True
    if not needs_work:
        return module
    module = AddImportsVisitor(context).transform_module(module)
    return _RemoveImportsKeepingComments(context).transform_module(module)


class _RemoveImportsKeepingComments(RemoveImportsVisitor):
    """libcst's import remover drops a removed import line together with the comments and
    blank lines above it; this one hands them to the next statement instead."""

    def __init__(self, context: CodemodContext) -> None:
        super().__init__(context)
        self._emptied: set[int] = set()

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine:
        if not updated_node.body:
            self._emptied.add(id(original_node))
        return updated_node

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        module = super().leave_Module(original_node, updated_node)
        return module.with_changes(body=self._carry_lines(original_node.body, module.body))

    def leave_IndentedBlock(
        self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        return updated_node.with_changes(
            body=self._carry_lines(original_node.body, updated_node.body)
        )

    def _carry_lines(
        self, original: Sequence[cst.BaseStatement], updated: Sequence[cst.BaseStatement]
    ) -> list[cst.BaseStatement]:
        kept = iter(updated)
        result: list[cst.BaseStatement] = []
        pending: list[cst.EmptyLine] = []
        for statement in original:
            if id(statement) in self._emptied:
                pending.extend(getattr(statement, "leading_lines", ()))
                continue
            current = next(kept, None)
            if current is None:
                break
            if pending and hasattr(current, "leading_lines"):
                current = current.with_changes(leading_lines=[*pending, *current.leading_lines])
                pending = []
            result.append(current)
        result.extend(kept)
        return result
