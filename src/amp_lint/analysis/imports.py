"""Which linted files make up the program around a file: those it imports, transitively,
and those that import it with theirs. Read from the bytes with a pattern, not parsed: it is
needed only when a region calls a model amp-lint cannot resolve, to choose the modules that
may be that model (the trainer is imported by `main.py`, which imports the models too).

Loads no libcst, like the rest of the project-level code.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from amp_lint.analysis.project import ProjectIndex

_FROM_IMPORT = re.compile(
    rb"^[ \t]*from[ \t]+([.\w]+)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]+)", re.MULTILINE
)
_IMPORT = re.compile(rb"^[ \t]*import[ \t]+([^\n#;]+)", re.MULTILINE)
_NAME = re.compile(r"[\w.]+")
# A class decorated by a registry: `@register_model(...)`, `@MODELS.register_module()`.
_REGISTERED = re.compile(rb"^[ \t]*@[\w.]*register\w*\b[^\n]*\n[ \t]*class ", re.MULTILINE)


class ImportGraph:
    def __init__(self, sources: dict[str, bytes], project: ProjectIndex) -> None:
        self.sources = sources
        self.project = project
        self._imports: dict[str, frozenset[str]] | None = None
        self._registries: set[str] | None = None

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
                path for path, source in self.sources.items() if _REGISTERED.search(source)
            }
        return self._registries

    def _graph(self) -> dict[str, frozenset[str]]:
        if self._imports is None:
            self._imports = {
                path: frozenset(self._imported_files(path, source))
                for path, source in self.sources.items()
            }
        return self._imports

    def _imported_files(self, path: str, source: bytes) -> set[str]:
        found: set[str] = set()
        for match in _FROM_IMPORT.finditer(source):
            module = match.group(1).decode("ascii", "replace")
            names = _names(match.group(2).decode("utf-8", "replace"))
            found.update(self._files(module, names, path))
        for match in _IMPORT.finditer(source):
            for name in _names(match.group(1).decode("utf-8", "replace")):
                found.update(self._files(name, [], path))
        found.discard(path)
        return found

    def _files(self, module: str, names: Iterable[str], path: str) -> set[str]:
        """The linted files `from module import names` (or `import module`) loads."""
        found: set[str] = set()
        own = self._module_file(module, path)
        if own is not None:
            found.add(own)
        for name in names:
            separator = "" if module.endswith(".") else "."
            target = self.project.resolve(f"{module}{separator}{name}", path)
            if target is not None:
                found.add(target.path)
        return found

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


def _names(text: str) -> list[str]:
    """`a, b as c` or `(a,\n b)` -> ["a", "b"]; `x.y as z` -> ["x.y"]."""
    names = []
    for part in text.strip("()").split(","):
        words = part.split()
        if words and _NAME.fullmatch(words[0]) and words[0] != "*":
            names.append(words[0])
    return names
