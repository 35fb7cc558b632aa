"""The settings `amp-lint check` runs with, from its flags and each file's config file, and
the options that only show them: `--show-settings`, `--show-files`, `--verbose`.

Command-line flags apply on top of the settings of every file (settings_discovery.py): a
`--select` replaces each config's selection, `--assume-autocast` each config's mode.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from amp_lint.cli.check_options import with_command_line_excludes
from amp_lint.cli.reporting import EXIT_CLEAN, EXIT_ERROR, PROGRAM, Reporter
from amp_lint.cli.show_settings import show_settings
from amp_lint.settings.config import Config, check_code_prefixes, load_config
from amp_lint.settings.discovery import ConfigResolver, group_files
from amp_lint.sources.files import discover_python_files

SELECTION_FLAGS = ("select", "extend_select", "ignore")


def resolver_for(args: argparse.Namespace) -> ConfigResolver:
    """The settings of each directory for this run; raises ConfigError (naming the flag or
    the `--config` file) for an unusable flag or `--config`."""
    for flag in SELECTION_FLAGS:
        given = getattr(args, flag)
        if given is not None:
            option = "--" + flag.replace("_", "-")
            setattr(args, flag, list(check_code_prefixes(given, option)))
    cwd = Path.cwd()

    def load(config_file: Path | None) -> Config:
        config = load_config(
            cwd,
            config_file=config_file,
            select=args.select,
            extend_select=args.extend_select or (),
            ignore=args.ignore or (),
            torch_version=getattr(args, "torch_version", None),
            discover=False,
        )
        return with_mode_options(config, args)

    load(None)  # the flags alone: a bad one is an error before any file is looked at
    return ConfigResolver(cwd, config_file=args.config, load=load)


def with_mode_options(config: Config, args: argparse.Namespace) -> Config:
    """Library-mode flags override `[tool.amp-lint]`."""
    if args.assume_autocast:
        config = replace(config, assume_autocast=args.assume_autocast)
    if args.device:
        config = replace(config, assume_device=args.device)
    return with_command_line_excludes(config, args)


def print_settings(paths: Sequence[str], resolver: ConfigResolver, reporter: Reporter) -> int:
    """`--show-settings`: the settings that apply to the first path (its directory's, for a
    directory), and the file they come from."""
    target = paths[0] if paths else "."
    path = Path(target)
    resolved = resolver.resolve(path) if path.is_dir() else resolver.resolve_file(path)
    if resolved.error is not None:
        reporter.error(resolved.error)
        return EXIT_ERROR
    sys.stdout.write(show_settings(target, resolved))
    return EXIT_CLEAN


def print_files(paths: Sequence[str], resolver: ConfigResolver, reporter: Reporter) -> int:
    """`--show-files`: each file a run on `paths` would lint, one per line, in lint order."""
    discovery = discover_python_files([Path(path) for path in paths], resolver)
    for message in discovery.errors:
        reporter.error(message)
    for group in group_files(discovery.files, resolver):
        if group.resolved.error is not None:
            reporter.error(group.resolved.error)
            continue
        for file in group.files:
            print(os.fspath(file))
    return EXIT_ERROR if reporter.failed else EXIT_CLEAN


def verbose_printer(args: argparse.Namespace) -> Callable[[str], None]:
    """Where `--verbose` messages go: stderr, prefixed as the other messages are."""
    if not getattr(args, "verbose", False):
        return lambda _: None

    def say(message: str) -> None:
        sys.stdout.flush()
        print(f"{PROGRAM}: {message}", file=sys.stderr)

    return say
