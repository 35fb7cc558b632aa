"""The values a call passes, and the parameters of the function that receives them."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from amp_lint.analysis.values.dtypes import NON_TENSOR_KINDS
from amp_lint.analysis.values.value import Value


@dataclass(frozen=True)
class Arguments:
    positional: tuple[Value, ...] = ()
    keywords: tuple[tuple[str, Value], ...] = ()
    # `*args` / `**kwargs` in the call: which parameter gets what is not known.
    starred: bool = False

    @property
    def values(self) -> tuple[Value, ...]:
        return self.positional + tuple(value for _, value in self.keywords)

    def key(self) -> tuple[object, ...]:
        """What tells two calls' analyses apart: dtypes, constants and containers."""
        return (
            tuple(_memo_value(v) for v in self.positional),
            tuple((k, _memo_value(v)) for k, v in self.keywords),
            self.starred,
        )

    def after(self, preset: tuple[tuple[str | None, Value], ...]) -> Arguments:
        """These arguments following those a `functools.partial` gave in advance."""
        positional = tuple(value for name, value in preset if name is None)
        keywords = dict((name, value) for name, value in preset if name is not None)
        keywords.update(self.keywords)
        return Arguments(positional + self.positional, tuple(keywords.items()), self.starred)

    def carries_tensor_data(self) -> bool:
        """Some argument may be a tensor or hold tensors (not only numbers and strings)."""
        return self.starred or any(
            v.dtype.kind not in NON_TENSOR_KINDS or v.elements is not None or v.each is not None
            for v in self.values
        )


def _memo_value(value: Value) -> object:
    return (value.portable(), value.instance_of)


def parameter_names(function: cst.FunctionDef, *, skip_self: bool) -> list[str]:
    params = [*function.params.posonly_params, *function.params.params]
    if skip_self and params and not is_static(function):
        params = params[1:]
    return [p.name.value for p in (*params, *function.params.kwonly_params)]


def is_static(function: cst.FunctionDef) -> bool:
    return any(
        isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod"
        for d in function.decorators
    )
