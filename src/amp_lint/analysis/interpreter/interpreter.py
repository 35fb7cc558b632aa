"""The dtype interpreter: executes each function abstractly, statement by statement, under
the autocast regions that apply, and hands each node to the observers that asked for it.

Every function is analysed once on its own (unknown arguments, no region unless decorated),
again for each distinct (argument dtypes, region) it is called with from inside a region,
and, when the file uses fp16 autocast or a GradScaler, each nn.Module.forward is analysed as
running under that autocast. Results are memoised, recursion is cut at MAX_CALL_DEPTH.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Protocol

import libcst as cst

from amp_lint.analysis.autograd.graph import grad_mode, records_in
from amp_lint.analysis.interpreter.arguments import parameter_names
from amp_lint.analysis.interpreter.binding import Binding
from amp_lint.analysis.interpreter.calling import LocalCalls
from amp_lint.analysis.interpreter.cross_file import CrossFileCalls, RememberedResult, ResultKey
from amp_lint.analysis.interpreter.dispatch import Dispatch
from amp_lint.analysis.interpreter.evaluator import Evaluator
from amp_lint.analysis.interpreter.frames import ExecutionContext, Frame
from amp_lint.analysis.interpreter.instances import InstanceAttributes
from amp_lint.analysis.interpreter.list_growth import keep_lists_grown_in_loop, list_growth
from amp_lint.analysis.interpreter.observers import NodeObserver
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
from amp_lint.analysis.syntax.outline import (
    child_nodes,
    statement_nodes,
)
from amp_lint.analysis.values.dtypes import OTHER, DType
from amp_lint.analysis.values.value import UNKNOWN_VALUE, Env, Value

__all__ = ["ExecutionContext", "Interpreter", "run_interpreter"]


class ModuleLoader(Protocol):
    """Gives the interpreter of another linted file, to learn what a call into it returns,
    and keeps what such calls returned: modules are evicted, results are small."""

    def interpreter_for(self, path: str) -> Interpreter | None: ...

    def remembered_result(self, key: ResultKey) -> RememberedResult | None: ...

    def remember_result(self, key: ResultKey, result: RememberedResult) -> None: ...


class Interpreter:
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
                regions = (root.region,)
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

    # --- statements ------------------------------------------------------------------------

    def exec_block(self, statements: Sequence[cst.BaseStatement], frame: Frame) -> None:
        for statement in statements:
            self.exec_statement(statement, frame)

    def exec_statement(self, statement: cst.CSTNode, frame: Frame) -> None:
        frame.cache = {}
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                self._exec_small(small, statement, frame)
        elif isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            if isinstance(statement, cst.FunctionDef):
                frame.env.set(statement.name.value, Value(OTHER, function=statement))
        elif isinstance(statement, cst.If):
            self._exec_if(statement, frame)
        elif isinstance(statement, (cst.For, cst.While)):
            self._exec_loop(statement, frame)
        elif isinstance(statement, cst.With):
            self._exec_with(statement, frame)
        elif isinstance(statement, cst.Try):
            self._exec_try(statement, frame)
        elif isinstance(statement, cst.Match):
            self._exec_match(statement, frame)
        elif isinstance(statement, cst.BaseCompoundStatement):
            for child in child_nodes(statement):
                if isinstance(child, cst.BaseSuite):
                    self.exec_suite(child, frame)

    def exec_suite(self, suite: cst.BaseSuite, frame: Frame) -> None:
        if isinstance(suite, cst.IndentedBlock):
            self.exec_block(suite.body, frame)
        elif isinstance(suite, cst.SimpleStatementSuite):
            for small in suite.body:
                frame.cache = {}
                self._exec_small(small, small, frame)

    def _exec_small(self, small: cst.BaseSmallStatement, line: cst.CSTNode, frame: Frame) -> None:
        for child in child_nodes(small):
            if isinstance(child, cst.BaseExpression):
                self.evaluator.evaluate(child, frame)
            elif isinstance(child, cst.AssignTarget):
                self._evaluate_target(child.target, frame)
        self._dispatch(small, line, frame)
        growth = list_growth(small, frame, self.evaluator.evaluate)
        if growth is not None:
            frame.env.set(*growth)
        elif isinstance(small, cst.Assign):
            value = self.evaluator.evaluate(small.value, frame)
            for target in small.targets:
                self.binding.bind(target.target, value, small.value, frame)
        elif isinstance(small, cst.AnnAssign) and small.value is not None:
            self.binding.bind(
                small.target, self.evaluator.evaluate(small.value, frame), small.value, frame
            )
        elif isinstance(small, cst.Return) and small.value is not None:
            frame.returns.append(self.evaluator.evaluate(small.value, frame))

    def _evaluate_target(self, target: cst.BaseExpression, frame: Frame) -> None:
        """Sub-expressions of an assignment target (`x[mask]`), not the name being bound."""
        if isinstance(target, cst.Subscript):
            self.evaluator.evaluate(target, frame)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._evaluate_target(element.value, frame)

    def _exec_if(self, statement: cst.If, frame: Frame) -> None:
        truth = self.evaluator.evaluate(statement.test, frame).truth
        self._dispatch(statement.test, statement, frame)
        if truth is True:
            self.exec_suite(statement.body, frame)  # `if x is None:` with x bound to None
            return
        if truth is False:
            if isinstance(statement.orelse, cst.If):
                self.exec_statement(statement.orelse, frame)
            elif isinstance(statement.orelse, cst.Else):
                self.exec_suite(statement.orelse.body, frame)
            return
        before = frame.env
        frame.env = before.copy()
        self.exec_suite(statement.body, frame)
        after_body = frame.env
        frame.env = before.copy()
        if isinstance(statement.orelse, cst.If):
            self.exec_statement(statement.orelse, frame)
        elif isinstance(statement.orelse, cst.Else):
            self.exec_suite(statement.orelse.body, frame)
        frame.env = after_body.merge(frame.env, self.module_env)

    def _exec_loop(self, statement: cst.For | cst.While, frame: Frame) -> None:
        header: cst.BaseExpression = (
            statement.iter if isinstance(statement, cst.For) else statement.test
        )
        self.evaluator.evaluate(header, frame)
        self._dispatch(header, statement, frame)
        before = frame.env
        frame.env = before.copy()
        if isinstance(statement, cst.For):
            iterated = self.evaluator.evaluate(statement.iter, frame).iterated()
            self.binding.bind(statement.target, iterated or UNKNOWN_VALUE, None, frame)
        self.exec_suite(statement.body, frame)
        if statement.orelse is not None:
            self.exec_suite(statement.orelse.body, frame)
        after_body = frame.env
        frame.env = before.merge(after_body, self.module_env)
        keep_lists_grown_in_loop(before, after_body, frame.env)

    def _exec_with(self, statement: cst.With, frame: Frame) -> None:
        entered: list[AutocastRegion] = []
        saved_grad = frame.grad_enabled
        for item in statement.items:
            value = self._context_value(item.item, frame)
            self._dispatch(item.item, statement, frame)
            if value.region is not None:
                entered.append(value.region)
            if item.asname is not None:
                self.binding.bind(item.asname.name, value, None, frame)
            mode = grad_mode(item.item, self.facts.names)
            frame.grad_enabled = frame.grad_enabled if mode is None else mode
        saved = frame.regions
        frame.regions = saved + tuple(entered)
        self.exec_suite(statement.body, frame)
        frame.regions = saved
        frame.grad_enabled = saved_grad

    def _context_value(self, node: cst.BaseExpression, frame: Frame) -> Value:
        """The value of a `with` item. A call to a module function is followed even outside
        any region, since it may return an autocast context (`with amp_context():`)."""
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name):
            function = self.index.functions.get(node.func.value)
            if function is not None and frame.env.get(node.func.value) is None:
                args = self.evaluator.arguments(node, frame)
                value = self.calls.call_function(function, args, node, frame, force=True)
                frame.cache[id(node)] = value
        return self.evaluator.evaluate(node, frame)

    def _exec_match(self, statement: cst.Match, frame: Frame) -> None:
        """Each case from the same state, as the branches of an `if`; their ends meet."""
        self.evaluator.evaluate(statement.subject, frame)
        before = frame.env
        merged: Env | None = None
        for case in statement.cases:
            frame.env = before.copy()
            self.exec_suite(case.body, frame)
            merged = frame.env if merged is None else merged.merge(frame.env, self.module_env)
        frame.env = before.merge(merged, self.module_env) if merged is not None else before

    def _exec_try(self, statement: cst.Try, frame: Frame) -> None:
        """The body and `else` on one path, each handler on another: a handler starts where
        the body may have stopped, anywhere (`enabled = False` in an `except` leaves `enabled`
        unknown after the statement, not False)."""
        before = frame.env
        frame.env = before.copy()
        self.exec_suite(statement.body, frame)
        after_body = frame.env
        if statement.orelse is not None:
            self.exec_suite(statement.orelse.body, frame)
        paths = frame.env
        handler_start = before.merge(after_body, self.module_env)
        for handler in statement.handlers:
            frame.env = handler_start.copy()
            self.exec_suite(handler.body, frame)
            paths = paths.merge(frame.env, self.module_env)
        frame.env = paths
        if statement.finalbody is not None:
            self.exec_suite(statement.finalbody.body, frame)

    def bind_target(self, target: cst.BaseExpression, value: Value, frame: Frame) -> None:
        """Bind an assignment, `for` or comprehension target to a value."""
        self.binding.bind(target, value, None, frame)

    # --- observers -------------------------------------------------------------------------

    def _dispatch(self, root: cst.CSTNode, statement: cst.CSTNode, frame: Frame) -> None:
        if not self.observers_by_type:
            return
        context = ExecutionContext(
            self.facts,
            frame,
            statement,
            self.evaluator.evaluate,
            self.cross_file.foreign_class,
            self.dispatch.opaque_sites,
        )
        for node in statement_nodes(root):
            for observer in self.observers_by_type.get(type(node), ()):
                observer.observe(node, context)

    # --- facts the calls need ----------------------------------------------------------

    def method_resolution_order(self, info: ClassInfo) -> list[ClassInfo]:
        return self.calls.method_resolution_order(info)

    def find_method(self, info: ClassInfo, method: str) -> cst.FunctionDef | None:
        return self.calls.find_method(info, method)


def run_interpreter(facts: ModuleFacts, observers: Sequence[NodeObserver]) -> None:
    Interpreter(facts, observers).run()
