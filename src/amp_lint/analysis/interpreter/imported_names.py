"""What a name imported from another linted file stands for, as this file sees it: where
it resolves (ProjectTarget), the class it names there (ForeignClass, through re-exports and
`Cls.apply` aliases), the constant it holds, the instance its class makes. Each file read
for this is recorded as a dependency of this file's results. CrossFileCalls (cross_file.py)
builds on these to follow calls."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import libcst as cst

from amp_lint.analysis.interpreter.frames import MAX_CALL_DEPTH, ForeignClass
from amp_lint.analysis.project.file_text import launches_kernels, module_constant
from amp_lint.analysis.project.index import PROJECT_PREFIX, ProjectTarget
from amp_lint.analysis.syntax.outline import dotted_name
from amp_lint.analysis.values.dtypes import SCALAR
from amp_lint.analysis.values.value import Value

if TYPE_CHECKING:
    from amp_lint.analysis.interpreter.interpreter import Interpreter


class ImportedNames:
    """What the names one interpreter's file imports from other linted files stand for; the
    base of CrossFileCalls, which follows the calls of them."""

    def __init__(self, interpreter: Interpreter) -> None:
        self.interpreter = interpreter

    def _project_target(self, qualified: str) -> ProjectTarget | None:
        if self.interpreter.project is None:
            return None
        return self.interpreter.project.resolve(qualified, self.interpreter.facts.path)

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

    def launches_kernels(self, qualified: str) -> bool:
        """Whether `qualified` names a function of another linted file that launches Triton
        kernels or calls custom ops (file_text.launches_kernels)."""
        target = self._project_target(qualified)
        if target is None or target.path == self.interpreter.facts.path:
            return False
        project = self.interpreter.project
        assert project is not None  # a target was resolved in it
        self.interpreter.dependencies.add(target.path)
        return launches_kernels(project, target.path)

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


def applied_class(node: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """`Cls` (a name or dotted name) of `Cls.apply`; None for anything else."""
    if isinstance(node, cst.Attribute) and node.attr.value == "apply":
        return node.value if dotted_name(node.value) is not None else None
    return None


def project_instance(target: ProjectTarget) -> str:
    return f"{PROJECT_PREFIX}{target.path}:{target.attribute}"
