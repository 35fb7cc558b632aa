"""GradScalers that scale a loss no autocast region computed (AMP310): `scaler.scale(loss)
.backward()` where the forward and the loss run in float32, so mixed precision is inactive.

Autocast can reach a forward from far away: a `with` in the caller, an `@autocast` on the
model's `forward`, a helper returning a region (`with amp_ctx:`), a framework
(`accelerator.prepare` wraps `forward` when `mixed_precision` is set, Lightning's
precision plugins). So the facts are kept to what can be established:

* the module never mentions autocast, nor a framework that applies it (accelerate,
  Lightning, Fabric, DeepSpeed, apex), nor a half dtype (a half model is AMP305's);
* the scaler is built in the module by a GradScaler constructor not disabled by a literal
  `enabled=False` (a run-time flag counts as enabled: it is when AMP is asked for);
* the loss is computed in the same function as the scaled backward, from a call, and
  neither sits in a `with` block whose context manager could be a region (a name, an
  attribute, or a call whose name speaks of precision or contexts: `with ctx:`,
  `with maybe_amp():`);
* in a project, within the program around the file (imports.py: the linted files it
  imports, transitively, those importing it with theirs, and registries' files), no
  `forward` or `__call__` enters autocast, no call of the function lands in a file that
  mentions autocast, and no file that names the function mentions autocast (it may call it
  under a region).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from amp_lint.analysis.project.file_text import region_openers, source_text
from amp_lint.analysis.project.imports import ImportGraph
from amp_lint.analysis.project.index import ProjectIndex
from amp_lint.analysis.regions.mentions import HALF_LIBRARIES, AutocastUse, autocast_use
from amp_lint.analysis.regions.region import AutocastRegion
from amp_lint.analysis.scaler.names import AMP_WORDS, all_calls, scale_call
from amp_lint.analysis.scaler.origin import ScalerOrigins, block, statements_with_context
from amp_lint.analysis.syntax.calls import build_index
from amp_lint.analysis.syntax.code_text import mentions_in_code
from amp_lint.analysis.syntax.module import ModuleFacts
from amp_lint.analysis.syntax.names import dotted_name
from amp_lint.analysis.syntax.outline import positional_arguments, subtree_nodes
from amp_lint.analysis.training.training_setup import mentions_float16

# A context manager named with one of these could open a region.
_CONTEXT_WORDS = AMP_WORDS | {"ctx", "context", "precision", "cast", "dtype", "region"}


@dataclass(frozen=True)
class ScaledWithoutAutocast:
    scale: cst.Call  # `scaler.scale(loss)`
    loss: cst.SimpleStatementLine  # the statement computing the loss (the last, if several)
    constructor: cst.Call  # `torch.amp.GradScaler(...)`
    function: cst.FunctionDef | None
    # The float32 or disabled region of the function (else of the module) the author may
    # take for mixed precision; None when the module has none.
    inert: AutocastRegion | None = None


def scaled_without_autocast(facts: ModuleFacts) -> list[ScaledWithoutAutocast]:
    use = autocast_use(facts)
    if use.may_enter:
        return []
    if mentions_float16(facts.module, facts.names) or _mentions_bfloat16(facts):
        return []
    index = build_index(facts.module, facts.names)
    origins = ScalerOrigins(facts, index, lambda item: _plain_context(facts, use, item))
    if not origins.constructors:
        return []
    project = facts.project
    program = _program(project, facts.path) if project is not None else set()
    if project is not None and (
        _forward_enters_autocast(project, program) or _half_library(project, program)
    ):
        return []
    found = []
    scopes: list[cst.FunctionDef | None] = [None, *index.all_functions]
    for function in scopes:
        body: list[cst.BaseStatement] = (
            block(function.body) if function is not None else list(facts.module.body)
        )
        for scale, loss in _unwrapped_scales(facts, use, body):
            constructor = origins.constructor_of(scale, function, body)
            if constructor is None:
                continue
            if project is not None and _program_may_wrap(facts, project, program, function, body):
                continue
            inert = _inert_region_of(use, function)
            found.append(ScaledWithoutAutocast(scale, loss, constructor, function, inert))
    return found


def _inert_region_of(use: AutocastUse, function: cst.FunctionDef | None) -> AutocastRegion | None:
    """The first inert region opened in `function`, else in the module."""
    if not use.inert:
        return None
    inside = {id(node) for node in subtree_nodes(function)} if function is not None else set()
    mine = [region for call, region in use.inert if id(call) in inside]
    return mine[0] if mine else use.inert[0][1]


def _mentions_bfloat16(facts: ModuleFacts) -> bool:
    """`torch.bfloat16` anywhere (a model or its inputs cast to it)."""
    return any(
        isinstance(node, (cst.Attribute, cst.Name))
        and facts.names.qualified_name(node) == "torch.bfloat16"
        for node in subtree_nodes(facts.module)
    )


# Inside one function


def _unwrapped_scales(
    facts: ModuleFacts, use: AutocastUse, body: list[cst.BaseStatement]
) -> Iterator[tuple[cst.Call, cst.SimpleStatementLine]]:
    """`scaler.scale(loss).backward()` calls of the function whose loss it computes, from a
    call, outside every `with` that could be a region; with the loss's last assignment."""
    assignments: dict[str, list[cst.SimpleStatementLine]] = {}
    covered: set[int] = set()  # statements inside a `with` that could be a region
    backwards: list[tuple[cst.Call, cst.SimpleStatementLine]] = []
    for statement, withs in statements_with_context(body):
        if any(not _plain_context(facts, use, item) for item in withs):
            covered.add(id(statement))
        for small in statement.body:
            if isinstance(small, cst.Assign):
                for target in small.targets:
                    name = dotted_name(target.target)
                    if name:
                        assignments.setdefault(name, []).append(statement)
        for call in all_calls(statement):
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value == "backward":
                scale = scale_call(func.value)
                if scale is not None:
                    backwards.append((scale, statement))
    for scale, statement in backwards:
        loss = _loss_name(scale)
        computed = assignments.get(loss or "", [])
        if id(statement) in covered or not computed:
            continue
        if any(id(line) in covered or not _from_a_call(line) for line in computed):
            continue
        yield scale, computed[-1]


def _plain_context(facts: ModuleFacts, use: AutocastUse, item: cst.WithItem) -> bool:
    """A context manager that is no mixed-precision region: a float32 or disabled autocast
    region, or a call (`tqdm(...)`, `open(...)`, `torch.no_grad()`) whose name does not
    speak of precision or contexts, and which does not land in a linted file that mentions
    autocast."""
    value = item.item
    if not isinstance(value, cst.Call):
        return False
    if use.inert_region(value) is not None:
        return True
    name = dotted_name(value.func)
    if name is None:
        return False
    words = {word for part in name.lower().split(".") for word in part.split("_")}
    if words & _CONTEXT_WORDS:
        return False
    return not _lands_in_autocast_file(facts, value)


def _loss_name(scale: cst.Call) -> str | None:
    """`loss` of `scaler.scale(loss)`, `scaler.scale(loss / accumulation)`."""
    arguments = positional_arguments(scale)
    value = arguments[0] if arguments else None
    while isinstance(value, cst.BinaryOperation):
        value = value.left
    return dotted_name(value) if value is not None else None


def _from_a_call(line: cst.SimpleStatementLine) -> bool:
    return any(True for _ in all_calls(line))


# Across the project


def _lands_in_autocast_file(facts: ModuleFacts, call: cst.Call) -> bool:
    project = facts.project
    if project is None:
        return False
    qualified = facts.names.qualified_name(call.func)
    target = project.resolve(qualified, facts.path) if qualified else None
    if target is None:
        return False
    text = source_text(project, target.path)
    return text is None or mentions_in_code(text, (b"autocast",))


def _program_may_wrap(
    facts: ModuleFacts,
    project: ProjectIndex,
    program: set[str],
    function: cst.FunctionDef | None,
    body: list[cst.BaseStatement],
) -> bool:
    """A call of the function (or script) lands in a file mentioning autocast, or such a
    file names the function (and may call it under a region)."""
    for statement in body:
        if any(_lands_in_autocast_file(facts, call) for call in all_calls(statement)):
            return True
    if function is None:
        return False
    name = function.name.value.encode()
    for path in program - {facts.path}:
        text = source_text(project, path)
        if text is None or (name in text and mentions_in_code(text, (b"autocast",))):
            return True
    return False


_GRAPHS: list[tuple[ProjectIndex, ImportGraph]] = []


def _program(project: ProjectIndex, path: str) -> set[str]:
    """The linted files of the program around `path` (imports.py): where its model, and
    its callers, come from."""
    if not _GRAPHS or _GRAPHS[0][0] is not project:
        sources = {
            linted: text
            for linted in project.by_absolute.values()
            if (text := source_text(project, linted)) is not None
        }
        _GRAPHS[:] = [(project, ImportGraph(sources, project))]
    here = project.by_absolute.get(os.path.normpath(os.path.abspath(path)), path)
    return _GRAPHS[0][1].program(here)


def _half_library(project: ProjectIndex, program: set[str]) -> bool:
    """Whether a file of the program uses a library whose layers compute in float16
    themselves (tiny-cuda-nn's fused networks): there the scaler is needed without
    autocast."""
    return any(
        (text := source_text(project, path)) is None or mentions_in_code(text, HALF_LIBRARIES)
        for path in program
    )


def _forward_enters_autocast(project: ProjectIndex, program: set[str]) -> bool:
    """Whether a `forward` or `__call__` of the program enters autocast itself (a model
    received as a parameter may be of that class)."""
    return any(
        opener.rsplit(".", 1)[-1] in ("forward", "__call__")
        for path in program
        for opener in region_openers(project, path)
    )
