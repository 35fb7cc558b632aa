"""Which custom `torch.autograd.Function` a call applies (AMP203), wherever it is defined.

A Function is applied as `Cls.apply(...)` (`Cls` defined here, imported, or reached through a
module: `ops.Cls.apply(...)`), or through a name bound to its `apply`: `fn = Cls.apply` or
`self.fn = Cls.apply` in this module, or `scaled_matmul = Cls.apply` in another linted file
that this one imports `scaled_matmul` from (the usual way packages export their ops). A
Function of another file is read with that file's own names and index, so the checks that
decide whether it can meet mismatched dtypes are the same wherever it lives.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import libcst as cst

from amp_lint.analysis.autograd.functions import (
    calls_outside_torch,
    needs_matching_dtypes,
    reads_saved_tensors,
)
from amp_lint.analysis.autograd.half_inputs import dispatches_to_kernel, upcasts_inputs
from amp_lint.analysis.interpreter.frames import ExecutionContext, ForeignClass
from amp_lint.analysis.interpreter.imported_names import applied_class
from amp_lint.analysis.syntax.calls import ClassInfo, ModuleIndex
from amp_lint.analysis.syntax.module import ModuleFacts
from amp_lint.analysis.syntax.names import ModuleNames, dotted_name
from amp_lint.analysis.syntax.outline import (
    own_small_statements,
    small_statements,
    walk_function_statements,
    walk_statements,
)


@dataclass(frozen=True)
class FunctionClass:
    """A custom Function with the facts of the module that defines it (`path` None: the
    module analysed) and where its class statement is."""

    info: ClassInfo
    names: ModuleNames
    index: ModuleIndex
    path: str | None
    definition: tuple[str, int]  # (path, line) of `class Cls(...)`

    @property
    def defined_at(self) -> str:
        path, line = self.definition
        return f"{path}:{line}"

    def method(self, name: str) -> cst.FunctionDef | None:
        seen: set[str] = set()
        current: ClassInfo | None = self.info
        while current is not None and current.name not in seen:
            seen.add(current.name)
            if name in current.methods:
                return current.methods[name]
            bases = [self.index.classes.get(b) for b in current.base_names]
            current = next((b for b in bases if b is not None and b.is_autograd_function), None)
        return None

    @property
    def uses_setup_context(self) -> bool:
        """In the style torch 2.0 added: forward without `ctx`, a `setup_context` staticmethod.
        `custom_fwd` cannot decorate it: it keeps its state on forward's first argument (an
        input tensor here, so `custom_bwd` raises AttributeError), and setup_context saves
        the inputs before custom_fwd casts them (backward still mixes dtypes)."""
        return self.method("setup_context") is not None

    def handles_half(
        self,
        forward: cst.FunctionDef,
        launches_kernels: Callable[[str], bool] = lambda qualified: False,
    ) -> bool:
        """Forward deals with half inputs itself: it upcasts them (`x.float()`,
        `x.to(torch.float32)`), or it launches a Triton kernel (`kernel[grid](...)` of a
        `@triton.jit` function, or any such launch in a module that imports triton) or calls
        a registered custom op (`torch.ops.<namespace>.<op>`), which load half inputs and
        compute in float32 inside. Decorating it with `custom_fwd(cast_inputs=torch.float32)`
        would materialise the float32 copies the kernel is written to avoid."""
        return upcasts_inputs(forward, self.names) or dispatches_to_kernel(
            forward, self.names, self.index, launches_kernels
        )

    def mixes_dtypes(self, forward: cst.FunctionDef, backward: cst.FunctionDef | None) -> bool:
        """Whether the Function can meet mismatched dtypes: a backward that reads saved
        tensors and combines tensors where dtypes must match (a matmul, a scatter/index
        write, an extension kernel), or a forward that calls code other than torch's.
        Elementwise ops promote mixed dtypes, so a backward made of them alone runs (measured
        on transformers' GeLU, sqrt and dropout Functions)."""
        if (
            backward is not None
            and reads_saved_tensors(backward)
            and needs_matching_dtypes(backward, self.names, self.index)
        ):
            return True
        return calls_outside_torch(forward, self.names, self.index)


def _assignments(module: cst.Module) -> Iterator[tuple[int, cst.Assign]]:
    """Every assignment of the module with its scope: the enclosing function's id, or 0 at
    module and class level."""
    in_functions: dict[int, int] = {}
    for statement in walk_statements(module):
        if isinstance(statement, cst.FunctionDef):
            for inner in walk_function_statements(statement):
                for small in own_small_statements(inner):
                    in_functions[id(small)] = id(statement)
    for small in small_statements(module):
        if isinstance(small, cst.Assign):
            yield in_functions.get(id(small), 0), small


class AppliedFunctions:
    """The module's own Function classes and the names bound to an `apply`, read once per
    module (`read`); then, per call, the Function it applies (`applied`)."""

    def __init__(self) -> None:
        self._facts: ModuleFacts | None = None
        self._index: ModuleIndex | None = None
        self._functions: dict[str, ClassInfo] = {}
        # `fn = Cls.apply` / `self.fn = ops.Cls.apply`: "fn" / "self.fn" -> `Cls` / `ops.Cls`.
        self._aliases: dict[str, cst.BaseExpression] = {}

    def read(self, facts: ModuleFacts, index: ModuleIndex) -> None:
        self._facts, self._index = facts, index
        self._functions = {n: i for n, i in index.classes.items() if i.is_autograd_function}
        self._aliases = {}
        # An attribute also bound to something else (`self.ctc_loss = torch.nn.CTCLoss()` in
        # one branch of `__init__`, `= GTNCTCLossFunction.apply` in another) may hold either,
        # and its calls elsewhere sit in branches that match the binding's: no alias. A
        # function's local variable chosen between the Function and something else (RevViT's
        # `executing_fn = RevBackProp.apply` when training, a plain method otherwise) is called
        # after the choice, so it may call the Function: the alias stays, unless it names two.
        rebound: set[str] = set()
        local_scopes: dict[str, set[int]] = {}  # a local name in two functions: two variables
        for scope, small in _assignments(facts.module):
            cls = applied_class(small.value)
            for target in small.targets:
                name = dotted_name(target.target)
                if not name:
                    continue
                if "." not in name:
                    local_scopes.setdefault(name, set()).add(scope)
                known = self._aliases.get(name)
                if cls is not None and (known is None or dotted_name(known) == dotted_name(cls)):
                    self._aliases[name] = cls
                elif cls is not None or "." in name or not scope:
                    rebound.add(name)
        for name in rebound | {n for n, found in local_scopes.items() if len(found) > 1}:
            self._aliases.pop(name, None)

    def applied(self, call: cst.Call, ctx: ExecutionContext) -> FunctionClass | None:
        """The Function class `call` applies, in this module or another linted file."""
        cls = applied_class(call.func)
        if cls is None:
            cls = self._aliases.get(dotted_name(call.func) or "")
        if cls is not None:
            return self._class_named(cls, ctx)
        # `scaled_matmul(...)`, imported from a file where `scaled_matmul = Cls.apply`.
        foreign = ctx.imported_class(call.func)
        if foreign is None or not foreign.applied or not foreign.info.is_autograd_function:
            return None
        return _foreign_function(foreign)

    def _class_named(self, cls: cst.BaseExpression, ctx: ExecutionContext) -> FunctionClass | None:
        local = self._functions.get(cls.value) if isinstance(cls, cst.Name) else None
        if local is not None:
            assert self._facts is not None and self._index is not None
            where = (self._facts.path, _class_line(self._facts, local))
            return FunctionClass(local, self._facts.names, self._index, None, where)
        foreign = ctx.imported_class(cls)
        if foreign is None or foreign.applied or not foreign.info.is_autograd_function:
            return None
        return _foreign_function(foreign)


def _foreign_function(foreign: ForeignClass) -> FunctionClass:
    line = _class_line(foreign.facts, foreign.info) if foreign.facts is not None else 0
    where = (foreign.path, line)
    return FunctionClass(foreign.info, foreign.names, foreign.index, foreign.path, where)


def _class_line(facts: ModuleFacts, info: ClassInfo) -> int:
    """The line of `class Cls` (the class's own code starts with the blank lines and
    comments above it, so its name is looked up within it)."""
    return facts.line_of(info.node.name, info.node)
