"""AMP401 deprecated-amp-api: `torch.cuda.amp.*` and `torch.cpu.amp.*`, deprecated in 2.4.

Which APIs are deprecated and where a module uses them is deprecated_amp_apis.py's; the
rewrite of a call is fixes/amp_api.py's.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Container, Iterator

import libcst as cst

from amp_lint.analysis.project.imports import imported_names
from amp_lint.analysis.regions.compat import fallback_nodes
from amp_lint.analysis.syntax.deprecated_amp_apis import (
    DEPRECATED_API_VOCABULARY,
    DEPRECATED_PREFIXES,
    DEPRECATED_SINCE,
    ApiUse,
    DeprecatedApi,
    UseScan,
    deprecated_imports,
)
from amp_lint.analysis.syntax.module import ModuleFacts
from amp_lint.analysis.syntax.names import ModuleNames
from amp_lint.findings import Edit, Fix, FixSafety
from amp_lint.fixes.amp_api import (
    binding_import,
    has_star_args,
    positional_args,
    rewrite_call,
    torch_spelling,
)
from amp_lint.rules.base import Report, Rule
from amp_lint.rules.deprecated_amp_imports import head as _head
from amp_lint.rules.deprecated_amp_imports import import_report
from amp_lint.settings.torch_version import TorchVersion, format_torch_version


class DeprecatedAmpApi(Rule):
    code = "AMP401"
    name = "deprecated-amp-api"
    vocabulary = DEPRECATED_API_VOCABULARY
    summary = (
        "Checks for the device-specific AMP APIs deprecated in PyTorch 2.4: "
        "`torch.cuda.amp.autocast`, `torch.cuda.amp.GradScaler`, `torch.cuda.amp.custom_fwd`, "
        "`torch.cuda.amp.custom_bwd`, `torch.cpu.amp.autocast` and `torch.cpu.amp.GradScaler`, "
        "in any spelling (module aliases, `from` imports, decorators)."
    )
    why = """\
Since PyTorch 2.4 each of these emits a `FutureWarning` when it is called (for the
decorators: when the decorated function is defined), for example

```
FutureWarning: `torch.cuda.amp.autocast(args...)` is deprecated. Please use
`torch.amp.autocast('cuda', args...)` instead.
```

The warning repeats in every process and data-loader worker, hides the warnings that matter,
and fails test suites run with `-W error`. The APIs are thin wrappers that will be removed;
`torch.amp.autocast`, `torch.amp.GradScaler`, `torch.amp.custom_fwd` and
`torch.amp.custom_bwd` do the same thing for any device.

Rewriting by hand has a trap: the old `autocast(enabled, dtype, cache_enabled)` takes its
arguments in a different order from `torch.amp.autocast(device_type, dtype, enabled,
cache_enabled)`, so `torch.cuda.amp.autocast(True)` must become
`torch.amp.autocast("cuda", enabled=True)`, not `torch.amp.autocast("cuda", True)`."""
    example = """\
import torch
from torch.cuda.amp import GradScaler, autocast


class Scale(torch.autograd.Function):
    @staticmethod
    @torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)
    def forward(ctx, x):
        return x * 2

    @staticmethod
    @torch.cuda.amp.custom_bwd
    def backward(ctx, grad):
        return grad * 2


scaler = GradScaler(2.0**10)
with autocast(True, torch.float16):
    loss = model(x)
"""
    fixed_example = """\
import torch


class Scale(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(cast_inputs=torch.float32, device_type="cuda")
    def forward(ctx, x):
        return x * 2

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx, grad):
        return grad * 2


scaler = torch.amp.GradScaler("cuda", 2.0**10)
with torch.amp.autocast("cuda", enabled=True, dtype=torch.float16):
    loss = model(x)
"""
    fix_safety = """\
The fix is **safe**: it calls what the deprecated wrapper calls, with the same arguments
(but see nested regions below).
It keeps every argument, comment and line break of the call, and maps the arguments onto the
new signature: the device comes first (`"cuda"` or `"cpu"`) for `autocast` and `GradScaler`,
last as `device_type="cuda"` for `custom_fwd` and `custom_bwd`; positional `autocast`
arguments become keywords (the order differs), positional `GradScaler` arguments stay (the
order is the same). A bare `@torch.cuda.amp.custom_fwd` becomes
`@torch.amp.custom_fwd(device_type="cuda")`. The new name is spelled through the module's own
`torch` binding (`th.amp.autocast` after `import torch as th`); `import torch` is added when
the module has none, and a `from torch.cuda.amp import ...` that the fix leaves unused is
removed, unless `__all__` lists the name or another linted file imports it from the module
(`from amp_utils import autocast`, or `import amp_utils` and a read of `amp_utils.autocast`):
then it stays, so the re-export keeps working.

One difference remains, in nested regions only. The old `autocast` wrappers pass their
defaults explicitly (`dtype=torch.float16` for "cuda", `torch.bfloat16` for "cpu",
`cache_enabled=True`), while `torch.amp.autocast` without them takes the current setting
(`torch.get_autocast_dtype(device)`). At top level that is the same default; but an old-style
`autocast()` without `dtype=` entered inside a region of another dtype (a library function
decorated with `@torch.cuda.amp.autocast()` and called under `torch.autocast("cuda",
dtype=torch.bfloat16)`, or after `torch.set_autocast_dtype`) used to switch to float16 and,
after the fix, keeps bfloat16. Add `dtype=` by hand where that matters.

The new spellings need a recent PyTorch: `torch.amp.autocast` since 1.13 at the latest,
`torch.amp.GradScaler` since 2.3, and `torch.amp.custom_fwd(device_type=...)` /
`custom_bwd(device_type=...)` since 2.4. Say which torch your project supports with
`torch-version = "2.1"` in `[tool.amp-lint]` or `--torch-version 2.1` (the **oldest**
supported release, like ruff's `target-version`; without either, it is read from a
`torch>=2.1` in the project's `[project] dependencies`, and unset means the newest torch).
As ruff's pyupgrade rules do not report code the target Python cannot spell the new way,
AMP401 then does not report the APIs whose replacement that torch lacks (no finding, no
fix: the old name is the only one that works there); a bare `@torch.cuda.amp.autocast`
decorator is still reported, as the bug it is, suggesting a spelling that release has.
Below 2.4 the old names do not warn yet, but they do on the newer releases the project also
supports, so the others are reported ("FutureWarning on torch >= 2.4") with the same safe
fix. So on 2.1 only `autocast` is reported; on 2.3, `GradScaler` too; on 2.4, everything.

Where these versions come from, in PyTorch's sources: `torch.cuda.amp.autocast` subclasses
`torch.autocast_mode.autocast` in 1.10 (there is no `torch.amp` yet) and
`torch.amp.autocast_mode.autocast` in 1.13 (`torch/cuda/amp/autocast_mode.py`, in the
source pages of the 1.10 and 1.13 docs). `torch/cuda/amp/grad_scaler.py` holds the whole
scaler in 2.2 and is `class GradScaler(torch.amp.GradScaler)`, "equivalent to
`torch.amp.GradScaler("cuda", args...)`", with no warning, in 2.3 (source pages of the 2.2
and 2.3 docs). The warnings were added by pytorch/pytorch#126062 (`autocast`) and #126527
(`GradScaler`), and `torch.amp.custom_fwd`/`custom_bwd` with `device_type` by #126531, all
merged in May 2024, after 2.3 (whose sources have no warning) and first released in 2.4.0
(mit-han-lab/efficientvit#127 shows the `autocast` warning under torch 2.4.0+cu118).

There is no fix for a reference that is not called (`functools.partial(torch.cuda.amp.autocast,
dtype=...)`, `isinstance(s, torch.cuda.amp.GradScaler)`, a subclass), for an `autocast` call
with `*args` (the positions cannot be mapped onto the new order), for a call the old function
would reject (too many positional arguments, a `device_type=` keyword), and when the module
binds the name `torch` to something other than the torch package."""
    known_limitations = """\
Compatibility code for PyTorch releases without the new API is not reported: `except
ImportError:` / `except AttributeError:` fallbacks, both branches of an `if` or a conditional
expression on a version test, the right side of `getattr(torch.amp, "GradScaler", None) or
...`, and the statements after a guard clause that returns the new API (`if
hasattr(torch.amp, "GradScaler"): return torch.amp.GradScaler("cuda")`). A version test is
an expression naming a version (`torch.__version__`, `version.parse`, `is_torch_version`,
`TORCH_GE_2_4`, `torch_ver`), `hasattr`/`getattr`/`dir` on torch, or a module-level name that
holds one (`NEW_AMP = version.parse(torch.__version__) >= ...`, or a flag set by `try: from
torch.amp import ... except ImportError:`). A gate named otherwise (`if USE_NEW_API:` assigned
from configuration) is not recognised.

Names are resolved from the module's imports, ignoring scopes: a local variable that shadows
an imported `amp` or `autocast` is taken for the import, and an `import torch` inside a
function counts as binding `torch` for the whole module.

The import a reported use comes through (`from torch.cuda.amp import autocast, GradScaler`,
`import torch.cuda.amp as amp`, `from torch.cuda import amp`) is one more finding, one per
statement, naming the APIs reported through it; its fix is the fixes of those uses together,
so applying it, or theirs, gives the same file. An import used only in annotations or only
by compatibility code, or only for APIs the `torch-version` target cannot replace, is not
reported; `import torch.cuda.amp` (which binds `torch`) is left to its uses. An import inside a
function, `if` or `try` is not removed by the fix even when nothing uses it any more (removing
it could leave the block empty); flake8's F401 points it out."""

    # What the last check_module held back (Rule.held_back); one rule instance per file.
    _held_back: tuple[str, ...] = ()

    def check_module(self, facts: ModuleFacts) -> Iterator[Report]:
        names = facts.names
        if not any(target in DEPRECATED_PREFIXES for target in names.bindings.values()):
            return
        scan = UseScan(names)
        scan.run(facts.module)
        if not scan.uses:
            return
        # Fallbacks for old PyTorch keep the old spelling on purpose and never run on 2.4+.
        compatibility_code = fallback_nodes(facts.module)
        target = facts.config.torch_version
        live = [use for use in scan.uses if id(use.node) not in compatibility_code]
        scan.uses = [use for use in live if _reported_on(use, target)]
        self._held_back = tuple(
            format_torch_version(use.api.replacement_since)
            for use in live
            if not _reported_on(use, target)
        )
        torch = torch_spelling(names)
        quote = "'" if scan.single_quoted > scan.double_quoted else '"'
        exported = _ImportedElsewhere(facts)
        reports = [
            (use, _with_summary(_report(use, names, torch, quote, exported, target), use))
            for use in scan.uses
        ]
        yield from (report for _, report in reports)
        for statement in deprecated_imports(facts.module):
            if id(statement.statement) in compatibility_code:
                continue
            through = [(u, r) for u, r in reports if _head(u) in statement.bindings]
            if through:
                needs_torch = torch == "torch" and "torch" not in names.bindings
                yield import_report(statement, through, needs_torch, exported, target)

    def held_back(self) -> list[str]:
        return list(self._held_back)


def _reported_on(use: ApiUse, target: TorchVersion | None) -> bool:
    """As ruff's pyupgrade rules skip what the target Python cannot spell the new way, a use
    whose replacement the oldest supported torch lacks is not reported: the old name is the
    only one that works there. A bare `@autocast` is a bug on every torch."""
    return use.kind == "autocast-decorator" or use.api.replaceable_on(target)


class _ImportedElsewhere:
    """The names of this module that other linted files import from it (`from a import
    autocast` in b.py), read from the project's files on first need: an import the fix leaves
    unused here still serves them, so it stays. (`__all__` is honoured by the import remover
    itself.)"""

    def __init__(self, facts: ModuleFacts) -> None:
        self.facts = facts
        self.names: frozenset[str] | None = None

    def __contains__(self, name: object) -> bool:
        if self.names is None:
            self.names = frozenset()
            project = self.facts.project
            if project is not None:
                here = project.by_absolute.get(os.path.normpath(os.path.abspath(self.facts.path)))
                if here is not None:
                    self.names = imported_names(project).get(here, frozenset())
        if not isinstance(name, str):
            return False
        return name in self.names or ("*" in self.names and not name.startswith("_"))


def _report(
    use: ApiUse,
    names: ModuleNames,
    torch: str | None,
    quote: str,
    exported: Container[str] = frozenset(),
    target: TorchVersion | None = None,
) -> Report:
    api = use.api
    runtime = f'FutureWarning at run time: "{api.warning}"'
    if target is not None and target < DEPRECATED_SINCE:
        since = format_torch_version(DEPRECATED_SINCE)
        runtime = f'FutureWarning on torch >= {since}: "{api.warning}"'
    if use.kind == "reference":
        return Report(
            use.node,
            f'`{api.old}` is deprecated: calling it warns "{api.warning}"; {_by_hand(api)} '
            "(no automatic fix for a reference that is not called)",
        )
    if use.kind == "autocast-decorator":
        return Report(
            use.node,
            f"`@{api.old}` without parentheses passes the function as `enabled` and replaces "
            f"it with an autocast object (and is deprecated); write "
            f"`@{_decorator_fix(api, target)}`",
        )
    replacement: cst.BaseExpression | None = None
    if torch is not None:
        if use.kind == "decorator":
            replacement = cst.parse_expression(
                f"{torch}.amp.{api.name}(device_type={quote}{api.device}{quote})"
            )
        else:
            assert isinstance(use.node, cst.Call)
            replacement = rewrite_call(use.node, api, torch, quote)
    if replacement is None:
        if api.name == "autocast" and isinstance(use.node, cst.Call) and has_star_args(use.node):
            return Report(
                use.node,
                f"{runtime}; `*args` cannot be mapped onto the new argument order, rewrite it "
                "by hand with keywords",
            )
        return Report(use.node, runtime)
    message = runtime
    if api.name == "autocast" and isinstance(use.node, cst.Call) and positional_args(use.node):
        message += " (its positional arguments must become keywords: the order differs)"
    unused = tuple(
        binding
        for binding in binding_import(use.target, names)
        if (binding[2] or binding[1]) not in exported
    )
    fix = Fix(
        FixSafety.SAFE,
        f'Use `torch.amp.{api.name}` with device "{api.device}" ({api.needs})',
        edits=(Edit(use.node, replacement),),
        imports=("torch",) if torch == "torch" and "torch" not in names.bindings else (),
        unused_imports=unused,
    )
    return Report(use.node, message, fix)


def _decorator_fix(api: DeprecatedApi, target: TorchVersion | None) -> str:
    """The decorator a bare `@autocast` means to be, in a spelling the target torch has."""
    if api.replaceable_on(target):
        return f"torch.amp.autocast('{api.device}')"
    return f"{api.old}()"


def _by_hand(api: DeprecatedApi) -> str:
    """How to replace a use by hand, for the uses the fix leaves alone."""
    if api.device_is_keyword:
        return f"use `torch.amp.{api.name}` with `device_type='{api.device}'`"
    if api.name == "GradScaler":
        return (
            f"use `torch.amp.GradScaler` (the base class, so `isinstance` still matches old "
            f"scalers) with `'{api.device}'` as its first argument"
        )
    return f"use `torch.amp.{api.name}` with `'{api.device}'` as its first argument"


def _with_summary(report: Report, use: ApiUse) -> Report:
    """The report with its one-line summary: the deprecated name, what happens, the new API."""
    api = use.api
    if use.kind == "reference":
        summary = f"`{api.old}` is deprecated (calling it warns); use `torch.amp.{api.name}`"
    elif use.kind == "autocast-decorator":
        # The message ends with the decorator to write instead.
        summary = (
            f"bare `@{api.old}` makes the function an autocast object; write "
            f"{report.message.rsplit('write ', 1)[-1]}"
        )
    else:
        # "FutureWarning at run time" or "FutureWarning on torch >= 2.4", as the message says.
        when = report.message.split(":", 1)[0]
        summary = f'`{api.old}`: {when}; use `torch.amp.{api.name}` with "{api.device}"'
    return dataclasses.replace(report, summary=summary)
