"""Apply the edits of many fixes to one module in a single pass, then fix up imports."""

from __future__ import annotations

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


def _fix_imports(module: cst.Module, applied: list[Finding]) -> cst.Module:
    context = CodemodContext()
    needs_work = False
    for finding in applied:
        assert finding.fix is not None
        for name in finding.fix.imports:
            AddImportsVisitor.add_needed_import(context, name)
            needs_work = True
        for from_module, name in finding.fix.unused_imports:
            RemoveImportsVisitor.remove_unused_import(context, from_module, name)
            needs_work = True
    if not needs_work:
        return module
    module = AddImportsVisitor(context).transform_module(module)
    return RemoveImportsVisitor(context).transform_module(module)
