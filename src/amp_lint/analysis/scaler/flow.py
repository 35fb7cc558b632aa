"""GradScaler training-loop order: what happens to the gradients between
`scaler.scale(loss).backward()` and the optimizer update, statement by statement.

Every function (and the module's top-level code) is walked in source order. `if`/`match`
branches are walked from the same state and merged; loops are walked until their entry state
stops changing; `with` and `try` bodies are walked in place; calls to the module's own
functions and to `self.method(...)` are followed into their bodies (depth 4), so a helper that
clips, unscales or steps counts where it is called.

The state is "may" information merged with OR, chosen so that correlated conditions
(`if use_amp: scaler.unscale_(opt)` before an unconditional clip) do not raise false alarms:

* `backwards`: the scaled backward passes that may have run with nothing handled since;
* `unscaled`: an `unscale_`, `step`, `update` or `zero_grad` may have run since (gradients
  no longer scaled on some path);
* `stepped`: a `scaler.step` or `scaler.update` may have run since.

Branches that are the non-AMP alternative (an `else` whose sibling calls `scaler.step` or
`scaler.unscale_`, or the branch of `if not use_amp:` / `if scaler is None:`) are not checked:
they run when the scaler does not.

The facts are hazards, no opinions on wording: the AMP301-AMP303 rules phrase and fix them.

Here is the entry point. The walk itself is in walker.py, the hazards and the state it carries
in hazards.py, the non-AMP branches in branches.py, AMP303's search for `scaler.update()` in
updates.py.
"""

from __future__ import annotations

import libcst as cst

from amp_lint.analysis.scaler.hazards import CLEAN_STATE, ScalerFlow, WalkContext
from amp_lint.analysis.scaler.names import ScalerNames, all_calls, collect_names
from amp_lint.analysis.scaler.walker import ScalerWalker
from amp_lint.analysis.syntax.calls import build_index
from amp_lint.analysis.syntax.module import ModuleFacts

_CACHE: dict[int, tuple[cst.Module, ScalerFlow]] = {}


def scaler_flow(facts: ModuleFacts) -> ScalerFlow:
    """The hazards of the module, computed once for all the rules that ask."""
    cached = _CACHE.get(id(facts.module))
    if cached is not None and cached[0] is facts.module:
        return cached[1]
    flow = _analyse(facts)
    _CACHE.clear()
    _CACHE[id(facts.module)] = (facts.module, flow)
    return flow


def _uses_a_scaler(call: cst.Call, names: ScalerNames) -> bool:
    """`x.scale(loss)`, or `grad_scaler.step(optimizer)` on a scaler made elsewhere."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return False
    if func.attr.value == "scale":
        return True
    return (
        func.attr.value in ("step", "unscale_") and bool(call.args) and names.is_scaler(func.value)
    )


def _analyse(facts: ModuleFacts) -> ScalerFlow:
    names = collect_names(facts)
    if not names.enabled and not any(_uses_a_scaler(c, names) for c in all_calls(facts.module)):
        return ScalerFlow()
    index = build_index(facts.module, facts.names)
    walker = ScalerWalker(facts, index, names)
    top = WalkContext(function=None, owner=None)
    walker.block(facts.module.body, CLEAN_STATE, top)
    for function in index.all_functions:
        owner = index.owner.get(id(function))
        ctx = WalkContext(function=function, owner=owner, active=frozenset([id(function)]))
        walker.suite(function.body, CLEAN_STATE, ctx)
    return walker.flow
