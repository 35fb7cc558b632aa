"""The `amp-lint` command: `check` (the default), `rules`, `rule CODE`, `verify` and `clean`.

Exit status: 0 clean, 1 findings remain (or `--diff` would change something), 2 usage,
configuration, unreadable or unparsable file, or internal error. A file that fails is reported
on one line and the other files are still processed.

This module parses the command line; what is printed after linting, and the exit status, is
reporting.py's; reading, linting, fixing and writing the files is warm_run.py's and runner.py's.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from amp_lint import __version__
from amp_lint.cli import cache_clean, check_options, rule_commands, server_command
from amp_lint.cli.add_noqa import report_added_noqa
from amp_lint.cli.check_settings import print_files, print_settings, resolver_for, verbose_printer
from amp_lint.cli.reporting import (
    EXIT_ERROR,
    EXIT_FINDINGS,
    PROGRAM,
    Reporter,
    exit_status,
    print_fix_summary,
    report_diff,
    report_findings,
)
from amp_lint.cli.streams import (
    SUBCOMMANDS,
    closed_streams,
    print_file_names_as_bytes,
    read_standard_input,
    unknown_command,
)
from amp_lint.formats import text as text_format
from amp_lint.formats.output import choose_output, needs_text_edits
from amp_lint.run.cache import DEFAULT_DIRECTORY
from amp_lint.run.notebook_run import lint_notebook_input
from amp_lint.run.progress import Progress
from amp_lint.run.project_cache import cache_directory
from amp_lint.run.project_run import RunOptions
from amp_lint.run.runner import Job, Outcome, run_jobs, write_fixes
from amp_lint.run.warm_run import lint_paths
from amp_lint.settings.config import CHOICES, Config
from amp_lint.settings.errors import ConfigError
from amp_lint.sources.files import has_amp_vocabulary
from amp_lint.sources.notebooks import is_notebook

STDIN = "-"


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    closed = closed_streams()
    if closed:
        return closed
    if unknown_command(arguments):
        return EXIT_ERROR
    if not arguments or arguments[0] not in (*SUBCOMMANDS, "-h", "--help", "--version"):
        # `amp-lint PATH` and `amp-lint --fix PATH` mean `amp-lint check ...`, as in ruff.
        arguments.insert(0, "check")
    try:
        args = _parser().parse_args(arguments)
    except SystemExit as exit_request:  # argparse exits 2 on usage errors, 0 for --help
        return exit_request.code if isinstance(exit_request.code, int) else EXIT_ERROR
    args.explicit_end_of_options = "--" in arguments
    print_file_names_as_bytes()
    try:
        with check_options.output_silenced(args):
            status: int = args.run(args)
    except BrokenPipeError:
        # `amp-lint check | head`: the reader left; stop quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FINDINGS
    return status


# Command line


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROGRAM,
        description="Find and fix PyTorch code that is unsafe under automatic mixed precision.",
        epilog="Without a subcommand, `check` is assumed: `amp-lint --fix src/`.",
    )
    parser.add_argument("--version", action="version", version=f"{PROGRAM} {__version__}")
    subcommands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    check = subcommands.add_parser(
        "check", help="lint (and fix) files", description="Lint files and directories."
    )
    check.set_defaults(run=_run_check)
    check.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="files or directories (default: .); - reads standard input",
    )
    check.add_argument("--fix", action="store_true", help="apply safe fixes")
    check.add_argument(
        "--unsafe-fixes",
        action="store_true",
        help="also apply fixes that change numerics or semantics (with --fix or --diff)",
    )
    check.add_argument(
        "--diff",
        action="store_true",
        help="print the changes --fix would make, write nothing; exit 1 if there are any",
    )
    for flag, what in (
        ("--select", "only these rule codes or prefixes (replaces the configured selection)"),
        ("--extend-select", "add these codes or prefixes to the selection"),
        ("--ignore", "skip these codes or prefixes"),
    ):
        check.add_argument(
            flag, type=_code_list, action="extend", metavar="CODES", help=f"{what}, comma-separated"
        )
    check.add_argument(
        "--output-format",
        "--format",
        dest="output_format",
        choices=CHOICES["output-format"],
        metavar="FORMAT",
        help="how findings are reported: concise (the default; text is its older name), full, "
        "json, json-lines, sarif, github, gitlab or junit; also AMP_LINT_OUTPUT_FORMAT",
    )
    check.add_argument(
        "--output-file",
        type=Path,
        metavar="FILE",
        help="write the findings to FILE instead of standard output",
    )
    check.add_argument(
        "--statistics", action="store_true", help="print counts per rule instead of each finding"
    )
    check.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="read [tool.amp-lint] from FILE instead of the nearest pyproject.toml",
    )
    check.add_argument(
        "--stdin-filename",
        metavar="NAME",
        help="the path to report (and match against config globs) for standard input",
    )
    check.add_argument("--exit-zero", action="store_true", help="exit 0 even if findings remain")
    check_options.add_arguments(check)
    check.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="print the findings and errors only: no summary line, no progress",
    )
    check.add_argument(
        "--assume-autocast",
        choices=CHOICES["dtype"],
        help="library mode: analyse every nn.Module.forward, autograd.Function.forward and "
        "configured function as running under autocast of this dtype",
    )
    check.add_argument(
        "--device",
        choices=CHOICES["device"],
        help="with --assume-autocast: the autocast device (default: either)",
    )
    check.add_argument(
        "--torch-version",
        metavar="X.Y",
        help="the oldest torch the project supports (overrides torch-version in "
        "[tool.amp-lint]; default: read from [project] dependencies, else the newest)",
    )
    check.add_argument(
        "--no-cache", action="store_true", help="neither read nor write the result cache"
    )
    check.add_argument(
        "--cache-dir",
        type=Path,
        metavar="DIR",
        help=f"where results are cached (default: {DEFAULT_DIRECTORY} beside the config)",
    )
    check.add_argument(
        "--show-settings",
        action="store_true",
        help="print the settings that apply to the first PATH and the file they come from",
    )
    check.add_argument(
        "--show-files", action="store_true", help="print the files that would be linted"
    )
    check.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="say which config applies where, what was found and skipped, cache use, timing",
    )
    check.add_argument(
        "--no-first-pass",
        action="store_true",
        help="parse every file with AMP vocabulary, not only those the quick ast pass selects "
        "(for checking that pass: the findings are the same)",
    )

    rules = subcommands.add_parser("rules", help="list the rules")
    rules.set_defaults(run=rule_commands.run_rules)
    rule = subcommands.add_parser("rule", help="show a rule's documentation")
    rule.add_argument("rule", metavar="CODE", help="a rule code (AMP001) or name")
    rule.set_defaults(run=rule_commands.run_rule)
    verify = subcommands.add_parser(
        "verify",
        help="run the rules' bad and fixed examples under torch.autocast here (needs torch)",
        description="Run every rule's bad and fixed example under torch.autocast on this "
        "machine's torch and devices; print a table and write a JSON report. Exit 1 when an "
        "example does not behave as its rule documents.",
    )
    verify.set_defaults(run=rule_commands.run_verify)
    rule_commands.verify_command().add_arguments(verify)
    clean = subcommands.add_parser(
        "clean",
        help="remove the result cache of the project at PATH",
        description="Remove the result cache `amp-lint check` keeps for the project at PATH.",
    )
    clean.set_defaults(run=cache_clean.run)
    cache_clean.add_arguments(clean)
    server = subcommands.add_parser(
        "server",
        help="run the language server on stdio (needs the lsp extra)",
        description="Run amp-lint as a Language Server Protocol server on stdin/stdout, for "
        "editors: diagnostics, quick fixes and hovers over the workspace as a project. Needs "
        "`pip install 'amp-lint[lsp]'`. See docs/editors.md.",
    )
    server.set_defaults(run=server_command.run)
    return parser


def _code_list(text: str) -> list[str]:
    """Checked against the rules in check_settings.resolver_for, to name the flag."""
    return [code.strip() for code in text.split(",") if code.strip()]


# check


def _run_check(args: argparse.Namespace) -> int:
    reporter = Reporter()
    try:
        resolver = resolver_for(args)
        # One report for the run: its format and file are the current directory's settings.
        choose_output(args, resolver.resolve(Path.cwd()).config)
    except ConfigError as error:
        reporter.error(str(error))
        return EXIT_ERROR
    paths: list[str] = args.paths
    # No path means the current directory (or stdin, given --stdin-filename), but `--` with
    # nothing after it is an explicit empty list: a hook given no files lints nothing.
    if not paths and not args.explicit_end_of_options:
        paths = [STDIN] if args.stdin_filename else ["."]
    if STDIN in paths:
        if len(paths) > 1:
            reporter.error("- (standard input) cannot be combined with other paths")
            return EXIT_ERROR
        # Standard input has the settings of the file it stands for, as in ruff.
        resolved = resolver.resolve_file(Path(args.stdin_filename or "-"))
        if resolved.error is not None:
            reporter.error(resolved.error)
            return EXIT_ERROR
        return _check_stdin(args, resolved.config, reporter)
    if args.show_settings:
        return print_settings(paths, resolver, reporter)
    if args.show_files:
        return print_files(paths, resolver, reporter)
    options = RunOptions(
        fix=bool(args.fix or args.diff),
        unsafe=bool(args.unsafe_fixes),
        first_pass=not args.no_first_pass,
        text_edits=needs_text_edits(args),
        progress=Progress.for_terminal(quiet=args.quiet),
        jobs=args.jobs,
    )
    if args.add_noqa and (args.fix or args.diff):
        reporter.error("--add-noqa cannot be combined with --fix or --diff")
        return EXIT_ERROR
    result = lint_paths(
        paths,
        resolver,
        options,
        reporter.error,
        reporter.warning,
        cache_directory_for=lambda config: _cache_directory(args, config),
        verbose=verbose_printer(args),
    )
    outcomes = result.outcomes
    if args.add_noqa:
        return report_added_noqa(outcomes, args, reporter)
    if args.diff:
        return report_diff(outcomes, args, reporter)
    if args.fix:
        write_fixes(outcomes, reporter.error, reporter.warning)
    return report_findings(outcomes, args, reporter, (result.summary, paths))


def _cache_directory(args: argparse.Namespace, config: Config) -> Path | None:
    return cache_directory(config, disabled=args.no_cache, given=args.cache_dir)


def _job(path: str, source: bytes, args: argparse.Namespace) -> Job:
    return Job(
        path=path,
        source=source,
        fix=bool(args.fix or args.diff),
        unsafe=bool(args.unsafe_fixes),
        text_edits=needs_text_edits(args),
    )


def _check_stdin(args: argparse.Namespace, config: Config, reporter: Reporter) -> int:
    """Lint standard input; with --fix, print the fixed source (or the input unchanged)."""
    try:
        source = read_standard_input()
    except OSError as error:
        reporter.error(f"standard input: {error.strerror or error}")
        return EXIT_ERROR
    path = args.stdin_filename or STDIN
    excluded = bool(args.stdin_filename) and config.is_excluded(path)
    if excluded:
        outcome = Outcome(path, source)
    elif is_notebook(path):
        outcome = lint_notebook_input(
            path, source, config, fix=bool(args.fix or args.diff), unsafe=bool(args.unsafe_fixes)
        )
    elif not has_amp_vocabulary(source, config):
        job = Job(path, source, False, False, syntax_only=True)
        outcome = replace(run_jobs([job], config)[0], source=source)
    else:
        outcome = run_jobs([_job(path, source, args)], config)[0]
    if outcome.notice:
        reporter.warning(outcome.notice)
    if outcome.error:
        reporter.error(outcome.error)
    if args.diff:
        return report_diff([outcome], args, reporter)
    if not args.fix:
        return report_findings([outcome], args, reporter)
    # Like ruff: the fixed code goes to stdout (the input when nothing changed, or on error,
    # so an editor piping a buffer through never loses it) and the findings to stderr.
    sys.stdout.flush()
    sys.stdout.buffer.write(outcome.fixed_source or source)
    sys.stdout.buffer.flush()
    sys.stderr.write(text_format.format_findings(outcome.remaining, bool(args.unsafe_fixes)))
    print_fix_summary([outcome], args)
    return exit_status(outcome.remaining, args, reporter)
