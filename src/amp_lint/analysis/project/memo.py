"""What consecutive runs over one project can reuse while its files are unchanged.

`amp-lint check` lints a project once per process and needs none of this. The language
server lints the same project again after every edit, where most of a run's time went to
facts read from every file's bytes: which files mention AMP vocabulary, the import graph
(0.4 s on diffusers' 1,105 files), the module index. A ProjectMemo keeps each such fact per
file for as long as the run is given the very same bytes object for that file: the server
keeps a file's bytes until its text changes, so identity is both exact and free to test.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import replace
from typing import TypeVar, cast

from amp_lint.analysis.project.index import ProjectIndex

T = TypeVar("T")


class ProjectMemo:
    def __init__(self) -> None:
        self._paths: tuple[str, ...] | None = None
        self._index = ProjectIndex()
        # Bumped when the set of files changes: facts that depend on the index (where an
        # import leads) carry it in their key.
        self.generation = 0
        self._facts: dict[str, tuple[bytes, dict[Hashable, object]]] = {}

    def project(self, paths: Iterable[str], unsaved: dict[str, bytes]) -> ProjectIndex:
        """The module index of these files, seeing `unsaved` instead of the disk. A new object
        each run, so that per-run caches keyed by the project (the parsed modules of
        engine.ProjectLoader) start afresh, sharing the unchanged index's tables."""
        ordered = tuple(paths)
        if ordered != self._paths:
            self._paths = ordered
            self._index = ProjectIndex.from_paths(ordered)
            self.generation += 1
            kept = set(ordered)
            self._facts = {path: facts for path, facts in self._facts.items() if path in kept}
        return replace(self._index, unsaved=unsaved)

    def remembered(self, path: str, source: bytes, key: Hashable) -> object | None:
        """What `remember` stored for `path` while it is given this same `source` object."""
        entry = self._facts.get(path)
        return entry[1].get(key) if entry is not None and entry[0] is source else None

    def remember(self, path: str, source: bytes, key: Hashable, value: object) -> None:
        self.fact(path, source, key, lambda: value)

    def fact(self, path: str, source: bytes, key: Hashable, compute: Callable[[], T]) -> T:
        """`compute()`, remembered for `path` while it is given this same `source` object."""
        entry = self._facts.get(path)
        if entry is None or entry[0] is not source:
            entry = (source, {})
            self._facts[path] = entry
        facts = entry[1]
        if key not in facts:
            facts[key] = compute()
        return cast(T, facts[key])
