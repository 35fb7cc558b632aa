"""The syntax check of the files no round analyses (those without AMP vocabulary).

Each such file is shown to CPython's parser, in the run's workers (runner.py's syntax-only
jobs; parse/syntax_check.py says why CPython first). What is known to parse is remembered: in
the project memo for the language server's next run, and in the result cache as one entry, the
digests of the sources that parsed, so that a run after an edit checks only what changed. A
file that does not parse is checked again each run, as a file with AMP code is.
"""

from __future__ import annotations

from collections.abc import Callable

from amp_lint.analysis.project.memo import ProjectMemo
from amp_lint.run.cache import ResultCache, digest
from amp_lint.run.runner import Job, Outcome
from amp_lint.sources.notebooks import is_notebook

# The cache entry holding the digests of the sources known to parse; runs over parts of a
# project add to it, up to this many (then it holds the last run's only).
PARSED_SOURCES_KEY = digest("sources CPython and libcst parse")
MAX_REMEMBERED = 200_000
_MEMO_KEY = "parses"


class SyntaxRound:
    def __init__(
        self,
        sources: dict[str, bytes],
        memo: ProjectMemo,
        cache: ResultCache | None,
        source_digest: Callable[[str], str],
    ) -> None:
        self.sources = sources
        self.memo = memo
        self.cache = cache
        self.source_digest = source_digest
        self.known: frozenset[str] = frozenset()
        self.parsed: set[str] = set()  # digests of this run's sources that parse

    def jobs(self, analysed: set[str]) -> list[Job]:
        """Syntax-only jobs for the files not in `analysed` whose syntax is not known good."""
        unanalysed = [
            path for path in self.sources if path not in analysed and not is_notebook(path)
        ]
        if unanalysed and self.cache is not None:
            cached = self.cache.get(PARSED_SOURCES_KEY)
            if isinstance(cached, frozenset):
                self.known = cached
        jobs = []
        for path in unanalysed:
            source = self.sources[path]
            if self.memo.remembered(path, source, _MEMO_KEY):
                continue
            if self.cache is not None and (source_digest := self.source_digest(path)) in self.known:
                self.parsed.add(source_digest)
                continue
            jobs.append(Job(path, source, False, False, syntax_only=True))
        return jobs

    def record(self, outcomes: list[Outcome]) -> None:
        """Remember the sources that parsed; save them if any is new."""
        for outcome in outcomes:
            if outcome.error is None:
                self.memo.remember(outcome.path, self.sources[outcome.path], _MEMO_KEY, True)
                if self.cache is not None:
                    self.parsed.add(self.source_digest(outcome.path))
        if self.cache is None or self.parsed <= self.known:
            return
        remembered = self.known | self.parsed
        if len(remembered) > MAX_REMEMBERED:
            remembered = frozenset(self.parsed)  # old versions of files go
        self.cache.put(PARSED_SOURCES_KEY, remembered)
