"""The interpreter's statement executor: each kind of statement, executed abstractly in a
frame (branches from the same state, their ends merged; loops once, merged with the state
before them; `with` entering regions), and each statement's nodes handed to the observers
that asked for them. Interpreter (interpreter.py) is built on it and holds what it reads."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import libcst as cst

from amp_lint.analysis.autograd.graph import grad_mode
from amp_lint.analysis.interpreter.frames import ExecutionContext, Frame
from amp_lint.analysis.interpreter.list_growth import keep_lists_grown_in_loop, list_growth
from amp_lint.analysis.interpreter.narrowing import ends_path, narrowed, widened
from amp_lint.analysis.regions.finder import AutocastRegion
from amp_lint.analysis.syntax.outline import child_nodes, statement_nodes
from amp_lint.analysis.values.dtypes import OTHER
from amp_lint.analysis.values.value import UNKNOWN_VALUE, Env, Value

if TYPE_CHECKING:
    from amp_lint.analysis.interpreter.binding import Binding
    from amp_lint.analysis.interpreter.calling import LocalCalls
    from amp_lint.analysis.interpreter.cross_file import CrossFileCalls
    from amp_lint.analysis.interpreter.dispatch import Dispatch
    from amp_lint.analysis.interpreter.evaluator import Evaluator
    from amp_lint.analysis.interpreter.observers import NodeObserver
    from amp_lint.analysis.syntax.calls import ModuleIndex
    from amp_lint.analysis.syntax.module import ModuleFacts


# unittest's context managers for code that must raise.
_RAISES_ASSERTIONS = frozenset(["assertRaises", "assertRaisesRegex"])


class StatementExecutor:
    """Executes statements; the Interpreter that subclasses it sets what it reads."""

    facts: ModuleFacts
    index: ModuleIndex
    module_env: Env
    evaluator: Evaluator
    binding: Binding
    calls: LocalCalls
    cross_file: CrossFileCalls
    dispatch: Dispatch
    observers_by_type: dict[type[cst.CSTNode], list[NodeObserver]]

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
        names = self.facts.names
        before = frame.env
        frame.env = before.copy()
        in_body = narrowed(frame.env, statement.test, names, holds=True)
        self.exec_suite(statement.body, frame)
        after_body = frame.env
        frame.env = before.copy()
        in_else = narrowed(frame.env, statement.test, names, holds=False)
        orelse = statement.orelse
        if isinstance(orelse, cst.If):
            self.exec_statement(orelse, frame)
        elif isinstance(orelse, cst.Else):
            self.exec_suite(orelse.body, frame)
        body_ends = ends_path(statement.body)
        else_ends = isinstance(orelse, cst.Else) and ends_path(orelse.body)
        if body_ends and not else_ends:
            return  # only the other branch goes on: `if x.dtype == torch.float16: return`
        if else_ends and not body_ends:
            frame.env = after_body
            return
        widened(after_body, in_body)
        widened(frame.env, in_else)
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
        if not self._expects_error(statement):
            self.exec_suite(statement.body, frame)
        frame.regions = saved
        frame.grad_enabled = saved_grad

    def _expects_error(self, statement: cst.With) -> bool:
        """`with pytest.raises(...)` or `with self.assertRaises(...)`: the body is meant to
        raise, so what it would raise at run time is no finding (a test asserting that a
        float32 input into a bfloat16 layer fails; repository triage)."""
        for item in statement.items:
            call = item.item
            if not isinstance(call, cst.Call):
                continue
            qualified = self.facts.names.qualified_name(call.func) or ""
            method = call.func.attr.value if isinstance(call.func, cst.Attribute) else ""
            if qualified == "pytest.raises" or method in _RAISES_ASSERTIONS:
                return True
        return False

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
            self.cross_file.launches_kernels,
        )
        for node in statement_nodes(root):
            for observer in self.observers_by_type.get(type(node), ()):
                observer.observe(node, context)
