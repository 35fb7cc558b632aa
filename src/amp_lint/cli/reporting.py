"""What `amp-lint check` prints once the files are linted: findings, summaries, diffs, one
line per error or warning, and the exit status it decides."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from amp_lint.findings import Finding, FixSafety
from amp_lint.formats import json as json_format
from amp_lint.formats import text as text_format
from amp_lint.formats.listing import Listing
from amp_lint.formats.output import render, write_report
from amp_lint.formats.text import plural
from amp_lint.run.run_summary import RunSummary, clean_run_line, no_files_message
from amp_lint.run.runner import Outcome, unified_diff

PROGRAM = "amp-lint"
EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_ERROR = 2


class Reporter:
    """Prints one-line errors and warnings to stderr and remembers whether there were
    errors (warnings change no exit status)."""

    def __init__(self) -> None:
        self.failed = False

    def error(self, message: str) -> None:
        self.failed = True
        print(f"{PROGRAM}: error: {message}", file=sys.stderr)

    def warning(self, message: str) -> None:
        print(f"{PROGRAM}: warning: {message}", file=sys.stderr)


def report_findings(
    outcomes: list[Outcome],
    args: argparse.Namespace,
    reporter: Reporter,
    checked: tuple[RunSummary, Sequence[str]] | None = None,
) -> int:
    """Print the findings and summary; `checked` (what the run checked, and the paths it was
    given) makes a run without findings say what it checked."""
    remaining = [finding for outcome in outcomes for finding in outcome.remaining]
    _deliver(_report_text(outcomes, remaining, args), args, reporter)
    if args.fix:
        print_fix_summary(outcomes, args)
    elif remaining:
        _print_found_summary(remaining, args)
    fixed = any(outcome.fixed for outcome in outcomes)
    if checked is not None and not remaining and not fixed:
        _print_checked_summary(*checked, args, reporter)
    _print_held_back(outcomes, args)
    status = exit_status(remaining, args, reporter)
    # --exit-non-zero-on-fix: a fix is a change to review, as in ruff.
    fix_fails = args.fix and getattr(args, "exit_non_zero_on_fix", False) and not args.exit_zero
    if status == EXIT_CLEAN and fixed and fix_fails:
        return EXIT_FINDINGS
    return status


def _report_text(
    outcomes: list[Outcome], remaining: list[Finding], args: argparse.Namespace
) -> str:
    if args.statistics:
        if args.output_format in ("json", "json-lines"):
            return json_format.format_statistics(remaining)
        return text_format.format_statistics(remaining)
    listing = Listing.of(
        remaining,
        unsafe_fixes=bool(args.unsafe_fixes),
        # What is in the files now: the fixed bytes where --fix wrote them.
        sources={o.path: o.fixed_source or o.source for o in outcomes if o.source},
        errors=[(o.path, o.error) for o in outcomes if o.error],
    )
    return render(args.output_format, listing)


def _deliver(report: str, args: argparse.Namespace, reporter: Reporter) -> None:
    """To stdout, or to `--output-file` (written whole, its directory made if missing)."""
    if args.output_file is None:
        sys.stdout.write(report)
        return
    try:
        write_report(args.output_file, report)
    except OSError as error:
        reporter.error(f"{args.output_file}: cannot write: {error.strerror or error}")


def _print_checked_summary(
    summary: RunSummary, paths: Sequence[str], args: argparse.Namespace, reporter: Reporter
) -> None:
    """A clean run is not silent: silence after linting no file, or only files that never
    enter autocast, would read as "AMP-safe" (run_summary.py). Errors speak for themselves."""
    if args.quiet or getattr(args, "silent", False) or reporter.failed or not paths:
        return
    if summary.files == 0:
        reporter.warning(no_files_message(summary, paths))
    else:
        _summary(clean_run_line(summary, paths))


def _print_found_summary(remaining: list[Finding], args: argparse.Namespace) -> None:
    if args.quiet:
        return
    safe, unsafe = _fixable_counts(remaining)
    fixable, hidden = (safe + unsafe, 0) if args.unsafe_fixes else (safe, unsafe)
    option = "--fix --unsafe-fixes" if args.unsafe_fixes else "--fix"
    details = []
    if fixable:
        details.append(f"{fixable} fixable with {option}")
    if hidden:
        details.append(
            f"{hidden} more with --unsafe-fixes"
            if fixable
            else f"{hidden} fixable with --fix --unsafe-fixes"
        )
    suffix = f" ({', '.join(details)})" if details else ""
    _summary(f"Found {plural(len(remaining), 'finding')}{suffix}.")


def _print_held_back(outcomes: list[Outcome], args: argparse.Namespace) -> None:
    """Findings held back by the torch-version target are said, not silently dropped:
    "4 findings need torch >= 2.4; the torch-version target is 2.2 (from ...)"."""
    held = [entry for outcome in outcomes for entry in outcome.held_back]
    if not held or args.quiet:
        return
    needed = max((release for release, _ in held), key=_release_key)
    targets = sorted({target for _, target in held})
    target = targets[0] if len(targets) == 1 else f"{len(targets)} targets, {targets[0]} among them"
    _summary(
        f"{plural(len(held), 'finding')} not reported: their fixes need torch >= {needed}, "
        f"and the torch-version target is {target}; --torch-version {needed} shows them."
    )


def _release_key(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split(".") if part.isdigit())


def print_fix_summary(outcomes: list[Outcome], args: argparse.Namespace) -> None:
    if args.quiet:
        return
    fixed = sum(len(outcome.fixed) for outcome in outcomes)
    remaining = [finding for outcome in outcomes for finding in outcome.remaining]
    if not fixed and not remaining:
        return
    _, unsafe = _fixable_counts(remaining)
    hint = f" ({unsafe} fixable with --unsafe-fixes)" if unsafe and not args.unsafe_fixes else ""
    _summary(f"Fixed {plural(fixed, 'finding')}, {len(remaining)} remaining{hint}.")


def _fixable_counts(findings: list[Finding]) -> tuple[int, int]:
    safe = sum(1 for f in findings if f.fix and f.fix.safety is FixSafety.SAFE)
    unsafe = sum(1 for f in findings if f.fix and f.fix.safety is FixSafety.UNSAFE)
    return safe, unsafe


def _summary(line: str) -> None:
    sys.stdout.flush()  # keep findings and summary in order on a shared terminal
    print(line, file=sys.stderr)


def exit_status(remaining: list[Finding], args: argparse.Namespace, reporter: Reporter) -> int:
    if reporter.failed:
        return EXIT_ERROR
    return EXIT_FINDINGS if remaining and not args.exit_zero else EXIT_CLEAN


def report_diff(outcomes: list[Outcome], args: argparse.Namespace, reporter: Reporter) -> int:
    changed = [outcome for outcome in outcomes if outcome.fixed_source is not None]
    sys.stdout.flush()
    for outcome in sorted(changed, key=lambda o: o.path):
        assert outcome.fixed_source is not None
        sys.stdout.buffer.write(unified_diff(outcome.path, outcome.source, outcome.fixed_source))
    sys.stdout.buffer.flush()
    would_fix = sum(len(outcome.fixed) for outcome in changed)
    if would_fix:
        _summary(f"Would fix {plural(would_fix, 'finding')}.")
    if reporter.failed:
        return EXIT_ERROR
    return EXIT_FINDINGS if changed and not args.exit_zero else EXIT_CLEAN
