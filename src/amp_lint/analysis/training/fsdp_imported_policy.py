"""FSDP mixed-precision policies imported by name from another linted file: the
llama-recipes layout, `policies/mixed_precision.py` defining `fpSixteen = MixedPrecision(
param_dtype=torch.float16, ...)` and the training script passing `from policies import
fpSixteen` to `FSDP(mixed_precision=...)`.

Only a top-level assignment of the defining file is followed (also through a package's
`__init__.py` that re-exports it, `from .mixed_precision import *` or by name); a policy a
function builds (`get_policies(cfg)`) or a parameter receives is not.
"""

from __future__ import annotations

import os
from dataclasses import replace

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from amp_lint.analysis.project.file_text import source_text
from amp_lint.analysis.project.index import ProjectIndex
from amp_lint.analysis.syntax.module import ModuleFacts
from amp_lint.analysis.syntax.names import ModuleNames, collect_names, module_of_import_from
from amp_lint.analysis.training.fsdp_precision import ImportedPolicies, Policy, module_policies

# How many re-exporting files deep a name is followed.
_DEPTH = 3


def imported_policies(facts: ModuleFacts) -> ImportedPolicies | None:
    """A lookup of the policies an imported name stands for; None outside a project run."""
    project = facts.project
    if project is None:
        return None
    loaded: dict[str, tuple[cst.Module, ModuleNames] | None] = {}

    def policies_for(name: cst.Name) -> list[Policy]:
        qualified = facts.names.qualified_name(name)
        if qualified is None:
            return []
        return _policies_at(project, qualified, facts.path, loaded, _DEPTH)

    return policies_for


def _policies_at(
    project: ProjectIndex,
    qualified: str,
    from_path: str,
    loaded: dict[str, tuple[cst.Module, ModuleNames] | None],
    depth: int,
) -> list[Policy]:
    target = project.resolve(qualified, from_path)
    if target is None or "." in target.attribute or depth <= 0:
        return []
    if target.path not in loaded:
        loaded[target.path] = _parse(project, target.path)
    parsed = loaded[target.path]
    if parsed is None:
        return []
    module, names = parsed
    found = module_policies(module, names, target.attribute)
    if found:
        return _with_origin(found, module, target.path)
    # Re-exported: `from .mixed_precision import fpSixteen` or `... import *`.
    for source in _reexports(module, names, target.attribute):
        found = _policies_at(project, source, target.path, loaded, depth - 1)
        if found:
            return found
    return []


def _parse(project: ProjectIndex, path: str) -> tuple[cst.Module, ModuleNames] | None:
    text = source_text(project, path)
    if text is None:
        return None
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError:
        return None  # its own analysis reports the problem
    return module, collect_names(module)


def _reexports(module: cst.Module, names: ModuleNames, attribute: str) -> list[str]:
    """Where a file that does not assign `attribute` may import it from."""
    bound = names.bindings.get(attribute)
    if bound is not None:
        return [bound]
    found = []
    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.ImportFrom) and isinstance(small.names, cst.ImportStar):
                source = module_of_import_from(small)
                if source is not None:
                    separator = "" if source.endswith(".") else "."
                    found.append(f"{source}{separator}{attribute}")
    return found


def _with_origin(policies: list[Policy], module: cst.Module, path: str) -> list[Policy]:
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    found = []
    for policy in policies:
        position = positions.get(policy.call)
        line = f":{position.start.line}" if position is not None else ""
        found.append(replace(policy, origin=f"{os.path.basename(path)}{line}"))
    return found
