"""Apply the edits of many fixes to one module in a single pass, then fix up imports."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import RemoveImportsVisitor

from amp_lint.analysis.syntax.outline import child_nodes, small_statements, subtree_nodes
from amp_lint.findings import Finding, Replacement
from amp_lint.fixes.import_placement import add_module_import


class FixConflict(Exception):
    pass


def apply_fixes(
    module: cst.Module, findings: list[Finding], path: str | None = None
) -> tuple[cst.Module, list[Finding]]:
    """Apply the fixes whose edits do not overlap an earlier fix's edits.

    Returns the new module and the findings whose fixes were applied. Overlapping fixes are
    left for the next pass, which re-lints the result. `path`, the file's, tells the
    project's own packages from third-party ones where an added import goes.
    """
    claimed: set[int] = set()
    replacements: dict[int, Replacement] = {}
    applied: list[Finding] = []
    subtree_ids: dict[int, set[int]] = {}
    # A fix of many places (AMP401's on an import: every use through it) yields to the fixes
    # of single places it overlaps, so that each finding is fixed as itself; the next pass
    # re-lints what is left.
    for finding in sorted(findings, key=lambda f: len(f.fix.edits) if f.fix else 0):
        assert finding.fix is not None
        edits = finding.fix.edits
        if not edits:
            continue
        ids = set()
        for edit in edits:
            key = id(edit.target)
            if key not in subtree_ids:
                subtree_ids[key] = {id(node) for node in subtree_nodes(edit.target)}
            ids |= subtree_ids[key]
        if ids & claimed:
            continue
        claimed |= ids
        for edit in edits:
            replacements[id(edit.target)] = edit.replacement
        applied.append(finding)
    if not applied:
        return module, []
    position = {id(finding): i for i, finding in enumerate(findings)}
    applied.sort(key=lambda finding: position[id(finding)])
    islands = {id(r) for r in replacements.values() if isinstance(r, cst.With)}
    replacer = _ReplaceByIdentity(replacements, islands, _paths_to(module, set(replacements)))
    new_module = module.visit(replacer)
    if len(replacer.done) < len(replacements):
        # A target the quick walk did not reach (a node in a token field): visit everything.
        replacer = _ReplaceByIdentity(replacements, islands, None)
        new_module = module.visit(replacer)
    if not isinstance(new_module, cst.Module):
        raise FixConflict("the module itself was replaced")
    return _fix_imports(new_module, applied, path), applied


def _paths_to(root: cst.CSTNode, targets: set[int]) -> set[int]:
    """The ids of the nodes on the way from `root` to each target, targets included; found
    by reading node fields (outline.child_nodes), far cheaper than a libcst visit."""
    on_path: set[int] = set()
    path: list[cst.CSTNode] = []
    stack: list[tuple[cst.CSTNode, int]] = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        del path[depth:]
        path.append(node)
        if id(node) in targets:
            on_path.update(id(ancestor) for ancestor in path)
            continue  # a replacement is final: nothing below it is replaced
        stack.extend((child, depth + 1) for child in child_nodes(node))
    return on_path


class _ReplaceByIdentity(cst.CSTTransformer):
    """Replaces nodes by identity, entering only the nodes on the way to one (`paths`; None
    enters everything): libcst rebuilds every node a visit enters, which on a large file
    costs more than the analysis. Fixes that wrap consecutive statements of a block in the
    same fp32 island (`islands`, the ids of the `with` statements created) become one `with`
    block, as a person would write it, rather than one per statement."""

    def __init__(
        self, replacements: dict[int, Replacement], islands: set[int], paths: set[int] | None
    ) -> None:
        self.replacements = replacements
        self.islands = islands
        self.paths = paths
        self.done: set[int] = set()

    def on_visit(self, node: cst.CSTNode) -> bool:
        # A replaced node's children are not visited: the replacement is final.
        if id(node) in self.replacements:
            return False
        return self.paths is None or id(node) in self.paths

    def on_leave(  # type: ignore[override]
        self, original_node: cst.CSTNode, updated_node: cst.CSTNode
    ) -> Replacement:
        replacement = self.replacements.get(id(original_node))
        if replacement is not None:
            self.done.add(id(original_node))
            return replacement
        if self.islands and isinstance(updated_node, cst.IndentedBlock):
            return _merge_adjacent_islands(updated_node, self.islands)
        return updated_node


def _merge_adjacent_islands(block: cst.IndentedBlock, islands: set[int]) -> cst.IndentedBlock:
    merged: list[cst.BaseStatement] = []
    previous_created = False
    changed = False
    for statement in block.body:
        created = id(statement) in islands
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
                body=previous.body.with_changes(body=[*previous.body.body, *statement.body.body])
            )
            changed = True
        else:
            merged.append(statement)
        previous_created = created
    return block.with_changes(body=merged) if changed else block


def _same_items(first: cst.With, second: cst.With) -> bool:
    render = cst.Module([]).code_for_node
    return [render(i) for i in first.items] == [render(i) for i in second.items]


def _fix_imports(module: cst.Module, applied: list[Finding], path: str | None) -> cst.Module:
    """Add the imports the fixes need, where isort would put them (import_placement), and
    remove the ones they may have left unused.

    Each import is asked for once, however many fixes name it (a file of a thousand
    `autocast()` calls names the same one a thousand times), and libcst's remover, which
    rebuilds the whole tree, runs only when there is something to do: an `import torch`
    already at the top of the module needs no adding.
    """
    needed: dict[str, None] = {}
    unused: dict[tuple[str, str | None, str | None], None] = {}
    for finding in applied:
        assert finding.fix is not None
        needed.update(dict.fromkeys(finding.fix.imports))
        unused.update(dict.fromkeys(finding.fix.unused_imports))
    missing = [name for name in needed if name not in _plain_imports(module)]
    if not missing and not unused:
        return module
    for module_name in missing:
        module = add_module_import(module, module_name, path)
    if unused:
        context = CodemodContext()
        for from_module, name, alias in unused:
            RemoveImportsVisitor.remove_unused_import(context, from_module, name, alias)
        module = _remove_unused_imports(module, context, list(unused))
    return module


ImportEntry = tuple[str, "str | None", "str | None"]


def _remove_unused_imports(
    module: cst.Module, context: CodemodContext, unused: list[ImportEntry]
) -> cst.Module:
    """libcst's remover, which decides what is unused by a scope analysis of the whole module
    and three more visits of it, costs more than analysing the file. When none of the names
    the imports bind occurs in the code at all (as a name, or in a string: `__all__`, string
    annotations), that analysis can only agree they are unused: the remover is then given its
    answer and enters only the statements that hold them."""
    aliases = _scheduled_aliases(module, unused)
    if aliases is None or _names_occur(module, {bound for bound, _, _ in aliases}):
        return _RemoveImportsKeepingComments(context).transform_module(module)
    if not aliases:
        return module
    remover = _RemoveImportsKeepingComments(
        context,
        answer={alias: parent for _, alias, parent in aliases},
        paths=_paths_to(module, {id(parent) for _, _, parent in aliases}),
    )
    return module.visit(remover)


def _scheduled_aliases(
    module: cst.Module, unused: list[ImportEntry]
) -> list[tuple[str, cst.ImportAlias, cst.Import | cst.ImportFrom]] | None:
    """(bound name, alias, its statement) of each import the entries name; None where the
    quick path cannot tell (`import a.b` without `as`, which binds `a`)."""
    from_entries = {(m, n, a) for m, n, a in unused if n is not None}
    module_entries = {(m, a) for m, n, a in unused if n is None}
    found: list[tuple[str, cst.ImportAlias, cst.Import | cst.ImportFrom]] = []
    for statement in small_statements(module):
        if isinstance(statement, cst.ImportFrom):
            if isinstance(statement.names, cst.ImportStar) or not from_entries:
                continue
            if statement.relative or statement.module is None:
                continue  # never an entry's: libcst cannot name its module either
            name = _dotted(statement.module)
            for alias in statement.names:
                entry = (name, alias.evaluated_name, alias.evaluated_alias)
                if entry in from_entries:
                    found.append((alias.evaluated_alias or alias.evaluated_name, alias, statement))
        elif isinstance(statement, cst.Import):
            for alias in statement.names:
                if (alias.evaluated_name, alias.evaluated_alias) not in module_entries:
                    continue
                bound = alias.evaluated_alias or alias.evaluated_name
                if "." in bound:
                    return None
                found.append((bound, alias, statement))
    return found


def _dotted(node: cst.Attribute | cst.Name) -> str:
    return cst.Module([]).code_for_node(node)


def _names_occur(module: cst.Module, names: set[str]) -> bool:
    """Whether any of the names occurs in the module other than as an attribute, a keyword
    argument or an imported name: as a name anywhere else, or inside a string."""
    if not names:
        return False
    not_references: set[int] = set()
    for node in subtree_nodes(module):
        if isinstance(node, cst.Name):
            if node.value in names and id(node) not in not_references:
                return True
        elif isinstance(node, cst.Attribute):
            not_references.add(id(node.attr))
        elif isinstance(node, cst.Arg) and node.keyword is not None:
            not_references.add(id(node.keyword))
        elif isinstance(node, cst.ImportAlias):
            not_references.update(id(n) for n in subtree_nodes(node))
        elif isinstance(node, (cst.SimpleString, cst.FormattedStringText)) and any(
            name in node.value for name in names
        ):
            return True
    return False


def _plain_imports(module: cst.Module) -> set[str]:
    """Modules imported as themselves (`import torch`, no alias) by the module's top-level
    statements."""
    found: set[str] = set()
    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Import):
                found.update(
                    cst.Module([]).code_for_node(alias.name)
                    for alias in small.names
                    if alias.asname is None
                )
    return found


class _RemoveImportsKeepingComments(RemoveImportsVisitor):
    """libcst's import remover drops a removed import line together with the comments and
    blank lines above it; this one hands them to the next statement instead."""

    def __init__(
        self,
        context: CodemodContext,
        answer: dict[cst.ImportAlias, cst.Import | cst.ImportFrom] | None = None,
        paths: set[int] | None = None,
    ) -> None:
        super().__init__(context)
        self._emptied: set[int] = set()
        # Given (see _remove_unused_imports): the unused aliases, and the nodes on the way to
        # their statements, the only ones entered.
        self._answer = answer
        self._paths = paths

    def visit_Module(self, node: cst.Module) -> None:
        if self._answer is None:
            super().visit_Module(node)
        else:
            self._unused_imports = dict(self._answer)

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self._paths is not None and id(node) not in self._paths:
            return False
        return super().on_visit(node)

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
