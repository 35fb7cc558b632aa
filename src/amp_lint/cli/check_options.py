"""`check`'s options about which files and lines are linted and how the run goes, as ruff
spells them: --exclude, --extend-exclude, --respect-gitignore, --force-exclude, --add-noqa,
--exit-non-zero-on-fix, --jobs and --silent."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import replace

from amp_lint.settings.config import Config


def add_arguments(check: argparse.ArgumentParser) -> None:
    check.add_argument(
        "--exclude",
        type=_glob_list,
        metavar="GLOBS",
        help="leave out files and directories matching these globs, comma-separated "
        "(replaces the configured exclude; extend-exclude still applies)",
    )
    check.add_argument(
        "--extend-exclude",
        type=_glob_list,
        action="extend",
        metavar="GLOBS",
        help="leave these out too, comma-separated",
    )
    check.add_argument(
        "--respect-gitignore",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="leave out what .gitignore, .git/info/exclude and git's global excludes file "
        "ignore (the default, inside a git work tree)",
    )
    check.add_argument(
        "--force-exclude",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="leave out files named on the command line that git ignores, too "
        "(exclude globs always apply to them), as pre-commit needs",
    )
    check.add_argument(
        "--add-noqa",
        action="store_true",
        help="add a `# noqa: CODE` comment to each line with a finding, write nothing else",
    )
    check.add_argument(
        "--exit-non-zero-on-fix",
        action="store_true",
        help="with --fix, exit 1 if anything was fixed, even when nothing remains",
    )
    check.add_argument(
        "-j",
        "--jobs",
        type=_job_count,
        metavar="N",
        help="worker processes to lint with (default: one per CPU; 1: no worker processes)",
    )
    check.add_argument(
        "-s",
        "--silent",
        action="store_true",
        help="print nothing but errors; the exit status still tells whether findings remain",
    )


def _glob_list(text: str) -> list[str]:
    return [glob.strip() for glob in text.split(",") if glob.strip()]


def _job_count(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if count < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {count}")
    return count


def with_command_line_excludes(config: Config, args: argparse.Namespace) -> Config:
    """The flags above override the `[tool.amp-lint]` settings of every directory."""
    if getattr(args, "exclude", None) is not None:
        config = replace(config, exclude=tuple(args.exclude))
    if getattr(args, "extend_exclude", None):
        config = replace(config, extend_exclude=config.extend_exclude + tuple(args.extend_exclude))
    if getattr(args, "respect_gitignore", None) is not None:
        config = replace(config, respect_gitignore=args.respect_gitignore)
    if getattr(args, "force_exclude", None) is not None:
        config = replace(config, force_exclude=args.force_exclude)
    return config


@contextlib.contextmanager
def output_silenced(args: argparse.Namespace) -> Iterator[None]:
    """With --silent, what would go to standard output (findings, diffs) is dropped, and so
    is every summary (--silent implies --quiet); errors still reach standard error."""
    if not getattr(args, "silent", False):
        yield
        return
    args.quiet = True
    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
        yield
        sys.stdout.flush()
