"""The interpreter's calls across files: entering a file from another one's call
(EntryContext), following a call into another linted file, evaluating what it returns there,
re-exports through a package's `__init__.py`, and the framework methods (ClassAssumption)
run under autocast. One CrossFileCalls per Interpreter; it executes through that
interpreter, which keeps the state (memo, outgoing entries, dependencies). What an imported
name stands for in the other file is found by its base, ImportedNames (imported_names.py)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import libcst as cst

from amp_lint.analysis.autograd.graph import arguments_without_fp16_graphs, records_in
from amp_lint.analysis.interpreter.arguments import Arguments
from amp_lint.analysis.interpreter.calling import MemoKey
from amp_lint.analysis.interpreter.frames import MAX_CALL_DEPTH, Frame, call_site
from amp_lint.analysis.interpreter.imported_names import ImportedNames, project_instance
from amp_lint.analysis.project.entry_points import decorator_regions
from amp_lint.analysis.project.file_text import region_openers
from amp_lint.analysis.project.index import ClassAssumption, EntryContext
from amp_lint.analysis.regions.region import AutocastRegion
from amp_lint.analysis.syntax.calls import LOCAL_PREFIX, ClassInfo
from amp_lint.analysis.syntax.naming import is_activation_name
from amp_lint.analysis.values.dtypes import OTHER
from amp_lint.analysis.values.value import UNKNOWN_VALUE, Env, Value

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


class CrossFileCalls(ImportedNames):
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
