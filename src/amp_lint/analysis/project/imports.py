"""Which linted files make up the program around a file: those it imports, transitively,
and those that import it with theirs. Read from the bytes with a pattern, not parsed: it is
needed only when a region calls a model amp-lint cannot resolve, to choose the modules that
may be that model (the trainer is imported by `main.py`, which imports the models too).

Loads no libcst, like the rest of the project-level code.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from functools import partial

from amp_lint.analysis.project.index import ProjectIndex
from amp_lint.analysis.project.memo import ProjectMemo

# Matched at the start of a line that contains `import` (found with bytes.find, which is
# several times faster than a MULTILINE `^` pattern tried at every line of a large tree).
_FROM_IMPORT = re.compile(rb"[ \t]*from[ \t]+([.\w]+)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]+)")
_IMPORT = re.compile(rb"[ \t]*import[ \t]+([^\n#;]+)")
_NAME = re.compile(r"[\w.]+")
# A class decorated by a registry: `@register_model(...)`, `@MODELS.register_module()`.
_REGISTERED = re.compile(rb"[ \t]*@[\w.]*register\w*\b[^\n]*\n[ \t]*class ")


class ImportGraph:
    def __init__(
        self,
        sources: dict[str, bytes],
        project: ProjectIndex,
        memo: ProjectMemo | None = None,
    ) -> None:
        self.sources = sources
        self.project = project
        # Each file's imports, kept across runs by a language server while the file and the
        # set of files are unchanged.
        self.memo = memo or ProjectMemo()
        self._imports: dict[str, frozenset[str]] | None = None
        self._registries: set[str] | None = None
        # Where a name resolves depends on the importing file only through its directory,
        # and a package's files import the same names again and again.
        self._resolved: dict[tuple[str, bool, bool, str], str | None] = {}

    def imports(self, path: str) -> frozenset[str]:
        """The linted files `path` imports directly."""
        return self._graph().get(path, frozenset())

    def program(self, path: str) -> set[str]:
        """The files a model run from `path` may come from: `path`, the files importing it,
        everything these import, transitively, and the files of classes registered with a
        registry (`@register_model("transformer")`, `@MODELS.register_module()`), which
        configs build by name without an import in sight, with what they import."""
        graph = self._graph()
        roots = {path} | {other for other, imported in graph.items() if path in imported}
        roots |= self._registering()
        reached: set[str] = set()
        pending = list(roots)
        while pending:
            current = pending.pop()
            if current in reached:
                continue
            reached.add(current)
            pending.extend(graph.get(current, ()))
        return reached

    def importers(self, paths: set[str]) -> set[str]:
        """`paths` and every file importing one of them, transitively: where subclasses of
        their classes may be defined."""
        graph = self._graph()
        reached = set(paths)
        changed = True
        while changed:
            changed = False
            for path, imported in graph.items():
                if path not in reached and imported & reached:
                    reached.add(path)
                    changed = True
        return reached

    def _registering(self) -> set[str]:
        if self._registries is None:
            self._registries = {
                path
                for path, source in self.sources.items()
                if self.memo.fact(path, source, "registers", partial(_registers_a_class, source))
            }
        return self._registries

    def _graph(self) -> dict[str, frozenset[str]]:
        if self._imports is None:
            key = ("imports", self.memo.generation)
            self._imports = {
                path: self.memo.fact(path, source, key, partial(self._import_set, path, source))
                for path, source in self.sources.items()
            }
        return self._imports

    def _import_set(self, path: str, source: bytes) -> frozenset[str]:
        return frozenset(self._imported_files(path, source))

    def _imported_files(self, path: str, source: bytes) -> set[str]:
        found: set[str] = set()
        directory = os.path.dirname(os.path.abspath(path))
        for match in _import_statements(source):
            if match.re is _FROM_IMPORT:
                module = match.group(1).decode("ascii", "replace")
                names = _names(match.group(2).decode("utf-8", "replace"))
                found.update(self._files(module, names, path, directory))
            else:
                for name in _names(match.group(1).decode("utf-8", "replace")):
                    found.update(self._files(name, [], path, directory))
        found.discard(path)
        return found

    def _files(self, module: str, names: Iterable[str], path: str, directory: str) -> set[str]:
        """The linted files `from module import names` (or `import module`) loads."""
        separator = "" if module.endswith(".") else "."
        found = {self._resolve(module, None, path, directory)}
        for name in names:
            found.add(self._resolve(f"{module}{separator}{name}", name, path, directory))
        found.discard(None)
        return found  # type: ignore[return-value]

    def _resolve(self, qualified: str, name: str | None, path: str, directory: str) -> str | None:
        """Memoised by what resolution depends on: a relative name by the directory its dots
        lead to, an absolute one by the importing file's directory (which breaks ties)."""
        level = len(qualified) - len(qualified.lstrip("."))
        for _ in range(level - 1):
            directory = os.path.dirname(directory)
        key = (qualified[level:], level > 0, name is None, directory)
        if key not in self._resolved:
            if name is None:
                self._resolved[key] = self._module_file(qualified, path)
            else:
                target = self.project.resolve(qualified, path)
                self._resolved[key] = target.path if target is not None else None
        return self._resolved[key]

    def _module_file(self, module: str, path: str) -> str | None:
        if not module.startswith("."):
            target = self.project.resolve(f"{module}.__module__", path)
            return target.path if target is not None else None
        level = len(module) - len(module.lstrip("."))
        parts = [p for p in module[level:].split(".") if p]
        directory = os.path.dirname(os.path.abspath(path))
        for _ in range(level - 1):
            directory = os.path.dirname(directory)
        base = os.path.join(directory, *parts)
        for candidate in (base + ".py", os.path.join(base, "__init__.py")):
            found = self.project.by_absolute.get(os.path.normpath(candidate))
            if found is not None:
                return found
        return None

    def names_imported_by(self, path: str, source: bytes) -> dict[str, set[str]]:
        """What the linted file `path` imports from other linted files, by file: the names of
        `from a import autocast` ("autocast" for a.py), "*" for `from a import *`, and, where
        it imports a file whole (`import a`, `from pkg import a`), every name it reads after
        a dot (`a.autocast`), which over-counts but never misses one."""
        found: dict[str, set[str]] = {}
        directory = os.path.dirname(os.path.abspath(path))
        attributes: set[str] | None = None
        for match in _import_statements(source):
            whole: list[str] = []
            if match.re is _FROM_IMPORT:
                module = match.group(1).decode("ascii", "replace")
                imported = match.group(2).decode("utf-8", "replace")
                separator = "" if module.endswith(".") else "."
                if imported.strip("() \t") == "*":
                    target = self._whole_module(module, path)
                    if target is not None:
                        found.setdefault(target, set()).add("*")
                    continue
                for name in _names(imported):
                    qualified = f"{module}{separator}{name}"
                    target = self._resolve(qualified, name, path, directory)
                    if target is not None:
                        found.setdefault(target, set()).add(name)
                    whole.append(qualified)
            else:
                whole = _names(match.group(1).decode("utf-8", "replace"))
            for module_name in whole:
                target = self._whole_module(module_name, path)
                if target is None:
                    continue
                if attributes is None:
                    attributes = {m.decode("ascii") for m in _ATTRIBUTE.findall(source)}
                found.setdefault(target, set()).update(attributes)
        found.pop(path, None)
        return found

    def _whole_module(self, module: str, path: str) -> str | None:
        """The linted file that is the module `module` itself (not a name inside one)."""
        if module.startswith("."):
            return self._module_file(module, path)
        target = self.project.resolve(f"{module}.__module__", path)
        return target.path if target is not None and target.attribute == "__module__" else None


# A name read after a dot: `amp_utils.autocast`.
_ATTRIBUTE = re.compile(rb"\.[ \t]*([A-Za-z_]\w*)")
_IMPORTED: dict[int, tuple[ProjectIndex, dict[str, frozenset[str]]]] = {}


def imported_names(project: ProjectIndex) -> dict[str, frozenset[str]]:
    """For each linted file of the project, the names the other linted files import from it
    (ImportGraph.names_imported_by). Reads every linted file once per process and project,
    one at a time, keeping only the names."""
    cached = _IMPORTED.get(id(project))
    if cached is not None and cached[0] is project:
        return cached[1]
    graph = ImportGraph({}, project)
    names: dict[str, set[str]] = {}
    for path in project.by_absolute.values():
        try:
            source = project.source(path)
        except OSError:
            continue
        if b"import" not in source:
            continue
        for target, imported in graph.names_imported_by(path, source).items():
            names.setdefault(target, set()).update(imported)
    result = {path: frozenset(imported) for path, imported in names.items()}
    _IMPORTED.clear()  # a new run: the old project's names are of no use
    _IMPORTED[id(project)] = (project, result)
    return result


def _registers_a_class(source: bytes) -> bool:
    return next(_matches_at_line_starts(source, b"register", (_REGISTERED,)), None) is not None


def _import_statements(source: bytes) -> Iterator[re.Match[bytes]]:
    """`from ... import ...` and `import ...` statements, each starting a line."""
    return _matches_at_line_starts(source, b"import", (_FROM_IMPORT, _IMPORT))


def _matches_at_line_starts(
    source: bytes, word: bytes, patterns: tuple[re.Pattern[bytes], ...]
) -> Iterator[re.Match[bytes]]:
    """The first of `patterns` matching at the start of each line that holds `word`, each
    line tried once; a match running over several lines (a parenthesised import) is
    passed over whole."""
    position = source.find(word)
    while position != -1:
        line_start = source.rfind(b"\n", 0, position) + 1
        line_end = source.find(b"\n", position)
        resume = len(source) if line_end == -1 else line_end + 1
        for pattern in patterns:
            match = pattern.match(source, line_start)
            if match is not None:
                yield match
                resume = max(resume, match.end())
                break
        position = source.find(word, resume)


def _names(text: str) -> list[str]:
    """`a, b as c` or `(a,\n b)` -> ["a", "b"]; `x.y as z` -> ["x.y"]."""
    names = []
    for part in text.strip("()").split(","):
        words = part.split()
        if words and _NAME.fullmatch(words[0]) and words[0] != "*":
            names.append(words[0])
    return names
