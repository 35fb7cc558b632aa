"""Run the analysis and the rules over one file; apply fixes.

This is the only place that knows both the analysis and the rules (with rule_reports.py,
which turns the rules' reports into findings). The CLI and the flake8 plugin call
`lint_source` and `fix_source` and nothing below them.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import ClassVar

import libcst as cst

from amp_lint.analysis.interpreter.cross_file import RememberedResult, ResultKey
from amp_lint.analysis.interpreter.interpreter import Interpreter
from amp_lint.analysis.project.index import (
    SINGLE_FILE,
    ClassAssumption,
    EntryContext,
    ProjectContext,
    ProjectIndex,
)
from amp_lint.analysis.regions.frameworks import configured_assumptions, framework_assumptions
from amp_lint.analysis.syntax.module import ModuleFacts
from amp_lint.analysis.syntax.names import collect_names
from amp_lint.analysis.values.optables import targeting
from amp_lint.findings import Finding, FixSafety
from amp_lint.parse.first_pass import code_token_count
from amp_lint.parse.parse_guard import refused_by_cpython
from amp_lint.parse.syntax_check import cpython_refusal
from amp_lint.rules import Report, Rule, all_rules
from amp_lint.run.rule_reports import RuleObserver, to_findings
from amp_lint.settings.config import Config
from amp_lint.settings.torch_version import format_torch_version
from amp_lint.sources.test_files import is_test_file
from amp_lint.suppressions.comments import NoqaMap

MAX_FIX_PASSES = 5


class SourceError(Exception):
    """A file that cannot be decoded or parsed; the message is one line naming the file."""


class SourceTooLarge(SourceError):
    """A file whose syntax tree would not fit the memory a worker may use: not analysed,
    which the run reports as a warning, not an error."""


# A libcst tree takes up to about 4.5 KB a token of code (measured on torch 2.13:
# testing/_internal/generated/annotated_fn_args.py, 73,120 tokens, 332 MB; the test table
# common_methods_invocations.py, 189,250 tokens, 747 MB). Below this bound a worker stays
# under about 500 MB; the largest file of 28 real packages' 13,039 has 33,611 tokens.
MAX_CODE_TOKENS = 60_000
KB_PER_TOKEN = 4.5
# Files this small cannot reach the bound (a token takes a byte at least), so their tokens
# are not counted.
_UNCOUNTED_BYTES = MAX_CODE_TOKENS


@dataclass
class FixResult:
    source: bytes
    fixed: list[Finding]
    remaining: list[Finding]


@dataclass
class FileAnalysis:
    findings: list[Finding]
    # What this file tells the rest of the project: calls into other linted files made under
    # autocast, and the framework settings (trainers, prepared models) it makes.
    outgoing: list[EntryContext]
    assumptions: list[ClassAssumption]
    # Other linted files whose code the findings depend on (their functions' results).
    dependencies: list[str]
    # Findings of this file its noqa comments suppressed (for unused-noqa, AMP900).
    suppressed: list[Finding] = field(default_factory=list)
    # Findings no rule reported because the torch-version target is too old for their fix:
    # (the release each needs, the target and where it was read).
    held_back: list[tuple[str, str]] = field(default_factory=list)


def parse_source(source: bytes, path: str) -> cst.Module:
    if len(source) > _UNCOUNTED_BYTES:
        tokens = code_token_count(source)
        if tokens > MAX_CODE_TOKENS:
            raise SourceTooLarge(
                f"{path}: not analysed: its {tokens:,} tokens of code would take about "
                f"{tokens * KB_PER_TOKEN / 1024:,.0f} MB as a syntax tree (the limit is "
                f"{MAX_CODE_TOKENS:,} tokens)"
            )
    refusal = refused_by_cpython(source)
    if refusal is not None:
        raise SourceError(f"{path}:{refusal}" if refusal[0].isdigit() else f"{path}: {refusal}")
    try:
        return cst.parse_module(source)
    except cst.ParserSyntaxError as error:
        # CPython places an error where the code goes wrong (libcst often at the next line's
        # start) and says what is wrong; libcst's own words only for what CPython accepts.
        refusal = cpython_refusal(source, path)
        raise SourceError(
            refusal
            or f"{path}:{error.raw_line}:{error.raw_column + 1}: cannot parse: "
            f"{error.message.splitlines()[0]}"
        ) from None
    except (UnicodeDecodeError, LookupError, SyntaxError, ValueError) as error:
        raise SourceError(f"{path}: cannot decode: {error}") from None


def lint_source(
    source: bytes, path: str, config: Config, *, honour_noqa: bool = True
) -> list[Finding]:
    """Findings for one file on its own, sorted by position, without their edits."""
    return analyse_source(source, path, config, SINGLE_FILE, honour_noqa=honour_noqa).findings


def analyse_source(
    source: bytes,
    path: str,
    config: Config,
    context: ProjectContext,
    *,
    honour_noqa: bool = True,
    text_edits: bool = False,
) -> FileAnalysis:
    """Findings for one file in its project context, and what it tells other files; with
    `text_edits`, each fix carries the text edits it makes (for JSON and SARIF output)."""
    module = parse_source(source, path)
    analysis = _analyse_module(module, source, config, context, path, honour_noqa=honour_noqa)
    if text_edits:
        analysis.findings = _with_text_edits(module, analysis.findings, path)
    analysis.findings = [finding.portable() for finding in analysis.findings]
    return analysis


def fix_source(
    source: bytes,
    path: str,
    config: Config,
    *,
    unsafe: bool,
    context: ProjectContext = SINGLE_FILE,
    text_edits: bool = False,
) -> FixResult:
    """Apply every applicable fix, re-linting until nothing more changes.

    Each pass applies all the fixes whose edits do not overlap and analyses the result once:
    that analysis gives the findings that remain, and the fixes of the next pass only if
    something is still fixable (fixes that overlapped, or findings a fix uncovered). A file
    whose fixes do not overlap takes two analyses; at most MAX_FIX_PASSES + 1.
    """
    # Loaded here: it pulls in libcst.codemod, which costs more than linting a small project.
    from amp_lint.fixes.apply import FixConflict, apply_fixes

    module = _keep_final_carriage_return(parse_source(source, path), source)
    fixed: list[Finding] = []
    findings = _lint_module(module, source, config, context, path)
    for _ in range(MAX_FIX_PASSES):
        chosen = [f for f in findings if f.fix is not None and _allowed(f, unsafe)]
        if not chosen:
            break
        try:
            new_module, applied = apply_fixes(module, chosen, path)
        except FixConflict as error:
            raise SourceError(
                f"{path}: fix produced invalid code ({error}); file left unchanged"
            ) from None
        new_source = new_module.bytes if applied else source
        if new_source == source:
            break
        # Re-parse: the next pass needs fresh node identities and proof the code parses.
        try:
            module = _keep_final_carriage_return(cst.parse_module(new_source), new_source)
        except cst.ParserSyntaxError as error:
            raise SourceError(
                f"{path}: fix produced code that does not parse ({error.message.splitlines()[0]});"
                " file left unchanged"
            ) from None
        source = new_source
        fixed.extend(f.portable() for f in applied)
        findings = _lint_module(module, source, config, context, path)
    if text_edits:
        findings = _with_text_edits(module, findings, path)
    return FixResult(source=source, fixed=fixed, remaining=[f.portable() for f in findings])


def _with_text_edits(module: cst.Module, findings: list[Finding], path: str) -> list[Finding]:
    from amp_lint.fixes.text_edits import with_text_edits  # loads libcst.codemod

    return with_text_edits(module, findings, path)


def _keep_final_carriage_return(module: cst.Module, source: bytes) -> cst.Module:
    """libcst 1.x reads a file whose lines end in a bare carriage return as having no final
    newline and prints it without one; the module is told otherwise, so that it prints the
    source back byte for byte and a fixed file keeps its last line break."""
    if source.endswith(b"\r") and not module.has_trailing_newline:
        return module.with_changes(has_trailing_newline=True)
    return module


def _allowed(finding: Finding, unsafe: bool) -> bool:
    assert finding.fix is not None
    return unsafe or finding.fix.safety is FixSafety.SAFE


def _lint_module(
    module: cst.Module, source: bytes, config: Config, context: ProjectContext, path: str
) -> list[Finding]:
    return _analyse_module(module, source, config, context, path, honour_noqa=True).findings


def _analyse_module(
    module: cst.Module,
    source: bytes,
    config: Config,
    context: ProjectContext,
    path: str,
    *,
    honour_noqa: bool,
) -> FileAnalysis:
    # What autocast does to an op depends on the torch release the project targets.
    with targeting(config.torch_version):
        in_test = is_test_file(path)
        rules = [
            rule_class()
            for rule_class in all_rules()
            if config.is_enabled(rule_class.code, path)
            and (rule_class.reported_in_tests or not in_test)
        ]
        facts = ModuleFacts(
            path=path, module=module, names=collect_names(module), config=config, source=source
        )
        reports: list[tuple[Rule, Report]] = []
        loader = ProjectLoader.shared(context.project, config)
        observers = [RuleObserver(rule) for rule in rules if rule.node_types]
        interpreter = Interpreter(facts, observers, context.project, loader)
        assumptions = list(context.assumptions)
        found: list[ClassAssumption] = []
        for rule in rules:
            # Rules that also check nodes prepare per-module state here, so they run in every
            # round; their module-level reports belong to the round of the file's own roots.
            if not (context.own_roots or rule.node_types) or not _mentions(source, rule.vocabulary):
                continue
            module_reports = list(rule.check_module(facts))
            if context.own_roots:
                reports.extend((rule, report) for report in module_reports)
        if context.own_roots:
            found = framework_assumptions(facts, interpreter.accelerate, context.project)
            assumptions += configured_assumptions(config) + found
            if in_test:
                # A test's trainer runs the modules the test builds, not every module of
                # the project (a "16-mixed" Trainer in Lightning's tests; repository triage).
                found = []
        interpreter.run(context.entries, assumptions, own_roots=context.own_roots)
        found += interpreter.dispatched()
        for observer in observers:
            reports.extend((observer.rule, report) for report in observer.found())
        findings = to_findings(reports, facts.positions, path) if reports else []
        hidden: list[Finding] = []
        if honour_noqa and findings:
            # Findings placed in other files are checked against those files' noqa comments
            # where the project's results are gathered.
            noqa = NoqaMap(source.decode("utf-8", "replace"))  # module.code would print the tree
            hidden = [f for f in findings if f.path == path and noqa.suppresses(f.line, f.code)]
            findings = [f for f in findings if all(f is not h for h in hidden)]
        return FileAnalysis(
            findings,
            list(interpreter.outgoing.values()),
            found,
            sorted(interpreter.dependencies),
            [f.portable() for f in hidden],
            _held_back(rules, config),
        )


def _held_back(rules: list[Rule], config: Config) -> list[tuple[str, str]]:
    if config.torch_version is None:
        return []
    target = f"{format_torch_version(config.torch_version)} ({config.torch_version_source})"
    return [(release, target) for rule in rules for release in rule.held_back()]


class ProjectLoader:
    """Parses other linted files on demand, to evaluate what calls into them return. One per
    process and project; the most recently used modules stay parsed, at most CAPACITY of
    them and CAPACITY_BYTES of their source: a libcst tree takes 150 to 550 times its
    source's size (a 53 KB model file 18 MB). Measured on torch 2.13's package: with 512 KB,
    files calling into several large modules parsed them again and again (default mode
    over 8 minutes instead of 2); with 2 MB the largest worker peaked at 400 MB."""

    CAPACITY = 48
    CAPACITY_BYTES = 2 * 1024 * 1024
    # Return values of calls into loaded modules, kept after the module is evicted: without
    # them, torch/_inductor's files parsed 200-400 KB modules such as ir.py again and again
    # (705 parses of 193 files, 418 of them reloads). A few hundred bytes each.
    RESULTS = 50_000
    _shared: ClassVar[dict[tuple[int, Config], ProjectLoader]] = {}

    def __init__(self, project: ProjectIndex, config: Config) -> None:
        self.project = project
        self.config = config
        self.interpreters: OrderedDict[str, Interpreter | None] = OrderedDict()
        self.sizes: dict[str, int] = {}
        self.results: dict[ResultKey, RememberedResult] = {}

    @classmethod
    def shared(cls, project: ProjectIndex | None, config: Config) -> ProjectLoader | None:
        if project is None:
            return None
        key = (id(project), config)
        if key not in cls._shared:
            cls._shared.clear()  # a new run: the old project's modules are of no use
            cls._shared[key] = cls(project, config)
        return cls._shared[key]

    def interpreter_for(self, path: str) -> Interpreter | None:
        if path in self.interpreters:
            self.interpreters.move_to_end(path)
            return self.interpreters[path]
        interpreter = self._load(path)
        self.interpreters[path] = interpreter
        # The newest module stays even when it alone is over the bound: it is in use.
        while len(self.interpreters) > 1 and (
            len(self.interpreters) > self.CAPACITY or sum(self.sizes.values()) > self.CAPACITY_BYTES
        ):
            evicted, _ = self.interpreters.popitem(last=False)
            self.sizes.pop(evicted, None)
        return interpreter

    def remembered_result(self, key: ResultKey) -> RememberedResult | None:
        return self.results.get(key)

    def remember_result(self, key: ResultKey, result: RememberedResult) -> None:
        if len(self.results) >= self.RESULTS:
            self.results.clear()
        self.results[key] = result

    def _load(self, path: str) -> Interpreter | None:
        try:
            source = self.project.source(path)
            module = parse_source(source, path)
        except (OSError, SourceError):
            return None  # its own analysis reports the problem
        self.sizes[path] = len(source)
        names = collect_names(module)
        facts = ModuleFacts(
            path=path, module=module, names=names, config=self.config, source=source
        )
        interpreter = Interpreter(facts, [], self.project, self)
        interpreter.run_module_body(report=False)
        return interpreter


def _mentions(source: bytes, words: tuple[bytes, ...]) -> bool:
    return not words or any(word in source for word in words)
