"""`amp-lint clean [PATH]`: remove the result cache of the project at PATH, as `ruff clean`
does. The cache is the one `amp-lint check` run there would use: `--cache-dir`, else
AMP_LINT_CACHE_DIR, else `cache-dir` of the nearest `[tool.amp-lint]`, else `.amp_lint_cache`
beside the config. A directory without the CACHEDIR.TAG amp-lint writes is refused, and one
that holds other things keeps them (cache.remove_cache).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from amp_lint.cli.reporting import EXIT_CLEAN, EXIT_ERROR, Reporter
from amp_lint.run.cache import DEFAULT_DIRECTORY, MARKER, is_amp_lint_cache, remove_cache
from amp_lint.run.project_cache import default_cache_directory
from amp_lint.settings.config import load_config
from amp_lint.settings.errors import ConfigError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "path",
        nargs="?",
        default=".",
        metavar="PATH",
        help="a directory (or file) of the project whose cache to remove (default: .)",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        metavar="DIR",
        help=f"remove this cache directory instead (default: {DEFAULT_DIRECTORY} beside the "
        "config, or AMP_LINT_CACHE_DIR)",
    )
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="read cache-dir from FILE's [tool.amp-lint] instead of the nearest pyproject.toml",
    )


def run(args: argparse.Namespace) -> int:
    reporter = Reporter()
    start = Path(args.path)
    if not start.exists():
        reporter.error(f"{start}: no such file or directory")
        return EXIT_ERROR
    try:
        directory = cache_directory(start if start.is_dir() else start.parent, args)
    except ConfigError as error:
        reporter.error(str(error))
        return EXIT_ERROR
    if not directory.exists():
        print(f"No cache at {directory}")
        return EXIT_CLEAN
    if not is_amp_lint_cache(directory):
        reporter.error(
            f"{directory}: not an amp-lint cache (it has no {MARKER} that amp-lint "
            "wrote); not removed"
        )
        return EXIT_ERROR
    try:
        removed = remove_cache(directory)
    except OSError as error:
        reporter.error(f"{directory}: cannot remove: {error.strerror or error}")
        return EXIT_ERROR
    if removed == [directory]:
        print(f"Removed cache at {directory}")
    else:
        print(f"Removed amp-lint's cache entries from {directory} (its other files are kept)")
    return EXIT_CLEAN


def cache_directory(start: Path, args: argparse.Namespace) -> Path:
    """Where `amp-lint check` run in `start` keeps its cache."""
    if args.cache_dir is not None:
        return Path(os.path.abspath(args.cache_dir))
    if os.environ.get("AMP_LINT_CACHE_DIR"):
        return Path(os.path.abspath(os.environ["AMP_LINT_CACHE_DIR"]))
    return default_cache_directory(load_config(start.resolve(), config_file=args.config))
