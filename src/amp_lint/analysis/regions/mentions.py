"""Whether a module's code may enter mixed-precision autocast (AMP310), read from code, not
from comments or docstrings, and with the regions that are no mixed precision set aside:
`autocast(dtype=torch.float32)` (CPU autocast warns "the target dtype is not supported.
Disabling autocast."; CUDA autocast runs its float16 ops in float32) and
`autocast(enabled=False)` written as a literal.

A disabled region inside a `forward` or `__call__` is the float32-island idiom: it implies
a real region around the model's call, so it still counts as a mention."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from amp_lint.analysis.regions.finder import accelerate_settings, region_from_call
from amp_lint.analysis.regions.region import AutocastRegion
from amp_lint.analysis.syntax.code_text import code_only, mentions_in_code
from amp_lint.analysis.syntax.module import ModuleFacts
from amp_lint.analysis.syntax.outline import subtree_nodes

# Libraries whose layers compute in float16 on their own (tiny-cuda-nn's fully fused MLPs
# and encodings return float16): a scaler is needed there without autocast.
HALF_LIBRARIES = (b"tinycudann",)
# Words whose presence in the code means autocast may be applied out of sight.
_FRAMEWORK_WORDS = (
    b"accelerat",
    b"lightning",
    b"fabric",
    b"deepspeed",
    b"apex",
    b".half(",
    b".bfloat16(",
    *HALF_LIBRARIES,
)
_AUTOCAST = b"autocast"
_MODEL_CALLS = ("forward", "__call__")


@dataclass(frozen=True)
class AutocastUse:
    may_enter: bool  # the code may enter a mixed-precision region (or its mentions are unclear)
    # `with` regions that run in float32 or are disabled (by the call opening each).
    inert: tuple[tuple[cst.Call, AutocastRegion], ...] = ()

    def inert_region(self, call: cst.BaseExpression) -> AutocastRegion | None:
        return next((region for opener, region in self.inert if opener is call), None)


def autocast_use(facts: ModuleFacts) -> AutocastUse:
    text = facts.source if facts.source is not None else facts.module.code.encode()
    if mentions_in_code(text, _FRAMEWORK_WORDS):
        return AutocastUse(may_enter=True)
    if not mentions_in_code(text, (_AUTOCAST,)):
        return AutocastUse(may_enter=False)
    return _regions_only_inert(facts, code_only(text).lower().count(_AUTOCAST))


def _regions_only_inert(facts: ModuleFacts, mentions: int) -> AutocastUse:
    """The module's autocast regions when every mention of autocast in its code is an
    import or the opener of a float32 or disabled region; else `may_enter`."""
    accelerate = accelerate_settings(facts.module, facts.names)
    in_model_calls = _calls_in_model_methods(facts.module)
    inert: list[tuple[cst.Call, AutocastRegion]] = []
    openers: set[int] = set()
    accounted = 0
    for node in _nodes_outside_imports(facts.module):
        if isinstance(node, (cst.Import, cst.ImportFrom)):
            accounted += _code(node).lower().count(_AUTOCAST)
            continue
        if not isinstance(node, cst.Call):
            continue
        region = region_from_call(node, facts.names, accelerate)
        if region is None:
            continue
        if not _inert(region) or (region.enabled is False and id(node) in in_model_calls):
            return AutocastUse(may_enter=True)
        inert.append((node, region))
        openers.add(id(node.func))
        accounted += _code(node.func).lower().count(_AUTOCAST)
    if accounted != mentions or _autocast_named_elsewhere(facts, openers):
        return AutocastUse(may_enter=True)
    return AutocastUse(may_enter=False, inert=tuple(inert))


def _inert(region: AutocastRegion) -> bool:
    return region.enabled is False or (region.is_active and region.dtype == "float32")


def _nodes_outside_imports(module: cst.Module) -> list[cst.CSTNode]:
    """Every node, imports as one (their names are not uses)."""
    found: list[cst.CSTNode] = []
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        found.append(node)
        if not isinstance(node, (cst.Import, cst.ImportFrom)):
            stack.extend(reversed(node.children))
    return found


def _autocast_named_elsewhere(facts: ModuleFacts, openers: set[int]) -> bool:
    """A name bound to an autocast class (`from torch import autocast as ac`) used other
    than to open one of the inert regions (`ctx = ac`)."""
    nodes = _nodes_outside_imports(facts.module)
    # `autocast` of `torch.autocast` is part of the attribute, not a name of its own.
    attributes = {id(node.attr) for node in nodes if isinstance(node, cst.Attribute)}
    for node in nodes:
        if id(node) in openers or id(node) in attributes:
            continue
        if isinstance(node, (cst.Name, cst.Attribute)):
            qualified = facts.names.qualified_name(node) or ""
            if qualified.rsplit(".", 1)[-1] == "autocast":
                return True
    return False


def _calls_in_model_methods(module: cst.Module) -> set[int]:
    return {
        id(node)
        for function in subtree_nodes(module)
        if isinstance(function, cst.FunctionDef) and function.name.value in _MODEL_CALLS
        for node in subtree_nodes(function)
        if isinstance(node, cst.Call)
    }


def _code(node: cst.CSTNode) -> bytes:
    return cst.Module([]).code_for_node(node).encode()
