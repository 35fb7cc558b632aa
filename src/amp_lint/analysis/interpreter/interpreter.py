"""The dtype interpreter: executes each function abstractly, statement by statement, under
the autocast regions that apply, and hands each node to the observers that asked for it.

Every function is analysed once on its own (unknown arguments, no region unless decorated),
again for each distinct (argument dtypes, region) it is called with from inside a region,
and, when the file uses fp16 autocast or a GradScaler, each nn.Module.forward is analysed as
running under that autocast. Results are memoised, recursion is cut at MAX_CALL_DEPTH.
Each statement is executed by the base class, StatementExecutor (statements.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Protocol

import libcst as cst

from amp_lint.analysis.autograd.graph import records_in
from amp_lint.analysis.interpreter.arguments import parameter_names
from amp_lint.analysis.interpreter.binding import Binding
from amp_lint.analysis.interpreter.calling import LocalCalls
from amp_lint.analysis.interpreter.cross_file import CrossFileCalls, RememberedResult, ResultKey
from amp_lint.analysis.interpreter.dispatch import Dispatch
from amp_lint.analysis.interpreter.evaluator import Evaluator
from amp_lint.analysis.interpreter.frames import ExecutionContext, Frame
from amp_lint.analysis.interpreter.instances import InstanceAttributes
from amp_lint.analysis.interpreter.observers import NodeObserver
from amp_lint.analysis.interpreter.statements import StatementExecutor
from amp_lint.analysis.project.entry_points import (
    LIBRARY_SPELLING,
    assumed_entry_points,
    decorator_regions,
)
from amp_lint.analysis.project.index import (
    MAX_DISPATCH_TARGETS,
    ClassAssumption,
    EntryContext,
    ProjectIndex,
    dispatch_key,
)
from amp_lint.analysis.regions.finder import AutocastRegion, accelerate_settings
from amp_lint.analysis.syntax.calls import ClassInfo, build_index
from amp_lint.analysis.syntax.module import ModuleFacts
from amp_lint.analysis.values.dtypes import OTHER, DType
from amp_lint.analysis.values.value import Env, Value

__all__ = ["ExecutionContext", "Interpreter", "run_interpreter"]


class ModuleLoader(Protocol):
    """Gives the interpreter of another linted file, to learn what a call into it returns,
    and keeps what such calls returned: modules are evicted, results are small."""

    def interpreter_for(self, path: str) -> Interpreter | None: ...

    def remembered_result(self, key: ResultKey) -> RememberedResult | None: ...

    def remember_result(self, key: ResultKey, result: RememberedResult) -> None: ...


class Interpreter(StatementExecutor):
    def __init__(
        self,
        facts: ModuleFacts,
        observers: Sequence[NodeObserver],
        project: ProjectIndex | None = None,
        loader: ModuleLoader | None = None,
    ) -> None:
        self.facts = facts
        self.project = project
        facts.project = project  # module-level rules read it (AMP401: names imported elsewhere)
        self.loader = loader
        # Calls into other linted files worth following, by EntryContext.key.
        self.outgoing: dict[tuple[object, ...], EntryContext] = {}
        # Other linted files whose code decided a value here (what their functions return).
        self.dependencies: set[str] = set()
        self.cross_file = CrossFileCalls(self)
        self.index = build_index(facts.module, facts.names)
        self.accelerate = accelerate_settings(facts.module, facts.names)
        self.calls = LocalCalls(self)
        self.dispatch = Dispatch(facts.path)
        self.instances = InstanceAttributes(self)
        self.evaluator = Evaluator(self)
        self.module_env = Env()
        self.observers_by_type: dict[type[cst.CSTNode], list[NodeObserver]] = {}
        for observer in observers:
            for node_type in observer.node_types:
                self.observers_by_type.setdefault(node_type, []).append(observer)
        self.binding = Binding(self)

    # --- entry points ----------------------------------------------------------------------

    def run(
        self,
        entries: Sequence[EntryContext] = (),
        assumptions: Sequence[ClassAssumption] = (),
        *,
        own_roots: bool = True,
    ) -> None:
        """Analyse the module from its own roots (its body, every function on its own, the
        functions assumed to run under autocast) unless `own_roots` is False, then from the
        entries other files' calls make and the methods frameworks run under autocast."""
        self.run_module_body(report=own_roots)
        if own_roots:
            for function in self.index.all_functions:
                regions = decorator_regions(function, self.facts.names, self.accelerate)
                self.run_root(function, regions, None)
            for root in assumed_entry_points(self.facts, self.index, self.accelerate):
                # The function's own decorators inside the assumed region: an
                # `@autocast("cuda", enabled=False)` forward runs with autocast off
                # (alphafold3's fix of its rigid alignment's svd).
                own = decorator_regions(root.function, self.facts.names, self.accelerate)
                regions = (root.region, *own)
                self.run_root(root.function, regions, root.why, self_class=root.self_class)
        for assumption in assumptions:
            self.run_assumed(assumption)
        for entry in entries:
            self.cross_file.run_entry(entry)
        if self.project is None:
            self._dispatch_own_modules()

    def run_assumed(self, assumption: ClassAssumption) -> None:
        """The methods an assumption names, run under its region or with its half
        parameters; a dispatch to more of this file's classes than a program may hold is
        not guessed (see MAX_DISPATCH_TARGETS)."""
        regions = (assumption.region,) if assumption.region is not None else ()
        functions = self.cross_file.assumed_methods(assumption)
        if assumption.near is not None and len(functions) > MAX_DISPATCH_TARGETS:
            return
        for function in functions:
            self.run_root(
                function,
                regions,
                assumption.why,
                half_params=assumption.half_params,
                dispatched=assumption.near is not None,
                positional=assumption.positional,
            )

    def dispatched(self) -> list[ClassAssumption]:
        """The dispatch assumptions this module's calls it cannot see into make."""
        return self.dispatch.assumptions()

    def _dispatch_own_modules(self) -> None:
        """A file analysed on its own (the flake8 plugin) applies its dispatch assumptions to
        its own classes; in a project they reach this file like any other, in a later
        round, within the program's bounds."""
        applied: set[object] = set()
        while True:
            new = [a for a in self.dispatched() if dispatch_key(a) not in applied]
            if not new:
                return
            for assumption in new:
                applied.add(dispatch_key(assumption))
                self.run_assumed(assumption)

    def run_root(
        self,
        function: cst.FunctionDef,
        regions: tuple[AutocastRegion, ...],
        why: str | None,
        self_class: ClassInfo | None = None,
        *,
        half_params: DType | None = None,
        dispatched: bool = False,
        positional: tuple[Value, ...] = (),
    ) -> None:
        """Analyse a function with unknown arguments (parameters with defaults get them),
        or the known `positional` arguments of the call dispatched to it;
        a method runs with `self` an instance of `self_class` (a subclass that inherits it)
        or of the class defining it. In a model cast to half, its inputs are taken to be
        half too (they are the activations of the layers before it)."""
        owner = self.index.owner.get(id(function))
        self_class = self_class or owner
        frame = Frame(
            env=Env(),
            regions=regions,
            self_class=self_class,
            function=function,
            assumption=why,
            half_params=half_params,
            dispatched=dispatched or any(r.spelling == LIBRARY_SPELLING for r in regions),
            grad_enabled=records_in(function, self.facts.names),
        )
        if self_class is not None:
            frame.env.set("self", Value(OTHER, instance_of=self_class.qualified))
        self.calls.bind_values(
            function, list(positional), {}, frame, skip_self=owner is not None, caller_seen=False
        )
        if half_params is not None:
            for name in parameter_names(function, skip_self=owner is not None):
                bound = frame.env.get(name)
                if bound is None or bound.maybe_none:
                    maybe_none = bound is not None
                    frame.env.set(name, Value(half_params, maybe_none=maybe_none))
        self.exec_suite(function.body, frame)

    def run_module_body(self, *, report: bool = True) -> None:
        """Execute the module's top level, binding its names (`proj = nn.Linear(8, 8)`);
        without `report`, for its values only (its findings came from an earlier round)."""
        if report:
            self.exec_block(self.facts.module.body, Frame(env=self.module_env, regions=()))
            return
        with self.observers_paused():
            self.exec_block(self.facts.module.body, Frame(env=self.module_env, regions=()))

    @contextmanager
    def observers_paused(self) -> Iterator[None]:
        """Execute for values only: nothing is handed to the observers meanwhile."""
        observers_by_type = self.observers_by_type
        self.observers_by_type = {}
        try:
            yield
        finally:
            self.observers_by_type = observers_by_type

    # --- facts the calls need ----------------------------------------------------------

    def method_resolution_order(self, info: ClassInfo) -> list[ClassInfo]:
        return self.calls.method_resolution_order(info)

    def find_method(self, info: ClassInfo, method: str) -> cst.FunctionDef | None:
        return self.calls.find_method(info, method)


def run_interpreter(facts: ModuleFacts, observers: Sequence[NodeObserver]) -> None:
    Interpreter(facts, observers).run()
