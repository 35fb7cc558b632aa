"""AMP401 deprecated-amp-api: `torch.cuda.amp.*` and `torch.cpu.amp.*`, deprecated in 2.4."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import libcst as cst

from amp_lint.analysis.compat import fallback_nodes
from amp_lint.analysis.module import ModuleFacts
from amp_lint.analysis.names import ModuleNames, dotted_name
from amp_lint.analysis.outline import child_nodes
from amp_lint.findings import Edit, Fix, FixSafety
from amp_lint.rules.base import Report, Rule

# The old functions' positional parameters. `torch.amp.autocast(device_type, dtype, enabled,
# cache_enabled)` orders them differently, so positional arguments become keywords;
# `torch.amp.GradScaler(device, init_scale, growth_factor, backoff_factor, growth_interval,
# enabled)` keeps the old order after the device, so they stay positional.
_AUTOCAST_PARAMETERS = ("enabled", "dtype", "cache_enabled")
_GRAD_SCALER_PARAMETERS = (
    "init_scale",
    "growth_factor",
    "backoff_factor",
    "growth_interval",
    "enabled",
)
# custom_fwd(fwd=None, *, cast_inputs=None) and custom_bwd(bwd): the new ones add a
# keyword-only `device_type` and keep the rest.
_DECORATOR_POSITIONAL = 1


@dataclass(frozen=True)
class _Api:
    """One deprecated callable: `torch.<device>.amp.<name>`."""

    name: str  # autocast, GradScaler, custom_fwd or custom_bwd
    device: str  # "cuda" or "cpu"

    @property
    def old(self) -> str:
        return f"torch.{self.device}.amp.{self.name}"

    @property
    def device_is_keyword(self) -> bool:
        return self.name in ("custom_fwd", "custom_bwd")

    @property
    def warning(self) -> str:
        """The FutureWarning torch emits, word for word (torch/cuda/amp, torch/cpu/amp)."""
        if self.device_is_keyword:
            new = f"torch.amp.{self.name}(args..., device_type='{self.device}')"
        else:
            new = f"torch.amp.{self.name}('{self.device}', args...)"
        return f"`{self.old}(args...)` is deprecated. Please use `{new}` instead."

    @property
    def by_hand(self) -> str:
        if self.device_is_keyword:
            return f"use `torch.amp.{self.name}` with `device_type='{self.device}'`"
        if self.name == "GradScaler":
            return (
                f"use `torch.amp.GradScaler` (the base class, so `isinstance` still matches old "
                f"scalers) with `'{self.device}'` as its first argument"
            )
        return f"use `torch.amp.{self.name}` with `'{self.device}'` as its first argument"


def _deprecated_apis() -> dict[str, _Api]:
    table: dict[str, _Api] = {}
    for device, name, defining_module in (
        ("cuda", "autocast", "autocast_mode"),
        ("cuda", "custom_fwd", "autocast_mode"),
        ("cuda", "custom_bwd", "autocast_mode"),
        ("cuda", "GradScaler", "grad_scaler"),
        ("cpu", "autocast", "autocast_mode"),
        ("cpu", "GradScaler", "grad_scaler"),
    ):
        api = _Api(name, device)
        table[api.old] = api
        # The same objects, reached through the module that defines them.
        table[f"torch.{device}.amp.{defining_module}.{name}"] = api
    return table


DEPRECATED = _deprecated_apis()
# Qualified names an imported name must equal or prefix to reach a deprecated API.
_PREFIXES = frozenset(
    ".".join(parts[:i])
    for parts in (q.split(".") for q in DEPRECATED)
    for i in range(1, len(parts) + 1)
)


@dataclass(frozen=True)
class _Use:
    node: cst.BaseExpression  # the Call, or the bare Name/Attribute
    target: cst.BaseExpression  # the Name/Attribute naming the API
    api: _Api
    # "call", "decorator" (a bare `@custom_fwd`), "autocast-decorator" (a bare `@autocast`,
    # a bug) or "reference"
    kind: str


class DeprecatedAmpApi(Rule):
    code = "AMP401"
    name = "deprecated-amp-api"
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
with autocast(True, torch.bfloat16):
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
with torch.amp.autocast("cuda", enabled=True, dtype=torch.bfloat16):
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
removed.

One difference remains, in nested regions only. The old `autocast` wrappers pass their
defaults explicitly (`dtype=torch.float16` for "cuda", `torch.bfloat16` for "cpu",
`cache_enabled=True`), while `torch.amp.autocast` without them takes the current setting
(`torch.get_autocast_dtype(device)`). At top level that is the same default; but an old-style
`autocast()` without `dtype=` entered inside a region of another dtype (a library function
decorated with `@torch.cuda.amp.autocast()` and called under `torch.autocast("cuda",
dtype=torch.bfloat16)`, or after `torch.set_autocast_dtype`) used to switch to float16 and,
after the fix, keeps bfloat16. Add `dtype=` by hand where that matters.

The new spellings need a recent PyTorch: `torch.amp.autocast` exists in every 2.x release,
`torch.amp.GradScaler` since **2.3**, and `torch.amp.custom_fwd(device_type=...)` /
`custom_bwd(device_type=...)` since **2.4**. Projects that support older releases must keep
the old names (and ignore this rule) until they drop them.

There is no fix for a reference that is not called (`functools.partial(torch.cuda.amp.autocast,
dtype=...)`, `isinstance(s, torch.cuda.amp.GradScaler)`, a subclass), for an `autocast` call
with `*args` (the positions cannot be mapped onto the new order), for a call the old function
would reject (too many positional arguments, a `device_type=` keyword), and when the module
binds the name `torch` to something other than the torch package."""
    known_limitations = """\
Names are resolved from the module's imports, ignoring scopes: a local variable that shadows
an imported `amp` or `autocast` is taken for the import, and an `import torch` inside a
function counts as binding `torch` for the whole module.

An aliased `from torch.cuda.amp import GradScaler as Scaler` and an `import torch.cuda.amp as
amp` are left in place after the fix even when nothing uses them any more; remove them by
hand (flake8's F401 points them out)."""

    def check_module(self, facts: ModuleFacts) -> Iterator[Report]:
        names = facts.names
        if not any(target in _PREFIXES for target in names.bindings.values()):
            return
        scan = _Scan(names)
        scan.run(facts.module)
        if not scan.uses:
            return
        # Fallbacks for old PyTorch keep the old spelling on purpose and never run on 2.4+.
        compatibility_code = fallback_nodes(facts.module)
        scan.uses = [use for use in scan.uses if id(use.node) not in compatibility_code]
        torch = _torch_spelling(names)
        quote = "'" if scan.single_quoted > scan.double_quoted else '"'
        for use in scan.uses:
            yield _report(use, names, torch, quote)


def _report(use: _Use, names: ModuleNames, torch: str | None, quote: str) -> Report:
    api = use.api
    runtime = f'FutureWarning at run time: "{api.warning}"'
    if use.kind == "reference":
        return Report(
            use.node,
            f'`{api.old}` is deprecated: calling it warns "{api.warning}"; {api.by_hand} '
            "(no automatic fix for a reference that is not called)",
        )
    if use.kind == "autocast-decorator":
        return Report(
            use.node,
            f"`@{api.old}` without parentheses passes the function as `enabled` and replaces "
            f"it with an autocast object (and is deprecated); write "
            f"`@torch.amp.autocast('{api.device}')`",
        )
    replacement: cst.BaseExpression | None = None
    if torch is not None:
        if use.kind == "decorator":
            replacement = cst.parse_expression(
                f"{torch}.amp.{api.name}(device_type={quote}{api.device}{quote})"
            )
        else:
            assert isinstance(use.node, cst.Call)
            replacement = _rewrite_call(use.node, api, torch, quote)
    if replacement is None:
        if api.name == "autocast" and isinstance(use.node, cst.Call) and _has_star_args(use.node):
            return Report(
                use.node,
                f"{runtime}; `*args` cannot be mapped onto the new argument order, rewrite it "
                "by hand with keywords",
            )
        return Report(use.node, runtime)
    message = runtime
    if api.name == "autocast" and isinstance(use.node, cst.Call) and _positional(use.node):
        message += " (its positional arguments must become keywords: the order differs)"
    fix = Fix(
        FixSafety.SAFE,
        f'Use `torch.amp.{api.name}` with device "{api.device}"',
        edits=(Edit(use.node, replacement),),
        imports=("torch",) if torch == "torch" and "torch" not in names.bindings else (),
        unused_imports=_from_import_of(use.target, names),
    )
    return Report(use.node, message, fix)


# Finding the uses


class _Scan:
    """Walks every expression of the module once, collecting the uses of deprecated APIs and
    counting the quote style of its strings. Binding positions (assignment and loop targets,
    parameter, function and class names, keywords, attribute names, imports) are skipped."""

    def __init__(self, names: ModuleNames) -> None:
        self.names = names
        self.uses: list[_Use] = []
        self.single_quoted = 0
        self.double_quoted = 0

    def api_of(self, node: cst.CSTNode) -> _Api | None:
        if not isinstance(node, (cst.Name, cst.Attribute)):
            return None
        qualified = self.names.qualified_name(node)
        return DEPRECATED.get(qualified) if qualified else None

    def run(self, module: cst.Module) -> None:
        stack: list[cst.CSTNode] = [module]
        push = stack.append
        while stack:
            node = stack.pop()
            if isinstance(node, (cst.Name, cst.Attribute)):
                api = self.api_of(node)
                if api is not None:
                    self.uses.append(_Use(node, node, api, "reference"))
                elif isinstance(node, cst.Attribute):
                    push(node.value)
            elif isinstance(node, cst.Call):
                api = self.api_of(node.func)
                if api is not None:
                    self.uses.append(_Use(node, node.func, api, "call"))
                else:
                    push(node.func)
                stack.extend(arg.value for arg in node.args)
            elif isinstance(node, cst.SimpleString):
                self._count_quote(node)
            elif isinstance(node, cst.Decorator):
                api = self.api_of(node.decorator)
                if api is not None:
                    kind = "decorator" if api.device_is_keyword else "reference"
                    if api.name == "autocast":
                        kind = "autocast-decorator"
                    self.uses.append(_Use(node.decorator, node.decorator, api, kind))
                else:
                    push(node.decorator)
            elif isinstance(node, _SKIPPED):
                continue
            elif isinstance(node, (cst.AssignTarget, cst.Del)):
                self._push_target(stack, node.target)
            elif isinstance(node, _TARGET_AND_MORE):
                self._push_target(stack, node.target)
                stack.extend(child for child in child_nodes(node) if child is not node.target)
            elif isinstance(node, cst.FunctionDef):
                stack.extend(node.decorators)
                push(node.params)
                if node.returns is not None:
                    push(node.returns)
                push(node.body)
            elif isinstance(node, cst.ClassDef):
                stack.extend(node.decorators)
                stack.extend(arg.value for arg in (*node.bases, *node.keywords))
                push(node.body)
            elif isinstance(node, cst.Param):
                if node.annotation is not None:
                    push(node.annotation)
                if node.default is not None:
                    push(node.default)
            elif isinstance(node, cst.Arg):
                push(node.value)
            else:
                stack.extend(child_nodes(node))

    def _push_target(self, stack: list[cst.CSTNode], target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            return
        if isinstance(target, cst.Attribute):
            stack.append(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._push_target(stack, element.value)
        elif isinstance(target, cst.StarredElement):
            self._push_target(stack, target.value)
        else:
            stack.append(target)

    def _count_quote(self, node: cst.SimpleString) -> None:
        body = node.value.lstrip("rRbBuUfF")
        if body.startswith(("'''", '"""')):
            return  # docstrings are triple double-quoted whatever the code style
        if body.startswith("'"):
            self.single_quoted += 1
        else:
            self.double_quoted += 1


# Nodes with nothing to report inside: imports bind names, `global`/`nonlocal` and `as`
# targets only name things.
_SKIPPED = (cst.Import, cst.ImportFrom, cst.Global, cst.Nonlocal, cst.AsName)
# Nodes with a binding `target` besides expressions that are read.
_TARGET_AND_MORE = (cst.AnnAssign, cst.AugAssign, cst.NamedExpr, cst.For, cst.CompFor)


# Building the fix


def _torch_spelling(names: ModuleNames) -> str | None:
    """How the fixed code names the torch package; None when `torch` means something else."""
    spellings = names.local_names_for("torch")
    if "torch" in spellings:
        return "torch"
    if spellings:
        return sorted(spellings)[0]
    if "torch" in names.bindings:
        return None  # e.g. `from somewhere import torch`: `torch.amp` would be wrong
    return "torch"  # the fix adds `import torch`


def _from_import_of(
    target: cst.BaseExpression, names: ModuleNames
) -> tuple[tuple[str, str | None, str | None], ...]:
    """The import that binds the head of `target` (`from m import n [as a]` or `import m as
    a`), if any: the fix may leave it unused."""
    dotted = dotted_name(target)
    if dotted is None:
        return ()
    head = dotted.split(".", 1)[0]
    if head in names.nested:
        return ()  # removing it could leave its `if`/`try` block empty
    bound = names.bindings.get(head, "")
    module, _, name = bound.rpartition(".")
    for statement in names.from_imports.get((module, name), ()):
        assert not isinstance(statement.names, cst.ImportStar)
        for alias in statement.names:
            local = alias.asname.name if alias.asname is not None else alias.name
            if isinstance(local, cst.Name) and local.value == head:
                return ((module, name, head if head != name else None),)
    if bound.startswith("torch.") and head != "torch":
        return ((bound, None, head),)  # import torch.cuda.amp as amp
    return ()


def _positional(call: cst.Call) -> list[cst.Arg]:
    return [arg for arg in call.args if arg.keyword is None and not arg.star]


def _has_star_args(call: cst.Call) -> bool:
    return any(arg.star == "*" for arg in call.args)


def _keywords(call: cst.Call) -> set[str]:
    return {arg.keyword.value for arg in call.args if arg.keyword is not None}


def _rewrite_call(call: cst.Call, api: _Api, torch: str, quote: str) -> cst.Call | None:
    """The same call through `torch.amp`, or None when the arguments cannot be mapped."""
    device = cst.SimpleString(f"{quote}{api.device}{quote}")
    positional = _positional(call)
    args: list[cst.Arg]
    if api.name == "autocast":
        if _has_star_args(call) or len(positional) > len(_AUTOCAST_PARAMETERS):
            return None
        if "device_type" in _keywords(call):
            return None
        keyword_for = dict(zip(map(id, positional), _AUTOCAST_PARAMETERS))
        args = [
            _as_keyword(arg, keyword_for[id(arg)]) if id(arg) in keyword_for else arg
            for arg in call.args
        ]
        args = _insert_arg(call, args, 0, cst.Arg(device))
    elif api.name == "GradScaler":
        if len(positional) > len(_GRAD_SCALER_PARAMETERS) or "device" in _keywords(call):
            return None
        args = _insert_arg(call, list(call.args), 0, cst.Arg(device))
    else:
        if len(positional) > _DECORATOR_POSITIONAL or "device_type" in _keywords(call):
            return None
        new = cst.Arg(device, keyword=cst.Name("device_type"), equal=_TIGHT_EQUAL)
        double_star = [i for i, arg in enumerate(call.args) if arg.star == "**"]
        at = double_star[0] if double_star else len(call.args)
        args = _insert_arg(call, list(call.args), at, new)
    func = cst.parse_expression(f"{torch}.amp.{api.name}")
    return call.with_changes(func=func, args=args)


_TIGHT_EQUAL = cst.AssignEqual(
    whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
)


def _as_keyword(arg: cst.Arg, keyword: str) -> cst.Arg:
    return arg.with_changes(keyword=cst.Name(keyword), equal=_TIGHT_EQUAL)


def _insert_arg(call: cst.Call, args: Sequence[cst.Arg], at: int, new: cst.Arg) -> list[cst.Arg]:
    """`args` with `new` inserted before position `at`, laid out like its neighbours: on a
    line of its own in a call that has one argument per line, after ", " otherwise.
    Comments stay on the argument they follow."""
    result = list(args)
    if not result:
        return [new]
    if at < len(result):
        before = call.whitespace_before_args if at == 0 else _comma_whitespace(result[at - 1])
        result.insert(at, new.with_changes(comma=cst.Comma(whitespace_after=_separator(before))))
        return result
    last = result[-1]
    layout = call.whitespace_before_args
    if isinstance(last.comma, cst.Comma):  # a trailing comma: the new argument keeps it
        after = last.comma.whitespace_after
        result[-1] = last.with_changes(
            comma=last.comma.with_changes(whitespace_after=_line_break_after(after, layout))
        )
        result.append(
            new.with_changes(
                comma=last.comma.with_changes(whitespace_after=_without_comment(after))
            )
        )
        return result
    after = last.whitespace_after_arg
    result[-1] = last.with_changes(
        comma=cst.Comma(whitespace_after=_line_break_after(after, layout)),
        whitespace_after_arg=cst.SimpleWhitespace(""),
    )
    result.append(new.with_changes(whitespace_after_arg=_without_comment(after)))
    return result


def _comma_whitespace(arg: cst.Arg) -> cst.BaseParenthesizableWhitespace:
    if isinstance(arg.comma, cst.Comma):
        return arg.comma.whitespace_after
    return cst.SimpleWhitespace(" ")


def _separator(whitespace: cst.BaseParenthesizableWhitespace) -> cst.BaseParenthesizableWhitespace:
    """What goes between two arguments laid out like the ones after `whitespace`."""
    if isinstance(whitespace, cst.ParenthesizedWhitespace):
        return _without_comment(whitespace)
    return cst.SimpleWhitespace(" ")


def _without_comment(
    whitespace: cst.BaseParenthesizableWhitespace,
) -> cst.BaseParenthesizableWhitespace:
    """The same line break and indentation, without the comment and blank lines before it."""
    if isinstance(whitespace, cst.ParenthesizedWhitespace):
        return whitespace.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=[])
    return whitespace


def _line_break_after(
    whitespace: cst.BaseParenthesizableWhitespace, layout: cst.BaseParenthesizableWhitespace
) -> cst.BaseParenthesizableWhitespace:
    """Whitespace after the comma that now follows an argument which was last: keeps its
    comment, then indents like the first argument (`layout`) when the call is multi-line."""
    if isinstance(whitespace, cst.ParenthesizedWhitespace):
        if isinstance(layout, cst.ParenthesizedWhitespace):
            return whitespace.with_changes(indent=layout.indent, last_line=layout.last_line)
        return whitespace.with_changes(last_line=cst.SimpleWhitespace(""))
    return cst.SimpleWhitespace(" ")
