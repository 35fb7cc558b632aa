"""What imported names refer to in one module: a light resolver, no libcst metadata.

`import torch.nn.functional as F` binds `F` to "torch.nn.functional"; `from torch.cuda.amp
import autocast as ac` binds `ac` to "torch.cuda.amp.autocast". Scoping is ignored on purpose:
imports are collected from the whole module, which is right for the module-level imports that
ML code uses and cheap enough to run on every file.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from amp_lint.analysis.regions.compat import fallback_statements
from amp_lint.analysis.syntax.outline import dotted_name, simple_lines

__all__ = ["ModuleNames", "collect_names", "dotted_name", "module_of_import_from"]


@dataclass
class ModuleNames:
    # local name -> fully qualified name it is bound to by an import
    bindings: dict[str, str] = field(default_factory=dict)
    # (module, name) -> the ImportFrom nodes that import it
    from_imports: dict[tuple[str, str], list[cst.ImportFrom]] = field(default_factory=dict)
    # Local names bound by an import inside a block (a function, `if`, `try`): removing such
    # an import could leave the block empty, so fixes leave them alone.
    nested: set[str] = field(default_factory=set)

    def qualified_name(self, node: cst.BaseExpression) -> str | None:
        """The imported thing an expression names, e.g. `F.linear` -> "torch.nn.functional.linear".

        Returns None when the chain does not start at an imported name.
        """
        dotted = dotted_name(node)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        target = self.bindings.get(head)
        if target is None:
            return None
        return f"{target}.{rest}" if rest else target

    def local_names_for(self, qualified: str) -> list[str]:
        """Local spellings that reach `qualified` directly, e.g. ["torch"] for "torch"."""
        return [local for local, target in self.bindings.items() if target == qualified]


def module_of_import_from(node: cst.ImportFrom) -> str | None:
    if node.relative:
        base = dotted_name(node.module) if node.module else ""
        return "." * len(node.relative) + (base or "")
    return dotted_name(node.module) if node.module else None


def collect_names(module: cst.Module) -> ModuleNames:
    """Bindings of every import. Where `try: from torch import GradScaler` is followed by
    `except ImportError: from torch.cuda.amp import GradScaler`, the import outside the
    fallback wins: it is what runs on the PyTorch versions amp-lint reasons about."""
    names = ModuleNames()
    fallback = fallback_statements(module)
    fallback_names = ModuleNames()
    top_level = {id(statement) for statement in module.body}
    fallback_first: dict[str, str] = {}
    for line, small in _import_statements(module):
        if id(line) not in top_level:
            names.nested.update(_locals_bound(small))
        target = fallback_names if id(line) in fallback else names
        if isinstance(small, cst.Import):
            _add_import(target, small)
        elif isinstance(small, cst.ImportFrom):
            _add_import_from(target, small)
        # Between two fallbacks (`if new: import a else: import b`), the first one wins.
        for local, qualified in fallback_names.bindings.items():
            fallback_first.setdefault(local, qualified)
    for local, qualified in fallback_first.items():
        names.bindings.setdefault(local, qualified)
    for key, nodes in fallback_names.from_imports.items():
        names.from_imports.setdefault(key, []).extend(nodes)
    return names


def _locals_bound(node: cst.Import | cst.ImportFrom) -> list[str]:
    if isinstance(node.names, cst.ImportStar):
        return []
    bound = []
    for alias in node.names:
        name = alias.asname.name if alias.asname is not None else alias.name
        local = dotted_name(name) if isinstance(name, (cst.Name, cst.Attribute)) else None
        if local:
            bound.append(local.split(".", 1)[0])
    return bound


def _import_statements(
    module: cst.Module,
) -> list[tuple[cst.SimpleStatementLine, cst.Import | cst.ImportFrom]]:
    found = []
    for line in simple_lines(module):
        for small in line.body:
            if isinstance(small, (cst.Import, cst.ImportFrom)):
                found.append((line, small))
    return found


def _add_import(names: ModuleNames, node: cst.Import) -> None:
    for alias in node.names:
        full = dotted_name(alias.name)
        if full is None:
            continue
        if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
            names.bindings[alias.asname.name.value] = full
        else:
            head = full.split(".", 1)[0]
            names.bindings.setdefault(head, head)


def _add_import_from(names: ModuleNames, node: cst.ImportFrom) -> None:
    module = module_of_import_from(node)
    if module is None or isinstance(node.names, cst.ImportStar):
        return
    for alias in node.names:
        if not isinstance(alias.name, cst.Name):
            continue
        name = alias.name.value
        local = name
        if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
            local = alias.asname.name.value
        # `from . import losses` binds ".losses", not "..losses".
        qualified = f"{module}{name}" if module.endswith(".") else f"{module}.{name}"
        names.bindings[local] = qualified
        names.from_imports.setdefault((module, name), []).append(node)
