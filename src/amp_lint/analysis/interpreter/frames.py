"""Execution frames and the view of them that rules get (ExecutionContext)."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace

import libcst as cst

from amp_lint.analysis.regions.finder import AutocastRegion
from amp_lint.analysis.syntax.calls import CallSite, ClassInfo, ModuleIndex
from amp_lint.analysis.syntax.module import ModuleFacts
from amp_lint.analysis.syntax.names import ModuleNames
from amp_lint.analysis.values.dtypes import DType
from amp_lint.analysis.values.value import Env, Value

# Calls followed from a root, within a file and across files, before results turn unknown.
MAX_CALL_DEPTH = 10


def call_site(facts: ModuleFacts, call: cst.Call, caller: Frame) -> CallSite:
    """The step from `caller` into `call`. Its line, needed only for a finding or another
    file's entry, is found within the caller's function, then its class, when the call's
    code recurs in the file: positions cost a parse (`self` may be a subclass, whose code
    does not hold the call, so the class counts only when it defines the function)."""
    owner = caller.self_class
    methods = owner.methods.values() if owner is not None else ()
    owner_node = owner.node if owner is not None and caller.function in methods else None
    outer = (caller.function, owner_node)
    return CallSite(facts.path, call, lambda node: facts.line_of(node, *outer))


@dataclass
class Frame:
    env: Env
    regions: tuple[AutocastRegion, ...]  # outermost first
    # The calls from the region to here; steps in other files arrive as "path:line" text.
    chain: tuple[CallSite | str, ...] = ()
    function: cst.FunctionDef | None = None
    self_class: ClassInfo | None = None
    # Why this frame is analysed under autocast when no caller was seen ("assumed ...").
    assumption: str | None = None
    # The dtype the model's parameters were cast to (`model.half()`), resting on the
    # assumption that this code is part of that model; None for float32 parameters.
    half_params: DType | None = None
    # Analysed because a dispatch or library mode put it under autocast: a call it cannot
    # see into does not dispatch again (which would turn every file into library mode).
    dispatched: bool = False
    # Whether autograd records: False under `torch.no_grad()` / `torch.inference_mode()`.
    grad_enabled: bool = True
    depth: int = 0
    returns: list[Value] = field(default_factory=list)
    # Values of the current statement's expressions, by node identity.
    cache: dict[int, Value] = field(default_factory=dict)

    @property
    def region(self) -> AutocastRegion | None:
        """The innermost region, enabled or not (an `enabled=False` island is a region too)."""
        return self.regions[-1] if self.regions else None

    @property
    def active_region(self) -> AutocastRegion | None:
        region = self.region
        return region if region is not None and region.is_active else None

    @property
    def in_half(self) -> bool:
        """Under an enabled autocast region, or in a model cast to half: worth following
        calls from here, and calls amp-lint cannot see into return half values."""
        return self.active_region is not None or self.half_params is not None


@dataclass(frozen=True)
class ForeignClass:
    """A class defined in another linted file, as the analysis of that file sees it."""

    path: str
    info: ClassInfo
    names: ModuleNames
    index: ModuleIndex
    # Reached through a name bound to the class's `apply` (`scaled_matmul =
    # ScaledMatmul.apply` in that file): calling the name applies an autograd Function.
    applied: bool = False
    # That file's facts, for the line of the class (`facts.line_of(info.node)`).
    facts: ModuleFacts | None = field(default=None, compare=False, repr=False)


class ExecutionContext:
    """What an observer sees at a node: the region it runs under and the values around it.

    Values resting on an assumption (an opaque model's output taken to be half) are shown
    only to observers that set `accepts_assumptions`; to the others they are unknown. The
    assumptions a value shown carried are collected in `assumptions_used`, so that what is
    reported from it can say what it rests on.
    """

    def __init__(
        self,
        facts: ModuleFacts,
        frame: Frame,
        statement: cst.CSTNode,
        evaluate: Callable[[cst.BaseExpression, Frame], Value],
        find_class: Callable[[str], ForeignClass | None] = lambda qualified: None,
        opaque_sites: Collection[int] = frozenset(),
        launches_kernels: Callable[[str], bool] = lambda qualified: False,
    ) -> None:
        self.facts = facts
        self.frame = frame
        self._find_class = find_class
        # Whether an imported name is a function of a linted file that launches kernels.
        self.launches_kernels = launches_kernels
        self._opaque_sites = opaque_sites
        # The statement being executed: a SimpleStatementLine, or a compound statement
        # whose header holds the node.
        self.statement = statement
        self._evaluate = evaluate
        self.accepts_assumptions = False
        self.assumptions_used: list[str] = []
        # Release notes (DType.release_note) of the values shown, said like assumptions.
        self.release_notes_used: list[str] = []

    @property
    def region(self) -> AutocastRegion | None:
        return self.frame.region

    @property
    def active_region(self) -> AutocastRegion | None:
        return self.frame.active_region

    @property
    def regions(self) -> tuple[AutocastRegion, ...]:
        return self.frame.regions

    def value(self, node: cst.BaseExpression) -> Value:
        return self._admit(self._evaluate(node, self.frame))

    def _admit(self, value: Value) -> Value:
        note = value.dtype.release_note
        if note is not None and note not in self.release_notes_used:
            self.release_notes_used.append(note)
        assumed = [d for d in (value.dtype, value.integer_from) if d is not None and d.assumed]
        if not assumed:
            return value
        if not self.accepts_assumptions:
            integer_from = value.integer_from
            if integer_from is not None and integer_from.assumed:
                integer_from = None
            return replace(value, dtype=value.dtype.known(), integer_from=integer_from)
        for dtype in assumed:
            if dtype.assumption and dtype.assumption not in self.assumptions_used:
                self.assumptions_used.append(dtype.assumption)
        return value

    def dtype(self, node: cst.BaseExpression) -> DType:
        return self.value(node).dtype

    def constant(self, node: cst.BaseExpression) -> float | None:
        return self.value(node).constant

    def is_opaque_call(self, call: cst.Call) -> bool:
        """The call runs code amp-lint cannot see into (neither torch's nor a linted
        file's): a library function, a model received as a parameter. Evaluates it first."""
        self._evaluate(call, self.frame)
        return id(call) in self._opaque_sites

    def qualified_name(self, node: cst.BaseExpression) -> str | None:
        return self.facts.names.qualified_name(node)

    def imported_class(self, node: cst.BaseExpression) -> ForeignClass | None:
        """The class an imported name refers to, when another linted file defines it
        (following re-exports through a package's `__init__.py`)."""
        qualified = self.qualified_name(node)
        return self._find_class(qualified) if qualified is not None else None

    def call_chain(self) -> tuple[tuple[str, int], ...]:
        """The chain `provenance` names, as data: (path, line) of each call from the region."""
        steps = []
        for site in self.frame.chain:
            path, _, line = str(site).rpartition(":")
            steps.append((path, int(line)))
        return tuple(steps)

    def provenance(self) -> str:
        """ " (via a.py:12 → a.py:40)", or why the frame is assumed to run under autocast,
        and the assumptions about values that what was just reported rests on."""
        parts = []
        if self.frame.chain:
            parts.append("via " + " → ".join(str(site) for site in self.frame.chain))
        elif self.frame.assumption:
            parts.append(self.frame.assumption)
        for why in self.assumptions_used:
            # An assumption the frame's own why already states (`model.half()` both makes
            # the method run and its parameters half) is said once.
            shown = self.frame.assumption if not self.frame.chain else None
            if shown is None or why.split(": ", 1)[-1] not in shown:
                parts.append(f"assumes {why}")
        parts.extend(self.release_notes_used)
        return f" ({'; '.join(parts)})" if parts else ""
