"""The fix of AMP401: the same call through `torch.amp`, its arguments mapped onto the new
signature and laid out like the call's own, and how the fixed code spells `torch`."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from amp_lint.analysis.syntax.deprecated_amp_apis import DeprecatedApi
from amp_lint.analysis.syntax.names import ModuleNames, dotted_name

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


def torch_spelling(names: ModuleNames) -> str | None:
    """How the fixed code names the torch package; None when `torch` means something else."""
    spellings = names.local_names_for("torch")
    if "torch" in spellings:
        return "torch"
    if spellings:
        return sorted(spellings)[0]
    if "torch" in names.bindings:
        return None  # e.g. `from somewhere import torch`: `torch.amp` would be wrong
    return "torch"  # the fix adds `import torch`


def binding_import(
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


def positional_args(call: cst.Call) -> list[cst.Arg]:
    return [arg for arg in call.args if arg.keyword is None and not arg.star]


def has_star_args(call: cst.Call) -> bool:
    return any(arg.star == "*" for arg in call.args)


def _keywords(call: cst.Call) -> set[str]:
    return {arg.keyword.value for arg in call.args if arg.keyword is not None}


def rewrite_call(call: cst.Call, api: DeprecatedApi, torch: str, quote: str) -> cst.Call | None:
    """The same call through `torch.amp`, or None when the arguments cannot be mapped."""
    device = cst.SimpleString(f"{quote}{api.device}{quote}")
    positional = positional_args(call)
    args: list[cst.Arg]
    if api.name == "autocast":
        if has_star_args(call) or len(positional) > len(_AUTOCAST_PARAMETERS):
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
