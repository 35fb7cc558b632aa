"""The interpreter's calls across files: entering a file from another one's call
(EntryContext), following a call into another linted file, evaluating what it returns there,
re-exports through a package's `__init__.py`, and the framework methods (ClassAssumption)
run under autocast. One CrossFileCalls per Interpreter; it executes through that
interpreter, which keeps the state (memo, outgoing entries, dependencies)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import libcst as cst

from amp_lint.analysis.autograd.graph import arguments_without_fp16_graphs, records_in
from amp_lint.analysis.interpreter.arguments import Arguments
from amp_lint.analysis.interpreter.calling import MemoKey
from amp_lint.analysis.interpreter.frames import MAX_CALL_DEPTH, ForeignClass, Frame, call_site
from amp_lint.analysis.project.entry_points import decorator_regions
from amp_lint.analysis.project.file_text import module_constant, region_openers
from amp_lint.analysis.project.index import (
    PROJECT_PREFIX,
    ClassAssumption,
    EntryContext,
    ProjectTarget,
)
from amp_lint.analysis.regions.region import AutocastRegion
from amp_lint.analysis.syntax.calls import LOCAL_PREFIX, ClassInfo
from amp_lint.analysis.syntax.naming import is_activation_name
from amp_lint.analysis.syntax.outline import dotted_name
from amp_lint.analysis.values.dtypes import OTHER, SCALAR
from amp_lint.analysis.values.value import UNKNOWN_VALUE, Env, Value

if TYPE_CHECKING:
    from amp_lint.analysis.interpreter.interpreter import Interpreter


# What a call into another file returns depends on: that file, the function, the regions
# it runs under, its arguments' dtypes and constants (`Arguments.key`).
ResultKey = tuple[str, str, tuple[object, ...], tuple[object, ...]]


@dataclass(frozen=True)
class RememberedResult:
    """A function's return value in another file, as this file sees it, and the files it
    was computed from."""

    value: Value | None
    dependencies: frozenset[str]


def entry_arguments(entry: EntryContext) -> tuple[object, ...]:
    return Arguments(entry.positional, entry.keywords).key()


class CrossFileCalls:
    def __init__(self, interpreter: Interpreter) -> None:
        self.interpreter = interpreter

    def run_entry(self, entry: EntryContext) -> None:
        """Analyse the function another file called, with that call's context."""
        function, owner = self._entry_function(entry.target)
        if function is None:
            self._forward_entry(entry)
            return
        regions = entry.regions + decorator_regions(
            function, self.interpreter.facts.names, self.interpreter.accelerate
        )
        frame = self._entry_frame(entry, function, owner, regions)
        self.interpreter.exec_suite(function.body, frame)

    def _entry_frame(
        self,
        entry: EntryContext,
        function: cst.FunctionDef,
        owner: ClassInfo | None,
        regions: tuple[AutocastRegion, ...],
    ) -> Frame:
        frame = Frame(
            env=Env(),
            regions=regions,
            chain=entry.chain,
            function=function,
            self_class=owner,
            assumption=entry.assumption,
            half_params=entry.half_params,
            dispatched=entry.dispatched,
            grad_enabled=records_in(function, self.interpreter.facts.names),
            depth=entry.depth,
        )
        if owner is not None:
            frame.env.set("self", Value(OTHER, instance_of=f"{LOCAL_PREFIX}.{owner.name}"))
        self.interpreter.calls.bind_values(
            function,
            list(entry.positional),
            dict(entry.keywords),
            frame,
            skip_self=owner is not None,
        )
        return frame

    def _entry_function(self, target: str) -> tuple[cst.FunctionDef | None, ClassInfo | None]:
        class_name, _, method = target.partition(".")
        if not method:
            return self.interpreter.index.functions.get(target), None
        info = self.interpreter.index.classes.get(class_name)
        if info is None:
            return None, None
        found = self.interpreter.find_method(info, method)
        if found is None and method == "__call__":
            found = self.interpreter.find_method(info, "forward")
        return found, (self.interpreter.index.owner.get(id(found)) if found is not None else None)

    def _forward_entry(self, entry: EntryContext) -> None:
        forwarded = self._reexported(entry)
        if forwarded is not None:
            self.interpreter.outgoing.setdefault(forwarded.key, forwarded)

    def _reexported(self, entry: EntryContext) -> EntryContext | None:
        """The entry, sent on to where its target is defined: it is imported here from
        another linted file (`from .attn import Attention` in a package's `__init__.py`), or
        inherited from a class defined there."""
        if self.interpreter.project is None:
            return None
        head, _, rest = entry.target.partition(".")
        qualified = self.interpreter.facts.names.bindings.get(head)
        info = self.interpreter.index.classes.get(head)
        if qualified is None and info is not None:
            # A method inherited from a base class defined in another linted file.
            qualified = next(
                (b for b in info.base_names if self._project_target(b) is not None), None
            )
        if qualified is None:
            return None
        target = self._project_target(qualified)
        if target is None or target.path == self.interpreter.facts.path:
            return None
        name = f"{target.attribute}.{rest}" if rest else target.attribute
        return EntryContext(
            target.path,
            name,
            entry.regions,
            entry.positional,
            entry.keywords,
            entry.chain,
            entry.assumption,
            entry.depth,
            entry.half_params,
            entry.dispatched,
        )

    def assumed_methods(self, assumption: ClassAssumption) -> list[cst.FunctionDef]:
        found = []
        for info in self.interpreter.index.classes.values():
            if assumption.class_names:
                if not self._matches_class(info, assumption.class_names):
                    continue
            elif not info.base_names or info.is_autograd_function:
                continue
            if assumption.models_only and not is_activation_name(info.name):
                continue  # `DiceLoss`, `MeanAveragePrecision`: not what `model(x)` runs
            for method in assumption.methods:
                function = self.interpreter.find_method(info, method)
                if function is not None and self.interpreter.index.owner.get(id(function)) is info:
                    found.append(function)
        return found

    def _matches_class(self, info: ClassInfo, names: tuple[str, ...]) -> bool:
        """The class, or one of its bases (in this file or another linted one), is named
        one of `names` (`class Model(BaseModel)` where `BaseModel(LightningModule)`)."""
        seen: set[int] = set()
        pending: list[tuple[ClassInfo, CrossFileCalls]] = [(info, self)]
        while pending:
            current, resolver = pending.pop()
            if id(current) in seen or len(seen) > MAX_CALL_DEPTH * 4:
                continue
            seen.add(id(current))
            if current.name in names:
                return True
            for base in current.base_names:
                if base.rsplit(".", 1)[-1] in names:
                    return True
                local = resolver.interpreter.index.classes.get(base)
                if local is not None:
                    pending.append((local, resolver))
                    continue
                foreign = resolver.foreign_class(base)
                callee = resolver._loaded(foreign.path) if foreign is not None else None
                if foreign is not None and callee is not None:
                    pending.append((foreign.info, callee.cross_file))
        return False

    def _project_target(self, qualified: str) -> ProjectTarget | None:
        if self.interpreter.project is None:
            return None
        return self.interpreter.project.resolve(qualified, self.interpreter.facts.path)

    def project_call(
        self, qualified: str, args: Arguments, call: cst.Call, frame: Frame
    ) -> Value | None:
        """A call of something imported from another linted file, or None when `qualified`
        is not one: a class gives an instance, a function is followed there."""
        target = self._project_target(qualified)
        if target is None:
            return None
        if target.looks_like_class:
            return Value(OTHER, instance_of=project_instance(target))
        return self.call_external(target.path, target.attribute, args, call, frame)

    def foreign_class(self, qualified: str) -> ForeignClass | None:
        """The class `qualified` names in another linted file, following re-exports and
        module-level names bound to a class's `apply` (`scaled_matmul = ScaledMatmul.apply`:
        the class, marked `applied`)."""
        target = self._project_target(qualified)
        applied = False
        for _ in range(MAX_CALL_DEPTH):
            if target is None or target.path == self.interpreter.facts.path:
                return None
            if not self._may_define(target.path, target.attribute):
                return None
            callee = self._loaded(target.path)
            if callee is None:
                return None
            names = callee.facts.names
            attribute = target.attribute
            alias = applied_class(callee.index.module_assignments.get(attribute))
            if alias is not None:
                applied, attribute = True, dotted_name(alias) or ""
            info = callee.index.classes.get(attribute)
            if info is not None:
                return ForeignClass(target.path, info, names, callee.index, applied, callee.facts)
            reexported = names.qualified_name(alias) if alias is not None else None
            reexported = reexported or names.bindings.get(attribute)
            if reexported is None:
                return None
            target = callee.cross_file._project_target(reexported)
        return None

    def _may_define(self, path: str, attribute: str) -> bool:
        """Whether `path`'s text can bind `attribute` to a class: a `class` statement, an
        assignment or an import naming it. Checked on the bytes first: loading the file
        costs a parse, and most imported names (functions) are no class."""
        project = self.interpreter.project
        if project is None or not attribute.isidentifier():
            return False
        try:
            source = project.source(path)
        except OSError:
            return False
        name = re.escape(attribute.encode())
        patterns = (
            rb"(?m)^\s*class\s+" + name + rb"\b",  # class Name
            rb"\b" + name + rb"\s*=[^=]",  # Name = Cls.apply
            rb"(?m)^\s*(?:from|import)\b.*\b" + name + rb"\b",  # from .ops import Name
            rb"\bimport\s*\([^)]*\b" + name + rb"\b",  # from .ops import (\n Name,\n)
        )
        return any(re.search(pattern, source) for pattern in patterns)

    def imported_value(self, qualified: str) -> Value | None:
        """The number a module-level constant of another linted file holds (`NEAR_INF =
        1e20` imported from `utils.torch`). Read with a pattern from that file's text, not
        parsed: a parse for one constant costs as much as analysing a file."""
        target = self._project_target(qualified)
        if target is None or target.path == self.interpreter.facts.path:
            return None
        project = self.interpreter.project
        assert project is not None  # a target was resolved in it
        constant = module_constant(project, target.path, target.attribute)
        if constant is None:
            return None
        self.interpreter.dependencies.add(target.path)
        return Value(SCALAR, constant=constant)

    def _loaded(self, path: str) -> Interpreter | None:
        loader = self.interpreter.loader
        callee = loader.interpreter_for(path) if loader is not None else None
        if callee is not None:
            # The cache must drop this file's results when that file changes.
            self.interpreter.dependencies.add(path)
        return callee

    def project_class(self, qualified: str) -> str | None:
        """`instance_of` for an instance of a class imported from another linted file."""
        target = self._project_target(qualified)
        if target is None or not target.looks_like_class:
            return None
        return project_instance(target)

    def call_external(
        self, path: str, target: str, args: Arguments, call: cst.Call, caller: Frame
    ) -> Value | None:
        """Record the call for the other file's analysis, and learn what it returns; None
        when that file has nothing to run for it (a module whose `forward` comes from a
        class outside the linted files), which is then a call amp-lint cannot see into."""
        if path == self.interpreter.facts.path:
            return UNKNOWN_VALUE
        in_half = caller.in_half or any(v.carries_half() for v in args.values)
        if caller.depth >= MAX_CALL_DEPTH or not (in_half or self._opens_region(path, target)):
            return UNKNOWN_VALUE
        positional: tuple[Value, ...] = ()
        keywords: tuple[tuple[str, Value], ...] = ()
        if not args.starred:
            received = arguments_without_fp16_graphs(args)
            positional = tuple(self._portable(v) for v in received.positional)
            keywords = tuple((name, self._portable(v)) for name, v in received.keywords)
        # Outside any region only the result is wanted, and no finding needs the chain.
        here = call_site(self.interpreter.facts, call, caller) if in_half else None
        steps = (*caller.chain, here) if here is not None else ()
        entry = EntryContext(
            path,
            target,
            tuple(r.portable() for r in caller.regions),
            positional,
            keywords,
            tuple(str(step) for step in steps),
            caller.assumption,
            caller.depth + 1,
            caller.half_params,
            caller.dispatched,
        )
        if in_half:
            # Outside any region the other file's own analysis already covers the function;
            # only what it returns is wanted here.
            self.interpreter.outgoing.setdefault(entry.key, entry)
        return self._external_result(entry)

    def _opens_region(self, path: str, target: str) -> bool:
        """The other file's function enters autocast itself, so what it returns is worth
        knowing outside any region (a loss computed under autocast in a helper). Read with
        the standard library's parser, not libcst: most calls go to functions that do not."""
        project = self.interpreter.project
        return project is not None and target in region_openers(project, path)

    def _portable(self, value: Value) -> Value:
        """The value for another file's analysis: a constant's origin in this file travels
        as a position."""
        origin = value.origin
        if origin is not None and origin.node is not None:
            where = self.interpreter.facts.positions[origin.node]
            resolved = replace(
                origin,
                written=origin.text,
                called=origin.callee,
                line=where.start.line,
                column=where.start.column,
                end_line=where.end.line,
                end_column=where.end.column,
                node=None,
                call=None,
                site=0,
            )
            value = replace(value, origin=resolved)
        return value.portable()

    def _external_result(self, entry: EntryContext) -> Value | None:
        """What the other file's function returns in this context (dtypes, constants and
        containers; objects of its classes mean nothing here). The other file's findings come
        from its own analysis of the entry, in a later round."""
        result = self._result_in(entry.path, entry)
        return result.portable() if result is not None else None

    def _result_in(self, path: str, entry: EntryContext) -> Value | None:
        loader = self.interpreter.loader
        if loader is None:
            return UNKNOWN_VALUE
        # Keyed as the callee's own memo keys it (the function, the arguments' dtypes and
        # constants, the regions), but kept by the loader: a large module evicted between
        # two calls with the same arguments is not parsed and run again for the second.
        key: ResultKey = (
            path,
            entry.target,
            tuple(r.key for r in entry.regions),
            entry_arguments(entry),
        )
        remembered = loader.remembered_result(key)
        if remembered is None:
            callee = loader.interpreter_for(path)
            if callee is None:
                return UNKNOWN_VALUE
            result = callee.cross_file.result_of(entry)
            remembered = RememberedResult(
                result.portable() if result is not None else None, frozenset(callee.dependencies)
            )
            loader.remember_result(key, remembered)
        # The cache must drop this file's results when any of those files changes.
        self.interpreter.dependencies.add(path)
        self.interpreter.dependencies.update(remembered.dependencies)
        return remembered.value

    def result_of(self, entry: EntryContext) -> Value | None:
        """The joined return value of the entry's function, memoised like local calls; None
        when this file defines no such function (nor imports it from a linted file)."""
        if entry.depth > MAX_CALL_DEPTH:
            return UNKNOWN_VALUE
        function, owner = self._entry_function(entry.target)
        if function is None:
            forwarded = self._reexported(entry)
            if forwarded is None:
                return None
            return self._result_in(forwarded.path, replace(forwarded, depth=entry.depth + 1))
        regions = entry.regions + decorator_regions(
            function, self.interpreter.facts.names, self.interpreter.accelerate
        )
        args = Arguments(entry.positional, entry.keywords)
        grad_enabled = records_in(function, self.interpreter.facts.names)
        key: MemoKey = (id(function), args.key(), tuple(r.key for r in regions), grad_enabled)
        return self.interpreter.calls.run_memoised(
            key, function, lambda: self._entry_frame(entry, function, owner, regions)
        )


def applied_class(node: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """`Cls` (a name or dotted name) of `Cls.apply`; None for anything else."""
    if isinstance(node, cst.Attribute) and node.attr.value == "apply":
        return node.value if dotted_name(node.value) is not None else None
    return None


def project_instance(target: ProjectTarget) -> str:
    return f"{PROJECT_PREFIX}{target.path}:{target.attribute}"
