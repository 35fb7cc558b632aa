"""`check --add-noqa`: a `# noqa: CODE` comment on each line with a finding, as ruff adds them
(the comments themselves: suppressions/adding.py).

Files are written as fixes are (runner.write_fixes): atomically, and only if unchanged since
they were read. A second run adds nothing: the findings are suppressed by then.
"""

from __future__ import annotations

import argparse
import sys
import tokenize
from collections.abc import Callable, Iterable

from amp_lint.cli.reporting import EXIT_CLEAN, EXIT_ERROR, Reporter
from amp_lint.run.runner import Outcome, write_fixes
from amp_lint.sources.files import read_source
from amp_lint.sources.notebooks import is_notebook
from amp_lint.suppressions.adding import with_noqa_comments
from amp_lint.suppressions.comments import UNUSED_NOQA_CODE


def add_noqa(
    outcomes: Iterable[Outcome],
    report_error: Callable[[str], None],
    report_warning: Callable[[str], None],
) -> int:
    """Add the comments to the files of `outcomes`, write them; the number of lines given a
    comment (or codes added to theirs)."""
    written = []
    counts: dict[str, int] = {}
    for outcome in outcomes:
        # An unused-noqa finding is fixed by removing the code, not by another comment.
        findings = [
            f for f in outcome.remaining if f.path == outcome.path and f.code != UNUSED_NOQA_CODE
        ]
        if outcome.error or not findings:
            continue
        if is_notebook(outcome.path):
            report_warning(f"{outcome.path}: --add-noqa does not edit notebooks; nothing added")
            continue
        try:
            source = outcome.source or read_source(outcome.path)
        except OSError as error:
            report_error(f"{outcome.path}: cannot read: {error.strerror or error}")
            continue
        try:
            added = with_noqa_comments(source, findings)
        except (SyntaxError, tokenize.TokenError, UnicodeDecodeError, LookupError) as error:
            report_error(f"{outcome.path}: cannot add noqa comments: {error}")
            continue
        for message in added.skipped:
            report_warning(f"{outcome.path}:{message}")
        if added.directives:
            counts[outcome.path] = added.directives
            written.append(Outcome(outcome.path, source, fixed_source=added.source))
    write_fixes(written, report_error, report_warning)
    # A file that changed meanwhile, or could not be written, is left as it was.
    return sum(counts[o.path] for o in written if o.fixed_source is not None)


def report_added_noqa(outcomes: list[Outcome], args: argparse.Namespace, reporter: Reporter) -> int:
    """Add the comments, say how many (as ruff does); exit 0 unless something failed."""
    count = add_noqa(outcomes, reporter.error, reporter.warning)
    if not args.quiet:
        directives = "directive" if count == 1 else "directives"
        print(f"Added {count} noqa {directives}.", file=sys.stderr)
    return EXIT_ERROR if reporter.failed else EXIT_CLEAN
