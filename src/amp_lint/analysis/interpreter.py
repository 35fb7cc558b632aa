"""The dtype interpreter: executes each function abstractly, statement by statement, under
the autocast regions that apply, and hands each node to the rules that asked for it.

Every function is analysed once on its own (unknown arguments, no region unless decorated),
again for each distinct (argument dtypes, region) it is called with from inside a region,
and, when the file uses fp16 autocast or a GradScaler, each nn.Module.forward is analysed as
running under that autocast. Results are memoised, recursion is cut at MAX_CALL_DEPTH.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import libcst as cst

from amp_lint.analysis.calls import LOCAL_PREFIX, CallSite, ClassInfo, build_index
from amp_lint.analysis.cross_file import CrossFileCalls, split_project_instance
from amp_lint.analysis.dtypes import FLOAT32, OTHER, DType
from amp_lint.analysis.entry_points import assumed_entry_points, decorator_regions
from amp_lint.analysis.evaluator import Evaluator
from amp_lint.analysis.frames import MAX_CALL_DEPTH, ExecutionContext, Frame

__all__ = ["ExecutionContext", "Interpreter", "run_interpreter"]
from amp_lint.analysis.module import ModuleFacts
from amp_lint.analysis.names import dotted_name
from amp_lint.analysis.outline import child_nodes, statement_nodes
from amp_lint.analysis.project import (
    PROJECT_PREFIX,
    ClassAssumption,
    EntryContext,
    ProjectIndex,
)
from amp_lint.analysis.regions import (
    AutocastRegion,
    accelerate_settings,
)
from amp_lint.analysis.semantics import (
    NN_MODULE_OPS,
    PARAMETRIZED_MODULES,
    op_result,
    returns_same_module,
)
from amp_lint.analysis.values import UNKNOWN_VALUE, Env, Value, join_values
from amp_lint.rules.base import Report, Rule

MemoKey = tuple[int, tuple[DType, ...], tuple[tuple[str | None, str | None, bool | None], ...]]


class ModuleLoader(Protocol):
    """Gives the interpreter of another linted file, to learn what a call into it returns."""

    def interpreter_for(self, path: str) -> Interpreter | None: ...


class Interpreter:
    def __init__(
        self,
        facts: ModuleFacts,
        rules: list[Rule],
        project: ProjectIndex | None = None,
        loader: ModuleLoader | None = None,
    ) -> None:
        self.facts = facts
        self.project = project
        self.loader = loader
        # Calls into other linted files worth following, by EntryContext.key.
        self.outgoing: dict[tuple[object, ...], EntryContext] = {}
        # Other linted files whose code decided a value here (what their functions return).
        self.dependencies: set[str] = set()
        self.cross_file = CrossFileCalls(self)
        self.index = build_index(facts.module, facts.names)
        self.accelerate = accelerate_settings(facts.module, facts.names)
        self.evaluator = Evaluator(self)
        self.module_env = Env()
        self.rules_by_type: dict[type[cst.CSTNode], list[Rule]] = {}
        for rule in rules:
            for node_type in rule.node_types:
                self.rules_by_type.setdefault(node_type, []).append(rule)
        self.reports: dict[tuple[str, int], tuple[Rule, Report]] = {}
        self.memo: dict[MemoKey, Value] = {}
        self.in_progress: set[MemoKey] = set()

    # --- entry points ----------------------------------------------------------------------

    def run(
        self,
        entries: Sequence[EntryContext] = (),
        assumptions: Sequence[ClassAssumption] = (),
        *,
        own_roots: bool = True,
    ) -> list[tuple[Rule, Report]]:
        """Analyse the module from its own roots (its body, every function on its own, the
        functions assumed to run under autocast) unless `own_roots` is False, then from the
        entries other files' calls make and the methods frameworks run under autocast."""
        self.run_module_body(report=own_roots)
        if own_roots:
            for function in self.index.all_functions:
                regions = decorator_regions(function, self.facts.names, self.accelerate)
                self.run_root(function, regions, None)
            roots = assumed_entry_points(self.facts, self.index, self.accelerate)
            for function, region, why in roots:
                self.run_root(function, (region,), why)
        for assumption in assumptions:
            for function in self.cross_file.assumed_methods(assumption):
                self.run_root(function, (assumption.region,), assumption.why)
        for entry in entries:
            self.cross_file.run_entry(entry)
        return list(self.reports.values())

    def run_root(
        self, function: cst.FunctionDef, regions: tuple[AutocastRegion, ...], why: str | None
    ) -> None:
        owner = self.index.owner.get(id(function))
        frame = Frame(
            env=Env(), regions=regions, self_class=owner, function=function, assumption=why
        )
        if owner is not None:
            frame.env.set("self", Value(OTHER, instance_of=f"{LOCAL_PREFIX}.{owner.name}"))
        self.exec_suite(function.body, frame)

    def run_module_body(self, *, report: bool = True) -> None:
        """Execute the module's top level, binding its names (`proj = nn.Linear(8, 8)`);
        without `report`, for its values only (its findings came from an earlier round)."""
        rules_by_type = self.rules_by_type
        if not report:
            self.rules_by_type = {}
        self.exec_block(self.facts.module.body, Frame(env=self.module_env, regions=()))
        self.rules_by_type = rules_by_type

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
        if isinstance(small, cst.Assign):
            value = self.evaluator.evaluate(small.value, frame)
            for target in small.targets:
                self._bind(target.target, value, small.value, frame)
        elif isinstance(small, cst.AnnAssign) and small.value is not None:
            self._bind(
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
        self.evaluator.evaluate(statement.test, frame)
        self._dispatch(statement.test, statement, frame)
        before = frame.env
        frame.env = before.copy()
        self.exec_suite(statement.body, frame)
        after_body = frame.env
        frame.env = before.copy()
        if isinstance(statement.orelse, cst.If):
            self.exec_statement(statement.orelse, frame)
        elif isinstance(statement.orelse, cst.Else):
            self.exec_suite(statement.orelse.body, frame)
        frame.env = after_body.merge(frame.env)

    def _exec_loop(self, statement: cst.For | cst.While, frame: Frame) -> None:
        header: cst.BaseExpression = (
            statement.iter if isinstance(statement, cst.For) else statement.test
        )
        self.evaluator.evaluate(header, frame)
        self._dispatch(header, statement, frame)
        before = frame.env
        frame.env = before.copy()
        if isinstance(statement, cst.For):
            self._bind(statement.target, UNKNOWN_VALUE, None, frame)
        self.exec_suite(statement.body, frame)
        if statement.orelse is not None:
            self.exec_suite(statement.orelse.body, frame)
        frame.env = before.merge(frame.env)

    def _exec_with(self, statement: cst.With, frame: Frame) -> None:
        entered: list[AutocastRegion] = []
        for item in statement.items:
            value = self._context_value(item.item, frame)
            self._dispatch(item.item, statement, frame)
            if value.region is not None:
                entered.append(value.region)
            if item.asname is not None:
                self._bind(item.asname.name, value, None, frame)
        saved = frame.regions
        frame.regions = saved + tuple(entered)
        self.exec_suite(statement.body, frame)
        frame.regions = saved

    def _context_value(self, node: cst.BaseExpression, frame: Frame) -> Value:
        """The value of a `with` item. A call to a module function is followed even outside
        any region, since it may return an autocast context (`with amp_context():`)."""
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name):
            function = self.index.functions.get(node.func.value)
            if function is not None and frame.env.get(node.func.value) is None:
                value = self.call_function(function, node, frame, force=True)
                frame.cache[id(node)] = value
        return self.evaluator.evaluate(node, frame)

    def _exec_try(self, statement: cst.Try, frame: Frame) -> None:
        self.exec_suite(statement.body, frame)
        for handler in statement.handlers:
            self.exec_suite(handler.body, frame)
        if statement.orelse is not None:
            self.exec_suite(statement.orelse.body, frame)
        if statement.finalbody is not None:
            self.exec_suite(statement.finalbody.body, frame)

    def _bind(
        self,
        target: cst.BaseExpression,
        value: Value,
        value_node: cst.BaseExpression | None,
        frame: Frame,
    ) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            parts = _unpacked(value_node, len(target.elements), self, frame)
            for element, part in zip(target.elements, parts):
                self._bind(element.value, part, None, frame)
            return
        name = dotted_name(target)
        if name is not None:
            frame.env.set(name, value)

    # --- rules -----------------------------------------------------------------------------

    def _dispatch(self, root: cst.CSTNode, statement: cst.CSTNode, frame: Frame) -> None:
        if not self.rules_by_type:
            return
        context = ExecutionContext(self.facts, frame, statement, self.evaluator.evaluate)
        for node in statement_nodes(root):
            for rule in self.rules_by_type.get(type(node), ()):
                for report in rule.check_node(node, context):
                    key = (rule.code, id(report.node))
                    if key not in self.reports:
                        message = report.message + context.provenance()
                        self.reports[key] = (rule, Report(report.node, message, report.fix))

    # --- calls -----------------------------------------------------------------------------

    def call_function(
        self,
        function: cst.FunctionDef,
        call: cst.Call,
        caller: Frame,
        bound_self: Value | None = None,
        *,
        force: bool = False,
    ) -> Value:
        arguments = [self.evaluator.evaluate(arg.value, caller) for arg in call.args]
        worth_following = (
            force or caller.active_region is not None or any(a.dtype.is_half for a in arguments)
        )
        if not worth_following or caller.depth >= MAX_CALL_DEPTH:
            return UNKNOWN_VALUE
        regions = caller.regions + decorator_regions(function, self.facts.names, self.accelerate)
        key: MemoKey = (
            id(function),
            tuple(a.dtype for a in arguments),
            tuple(r.key for r in regions),
        )
        owner = self.index.owner.get(id(function))

        def frame() -> Frame:
            callee = Frame(
                env=Env(),
                regions=regions,
                chain=(*caller.chain, CallSite(self.facts.path, call, self.facts.line_of)),
                function=function,
                self_class=owner,
                assumption=caller.assumption,
                depth=caller.depth + 1,
            )
            if bound_self is not None:
                callee.env.set("self", bound_self)
            self._bind_arguments(function, call, arguments, callee, skip_self=owner is not None)
            return callee

        return self.run_memoised(key, function, frame)

    def run_memoised(
        self, key: MemoKey, function: cst.FunctionDef, make_frame: Callable[[], Frame]
    ) -> Value:
        """The function's joined return value in the frame's context; each context once,
        recursion cut (a call already in progress returns unknown)."""
        if key in self.memo:
            return self.memo[key]
        if key in self.in_progress:
            return UNKNOWN_VALUE
        self.in_progress.add(key)
        frame = make_frame()
        self.exec_suite(function.body, frame)
        result = _join_all(frame.returns)
        self.in_progress.discard(key)
        self.memo[key] = result
        return result

    def call_instance(self, callee: Value, call: cst.Call, frame: Frame) -> Value:
        """`module(x)`: runs the class's forward, or the op of a known torch.nn module."""
        instance = callee.instance_of
        if instance is None:
            return UNKNOWN_VALUE
        if instance.startswith(PROJECT_PREFIX):
            path, class_name = split_project_instance(instance)
            return self.cross_file.call_external(path, f"{class_name}.__call__", call, frame)
        local = self.index.class_for_qualified(instance)
        if local is not None:
            forward = self.find_method(local, "forward")
            if forward is None:
                return UNKNOWN_VALUE
            return self.call_function(forward, call, frame, bound_self=callee)
        module_class = instance.rsplit(".", 1)[-1]
        if not instance.startswith("torch.nn.") or module_class not in NN_MODULE_OPS:
            return UNKNOWN_VALUE
        inputs = [self.evaluator.evaluate(arg.value, frame).dtype for arg in call.args[:1]]
        region = frame.active_region
        if region is None and module_class in PARAMETRIZED_MODULES:
            # float32 weights outside autocast: only float32 input gives a defined result.
            return Value(FLOAT32) if inputs == [FLOAT32] else UNKNOWN_VALUE
        return Value(op_result(NN_MODULE_OPS[module_class], inputs, region))

    def call_method(self, receiver: Value, method: str, call: cst.Call, frame: Frame) -> Value:
        local = self.index.class_for_qualified(receiver.instance_of)
        overridden = local is not None and self.find_method(local, method) is not None
        if not overridden and returns_same_module(method, call):
            return receiver  # `model = Net().to(device)` is still a Net
        instance = receiver.instance_of or ""
        if local is None and instance.startswith(PROJECT_PREFIX):
            path, class_name = split_project_instance(instance)
            return self.cross_file.call_external(path, f"{class_name}.{method}", call, frame)
        if local is None:
            return (
                self.call_instance(receiver, call, frame) if method == "forward" else UNKNOWN_VALUE
            )
        function = self.find_method(local, method)
        if function is None:
            return UNKNOWN_VALUE
        return self.call_function(function, call, frame, bound_self=receiver)

    def find_method(self, info: ClassInfo, method: str) -> cst.FunctionDef | None:
        seen: set[str] = set()
        current: ClassInfo | None = info
        while current is not None and current.name not in seen:
            seen.add(current.name)
            if method in current.methods:
                return current.methods[method]
            bases = [self.index.classes.get(b) for b in current.base_names]
            current = next((b for b in bases if b is not None), None)
        return None

    def _bind_arguments(
        self,
        function: cst.FunctionDef,
        call: cst.Call,
        arguments: list[Value],
        frame: Frame,
        *,
        skip_self: bool,
    ) -> None:
        if any(arg.star for arg in call.args):
            return  # *args / **kwargs: which parameter gets what is not known
        positional = [value for arg, value in zip(call.args, arguments) if arg.keyword is None]
        by_keyword = {
            arg.keyword.value: value
            for arg, value in zip(call.args, arguments)
            if arg.keyword is not None
        }
        self.bind_values(function, positional, by_keyword, frame, skip_self=skip_self)

    def bind_values(
        self,
        function: cst.FunctionDef,
        positional: list[Value],
        keywords: dict[str, Value],
        frame: Frame,
        *,
        skip_self: bool,
    ) -> None:
        params = list(function.params.posonly_params) + list(function.params.params)
        if skip_self and params and not _is_static(function):
            params = params[1:]
        for param, value in zip(params, positional):
            frame.env.set(param.name.value, value)
        for param in params + list(function.params.kwonly_params):
            if param.name.value in keywords:
                frame.env.set(param.name.value, keywords[param.name.value])


def _is_static(function: cst.FunctionDef) -> bool:
    return any(
        isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod"
        for d in function.decorators
    )


def _join_all(values: list[Value]) -> Value:
    if not values:
        return Value(OTHER)
    result = values[0]
    for value in values[1:]:
        result = join_values(result, value)
    return result


def _unpacked(
    node: cst.BaseExpression | None, count: int, interpreter: Interpreter, frame: Frame
) -> list[Value]:
    """Values for `a, b = ...`: element-wise for tuple literals, the receiver's dtype for
    `x.chunk(n)` and friends, unknown otherwise."""
    if isinstance(node, (cst.Tuple, cst.List)) and len(node.elements) == count:
        return [interpreter.evaluator.evaluate(e.value, frame) for e in node.elements]
    if (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value in ("chunk", "split", "unbind", "tensor_split")
    ):
        receiver = interpreter.evaluator.evaluate(node.func.value, frame).dtype
        if receiver.is_known_tensor:
            return [Value(receiver)] * count
    return [UNKNOWN_VALUE] * count


def run_interpreter(facts: ModuleFacts, rules: list[Rule]) -> list[tuple[Rule, Report]]:
    return Interpreter(facts, rules).run()
