"""AMP307 step-inside-autocast: weights updated in place inside an autocast region that runs
a forward again afterwards, which then reads autocast's stale cached casts of the weights."""

from __future__ import annotations

from collections.abc import Iterator

from amp_lint.analysis.syntax.module import ModuleFacts
from amp_lint.analysis.training.updates_in_autocast import RegionEvent, UpdatesInAutocast
from amp_lint.rules.base import Report, Rule
from amp_lint.rules.common import brief, code


class StepInsideAutocast(Rule):
    code = "AMP307"
    name = "step-inside-autocast"
    vocabulary = (b"autocast",)
    summary = (
        "Checks for `optimizer.step()` and other in-place weight updates inside an autocast "
        "region that runs the model's forward again afterwards (a training loop inside one "
        "`with torch.autocast(...)`)."
    )
    why = """\
Inside an autocast region the float32 weights are cast to float16/bfloat16 once, and the
casts are **cached**: the cache holds the half copy of every leaf tensor that requires grad
(the parameters) and is cleared only when the **outermost** autocast region exits. An
in-place update of the weights inside the region (`optimizer.step()`, `scaler.step(opt)`,
`p.data.copy_(...)`, `with torch.no_grad(): p -= lr * p.grad`, `model.load_state_dict(...)`)
does not invalidate the cache, so the next forward in the same region silently computes with
the **old** weights. With the whole training loop inside one `with torch.autocast(...)`, every
iteration's forward reuses the weights of the first one, while the gradients still reach the
float32 weights: the loss does not go down and no error is raised (measured on CPU: float16
and bfloat16 outputs off by 41% and 81% from float32 at the 2nd and 3rd step; per-iteration
regions are within 0.6%). This is why PyTorch's AMP examples wrap only the forward and the
loss in autocast."""
    example = """\
import torch

with torch.autocast("cuda", dtype=torch.bfloat16):
    for x, y in loader:
        loss = loss_fn(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""
    fixed_example = """\
import torch

for x, y in loader:
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""
    fix_safety = """\
There is no fix (lint only): moving statements out of a `with` block changes which code runs
under autocast. Move the autocast region inside the loop so that it covers the forward and
the loss only (PyTorch's recipe), or, where the region must stay, open it with
`cache_enabled=False`."""
    known_limitations = """\
The check is lexical: it looks at the statements inside `with` blocks of an autocast (any
spelling, also through a variable assigned an autocast call) and in functions decorated with
one, following calls to functions and methods of the same module. Regions entered in a
caller of the function that holds the loop are not seen. An optimizer is recognised by name
(`optimizer`, `opt_g`, `self.optim`, `scaler.step(...)`). Parameters are `.data` (not a
gradient's) and what `.parameters()`, `.named_parameters()` and an optimizer's
`param_groups[...]["params"]` yield, followed within one function through variables, `for`
loops, comprehensions, `list`, `filter`, `zip`, `enumerate` and `itertools.chain`; a
`torch._foreach_*_` update counts when its first argument is such a collection. A collection
passed in as an argument, or a name bound to different things in one function, is not
followed. A forward is a call of a model-like object (a variable, `self.<attribute>`,
`model.<method>(...)`), so a loss module called after the step in a region without a loop also
counts. A region with `cache_enabled=False` is not flagged."""

    def check_module(self, facts: ModuleFacts) -> Iterator[Report]:
        for step, later, region_text in UpdatesInAutocast(facts).stale_updates():
            summary = (
                f"`{brief(step.node, 20)}` in autocast: later forwards silently use stale "
                "weights; end the region first"
            )
            message = _message(facts, step, later, region_text)
            yield Report(step.node, message, summary=summary)


def _message(facts: ModuleFacts, step: RegionEvent, forward: RegionEvent, region_text: str) -> str:
    what = f"`{code(step.node)}`"
    if step.via is not None:
        what += f" updates weights (`{code(step.via)}`, line {facts.line_of(step.via)})"
    else:
        what += " updates weights in place"
    loop = forward.order <= step.order
    when = (
        f"the next iteration of the loop runs `{code(forward.node)}`"
        if loop
        else f"`{code(forward.node)}` (line {facts.line_of(forward.node)}) runs later"
    )
    return (
        f"{what} inside a {region_text} and {when} in the same region: autocast caches the "
        "half-precision casts of the weights until the outermost region exits, so that "
        "forward silently uses the weights from before the update; end the autocast region "
        "before the update (wrap only the forward and the loss) or pass "
        "`cache_enabled=False`"
    )
