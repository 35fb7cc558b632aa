"""The rounds of a project run (project_run.py starts them), and the fixes after them.

Round 0 analyses every file that mentions AMP vocabulary from its own roots: its autocast
regions, GradScaler loops, framework trainers, library-mode forwards. Each analysis reports,
beside its findings, the calls it made under autocast into other linted files (EntryContext)
and the framework settings it saw (ClassAssumption: "LightningModule.training_step runs
under fp16 autocast"). Each later round analyses only the files those calls and settings
reach, only from those entry points, until no new entry appears; the depth bound on call
chains and the de-duplication of entries by context make this finite. A file never named by
any of this is never parsed.

Results are cached per (file, context), so a re-run on unchanged files parses nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import partial

from amp_lint.analysis.project.imports import ImportGraph
from amp_lint.analysis.project.index import (
    MAX_DISPATCH_TARGETS,
    ClassAssumption,
    EntryContext,
    ProjectContext,
    ProjectIndex,
    dispatch_key,
)
from amp_lint.analysis.project.memo import ProjectMemo
from amp_lint.findings import Finding, FixSafety
from amp_lint.run.cache import ResultCache, digest
from amp_lint.run.progress import Progress
from amp_lint.run.project_cache import CachedResult
from amp_lint.run.runner import Job, JobRunner, Outcome
from amp_lint.run.syntax_round import SyntaxRound
from amp_lint.settings.config import Config
from amp_lint.settings.rule_selectors import known_rules
from amp_lint.sources.files import round_zero_vocabulary
from amp_lint.suppressions.comments import UNUSED_NOQA_CODE, NoqaMap, fix_unused_noqa, unused_noqa

# A chain of calls is cut at MAX_CALL_DEPTH in the interpreter; this bounds rounds as well.
MAX_ROUNDS = 12


@dataclass
class FileState:
    """What the rounds learnt about one file."""

    findings: dict[tuple[str, int, int], Finding] = field(default_factory=dict)
    entries: dict[tuple[object, ...], EntryContext] = field(default_factory=dict)
    assumptions: list[ClassAssumption] = field(default_factory=list)
    # What was delivered to it already (dispatch assumptions once per region).
    delivered: set[object] = field(default_factory=set)
    error: str | None = None
    notice: str | None = None
    # (code, line) of the findings its noqa comments suppressed, for unused-noqa (AMP900).
    suppressed: set[tuple[str, int]] = field(default_factory=set)
    held_back: list[tuple[str, str]] = field(default_factory=list)  # FileAnalysis.held_back


class Rounds:
    def __init__(
        self,
        sources: dict[str, bytes],
        config: Config,
        project: ProjectIndex,
        cache: ResultCache | None,
        first_pass: bool,
        text_edits: bool = False,
        memo: ProjectMemo | None = None,
    ) -> None:
        self.sources = sources
        self.config = config
        self.project = project
        self.cache = cache
        self.first_pass = first_pass
        self.text_edits = text_edits
        self.states: dict[str, FileState] = {path: FileState() for path in sources}
        self.runner: JobRunner | None = None
        self.source_digests: dict[str, str] = {}
        self.noqa: dict[str, NoqaMap] = {}
        self.own: set[str] = set()
        self.imports: ImportGraph | None = None
        self.parsed = 0
        self.progress = Progress()
        self.memo = memo or ProjectMemo()
        self.round = 0
        # Everything a cached result depends on besides the file and its context.
        self.fingerprint = digest(
            repr(config), "\0".join(sorted(sources)), str(first_pass), str(text_edits)
        )

    def run(self) -> None:
        vocabulary = round_zero_vocabulary(self.config)
        first = [
            self._job(path, ProjectContext(), first_pass=self.first_pass)
            for path, source in self.sources.items()
            if self.memo.fact(path, source, vocabulary, partial(_mentions_any, source, vocabulary))
        ]
        outcomes = self._run(first)
        # Files the first pass skipped were not parsed: their syntax is checked with the rest.
        self._check_syntax({o.path for o in outcomes if o.parsed or o.error or o.notice})
        # A file analysed from its own roots applied its own and the configured assumptions.
        self.own = {outcome.path for outcome in outcomes if outcome.parsed}
        found: list[tuple[str | None, ClassAssumption]] = [
            (None, a) for a in _configured_assumptions(self.config)
        ]
        pending = self._absorb(outcomes)
        for round_number in range(1, MAX_ROUNDS + 1):
            self.round = round_number
            found += [(outcome.path, a) for outcome in outcomes for a in outcome.assumptions]
            delivered = self._deliver(found)
            found = []
            for path in delivered:
                pending.setdefault(path, [])
            if not pending:
                break
            jobs = [
                self._job(
                    path,
                    ProjectContext(
                        entries=tuple(entries),
                        assumptions=tuple(delivered.get(path, ())),
                        own_roots=False,
                    ),
                )
                for path, entries in pending.items()
            ]
            outcomes = self._run(jobs)
            pending = self._absorb(outcomes)

    def _check_syntax(self, analysed: set[str]) -> None:
        """Report the syntax errors of the files round 0 did not analyse (syntax_round.py)."""
        assert self.runner is not None
        syntax = SyntaxRound(self.sources, self.memo, self.cache, self._source_digest)
        jobs = syntax.jobs(analysed)
        if not jobs:
            return
        self.progress.phase("checking syntax", len(jobs))
        outcomes = self.runner.run(jobs, self.progress.collected)
        syntax.record(outcomes)
        self._absorb(outcomes)

    def _job(self, path: str, context: ProjectContext, *, first_pass: bool = False) -> Job:
        return Job(path, self.sources[path], False, False, context, first_pass, self.text_edits)

    def _deliver(
        self, found: list[tuple[str | None, ClassAssumption]]
    ) -> dict[str, list[ClassAssumption]]:
        """Assumptions seen in one file (or configured) go to the other files they may
        apply to, each once: framework ones to the files defining a class they name,
        dispatch ones to the files of the program around the region that made them."""
        delivered: dict[str, list[ClassAssumption]] = {}
        for origin, assumption in found:
            for path in self._destinations(assumption):
                # A file applied its own framework settings; a dispatch reaches it too.
                own = path == origin and assumption.near is None
                if own or (origin is None and path in self.own):
                    continue
                state = self.states[path]
                key = dispatch_key(assumption)
                if key in state.delivered:
                    continue
                state.delivered.add(key)
                state.assumptions.append(assumption)
                delivered.setdefault(path, []).append(assumption)
        return delivered

    def _imports(self) -> ImportGraph:
        if self.imports is None:
            self.imports = ImportGraph(self.sources, self.project, self.memo)
        return self.imports

    def _destinations(self, assumption: ClassAssumption) -> list[str]:
        if assumption.path is not None:
            return [assumption.path] if assumption.path in self.sources else []
        if assumption.near is not None:
            program = self._imports().program(assumption.near)
            words = tuple(f"def {method}".encode() for method in assumption.methods)
            found = [p for p in sorted(program) if self._mentions(p, words)]
            return found if len(found) <= MAX_DISPATCH_TARGETS else []
        names = tuple(name.encode() for name in assumption.class_names)
        naming = {p for p in self.sources if self._mentions(p, names)}
        # Subclasses of their classes (`class Model(BaseModel)`, BaseModel a LightningModule
        # in another file) are in files importing them.
        subclassing = self._imports().importers(naming) if naming else set()
        return sorted(p for p in subclassing if b"class " in self.sources[p])

    def _mentions(self, path: str, words: tuple[bytes, ...]) -> bool:
        source = self.sources[path]
        return self.memo.fact(path, source, words, partial(_mentions_any, source, words))

    def _absorb(self, outcomes: Iterable[Outcome]) -> dict[str, list[EntryContext]]:
        """Record findings and errors; return the entries not analysed yet, by file."""
        pending: dict[str, list[EntryContext]] = {}
        for outcome in outcomes:
            state = self.states[outcome.path]
            state.error = state.error or outcome.error
            state.notice = state.notice or outcome.notice
            state.held_back = state.held_back or list(outcome.held_back)
            for finding in outcome.remaining:
                owner = state if finding.path == outcome.path else self._placed(finding)
                if owner is not None:
                    key = (finding.code, finding.line, finding.column)
                    known = owner.findings.get(key)
                    # The first copy, unless a later one (the file's own) can be fixed.
                    if known is None or (known.fix is None and finding.fix is not None):
                        owner.findings[key] = finding
            state.suppressed.update((f.code, f.line) for f in outcome.suppressed)
            for entry in outcome.outgoing:
                target = self.states.get(entry.path)
                if target is None or entry.key in target.entries:
                    continue
                target.entries[entry.key] = entry
                pending.setdefault(entry.path, []).append(entry)
        return pending

    def _placed(self, finding: Finding) -> FileState | None:
        """The state of the linted file a finding was placed in from another file's analysis
        (a constant passed from there), unless its noqa or per-file ignores suppress it."""
        state = self.states.get(finding.path)
        if state is None or not self.config.is_enabled(finding.code, finding.path):
            return None
        if finding.path not in self.noqa:
            self.noqa[finding.path] = NoqaMap(self.sources[finding.path].decode("utf-8", "replace"))
        if self.noqa[finding.path].suppresses(finding.line, finding.code):
            state.suppressed.add((finding.code, finding.line))
            return None
        return state

    def _run(self, jobs: list[Job]) -> list[Outcome]:
        """Outcomes of the jobs, from the cache where an earlier run left them."""
        assert self.runner is not None
        keys = [self._key(job) for job in jobs]
        results: dict[int, Outcome] = {}
        missing: list[int] = []
        for position, key in enumerate(keys):
            cached = self.cache.get(key) if self.cache is not None else None
            if isinstance(cached, CachedResult) and cached.dependencies == self._digests(
                [path for path, _ in cached.dependencies]
            ):
                results[position] = cached.outcome(jobs[position])
            else:
                missing.append(position)
        label = "analysing" if self.round == 0 else f"following calls (round {self.round})"
        self.progress.phase(label, len(missing))
        fresh = self.runner.run([jobs[position] for position in missing], self.progress.collected)
        for position, outcome in zip(missing, fresh):
            results[position] = outcome
            self.parsed += outcome.parsed
            if self.cache is not None and outcome.error is None:
                digests = self._digests(outcome.dependencies)
                self.cache.put(keys[position], CachedResult.of(outcome, digests))
        return [results[position] for position in range(len(jobs))]

    def _digests(self, paths: list[str]) -> tuple[tuple[str, str], ...]:
        """The current digest of each file a result depended on (another file's function
        whose return value it used): a result is reused only while they are unchanged."""
        return tuple((path, self._source_digest(path)) for path in paths)

    def _source_digest(self, path: str) -> str:
        if path not in self.source_digests:
            source = self.sources.get(path, b"")
            remembered = self.memo.fact(path, source, "digest", partial(digest, source))
            self.source_digests[path] = remembered
        return self.source_digests[path]

    def _key(self, job: Job) -> str:
        source = (
            self._source_digest(job.path)
            if job.source is self.sources.get(job.path)
            else digest(job.source)
        )
        return digest(self.fingerprint, job.path, source, repr(job.context))

    def outcomes(self) -> list[Outcome]:
        found = []
        for path, state in self.states.items():
            unused = self._unused_noqa(path, state)
            if state.findings or unused or state.error or state.notice or state.held_back:
                outcome = Outcome(path, self.sources[path], error=state.error, notice=state.notice)
                outcome.held_back = state.held_back
                findings = [*state.findings.values(), *unused]
                outcome.remaining = sorted(findings, key=lambda f: f.sort_key)
                found.append(outcome)
        return found

    def _unused_noqa(self, path: str, state: FileState) -> list[Finding]:
        """AMP900 findings, once every round is done: a noqa comment is used if it suppressed
        a finding of any round. A file that failed or was not analysed has none."""
        if state.error or state.notice or not self.config.is_enabled(UNUSED_NOQA_CODE, path):
            return []

        def enabled(code: str) -> bool:
            return self.config.is_enabled(code, path)

        rules = known_rules()
        return unused_noqa(path, self.sources[path], state.suppressed, enabled, rules)

    def fix(
        self, outcomes: list[Outcome], *, unsafe: bool, only: frozenset[str] | None = None
    ) -> list[Outcome]:
        """Fix each file that has a fix to apply (of `only`, if given), in everything the
        rounds found for it."""
        fixable = [
            outcome.path
            for outcome in outcomes
            if outcome.error is None
            and (only is None or outcome.path in only)
            and any(_applies(f, unsafe) for f in outcome.remaining)
        ]
        jobs = []
        remaining = {outcome.path: outcome.remaining for outcome in outcomes}
        noqa_fixed: dict[str, list[Finding]] = {}
        for path in fixable:
            state = self.states[path]
            context = ProjectContext(
                entries=tuple(state.entries.values()), assumptions=tuple(state.assumptions)
            )
            # Unused noqa codes are removed from the text first (`noqa_fixed`).
            source, noqa_fixed[path] = fix_unused_noqa(self.sources[path], remaining[path])
            jobs.append(Job(path, source, True, unsafe, context, text_edits=self.text_edits))
        assert self.runner is not None
        self.progress.phase("fixing", len(jobs))
        fixed = {
            outcome.path: outcome for outcome in self.runner.run(jobs, self.progress.collected)
        }
        results = []
        for outcome in outcomes:
            result = fixed.get(outcome.path)
            if result is None:
                results.append(outcome)
                continue
            _count_noqa_fixes(result, outcome.source, noqa_fixed[outcome.path])
            # What stays if the fixed bytes are not written (runner.write_fixes).
            result.unfixed = outcome.remaining
            if result.error is not None:  # the fix failed: the file keeps its findings
                result.remaining, result.fixed, result.fixed_source = outcome.remaining, [], None
            results.append(result)
        return results


def _count_noqa_fixes(result: Outcome, original: bytes, noqa_fixed: list[Finding]) -> None:
    """The fix job read the file with its unused noqa codes removed (fix_unused_noqa): the
    outcome is given the bytes on disk back, and the removals count as fixes."""
    if not noqa_fixed:
        return
    if result.fixed_source is None:
        result.fixed_source = result.source
    result.source = original
    result.fixed = sorted([*noqa_fixed, *result.fixed], key=lambda f: f.sort_key)


def _mentions_any(source: bytes, words: tuple[bytes, ...]) -> bool:
    return any(word in source for word in words)


def _configured_assumptions(config: Config) -> list[ClassAssumption]:
    if config.lightning_precision is None and config.transformers_trainer_precision is None:
        return []
    from amp_lint.analysis.regions.frameworks import configured_assumptions  # loads libcst

    return configured_assumptions(config)


def _applies(finding: Finding, unsafe: bool) -> bool:
    return finding.fix is not None and (unsafe or finding.fix.safety is FixSafety.SAFE)
