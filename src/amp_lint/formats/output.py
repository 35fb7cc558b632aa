"""Which function renders each `--output-format`, and writing a report to `--output-file`."""

from __future__ import annotations

import argparse
import importlib
import os
import stat
import tempfile
from pathlib import Path

from amp_lint.formats import ALIASES, OUTPUT_FORMATS, TEXT_EDIT_FORMATS, canonical_format
from amp_lint.formats.listing import Listing
from amp_lint.reading import file_kind
from amp_lint.settings.config import Config
from amp_lint.settings.errors import ConfigError
from amp_lint.sources.fix_writing import WriteRefused, write_atomically

# Format -> (module in amp_lint.formats, its function), imported only when asked for: a
# pre-commit run prints the concise format and should not pay for XML or SARIF.
RENDERERS: dict[str, tuple[str, str]] = {
    "concise": ("text", "render"),
    "full": ("full", "render"),
    "json": ("json", "render"),
    "json-lines": ("json", "render_lines"),
    "sarif": ("sarif", "render"),
    "github": ("github", "render"),
    "gitlab": ("gitlab", "render"),
    "junit": ("junit", "render"),
}


def render(output_format: str, listing: Listing) -> str:
    module_name, function = RENDERERS[canonical_format(output_format)]
    module = importlib.import_module(f"amp_lint.formats.{module_name}")
    report: str = getattr(module, function)(listing)
    return report


def write_report(path: Path, report: str) -> None:
    """Write the report whole or not at all, so that a CI step reading the file never sees
    half a report. A new file is written beside `path` and renamed over it (missing
    directories are created). An existing path must be a regular file, written through a
    symbolic link to it, keeping its mode (fix_writing.write_atomically): a device such as
    /dev/null, a FIFO, a socket or a directory is refused, not replaced (as root, a rename
    over /dev/full made it a regular file), and so is a read-only file. Raises OSError."""
    data = report.encode("utf-8", "surrogateescape")
    target = path.resolve()  # through links, a dangling one included
    try:
        status = os.stat(target)
    except FileNotFoundError:
        _write_new(target, data)
        return
    if not stat.S_ISREG(status.st_mode):
        raise WriteRefused(f"not a regular file ({file_kind(status.st_mode)}); not replaced")
    write_atomically(target, data)


def _write_new(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"
    )
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
        os.chmod(temporary, 0o666 & ~_umask())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _umask() -> int:
    """The process's umask (mkstemp creates files readable by the owner only; a report is an
    ordinary file and gets the permissions any other would)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


OUTPUT_FORMAT_VARIABLE = "AMP_LINT_OUTPUT_FORMAT"
DEFAULT_FORMAT = "concise"


def choose_output(args: argparse.Namespace, config: Config) -> None:
    """Settle `args.output_format` (a canonical name) and `args.output_file` (a Path or None):
    the command line first, then AMP_LINT_OUTPUT_FORMAT, then `[tool.amp-lint]`
    `output-format` / `output-file` (relative to the config's directory). Raises ConfigError
    for an unknown format in the environment."""
    chosen = args.output_format or os.environ.get(OUTPUT_FORMAT_VARIABLE) or config.output_format
    if args.output_format is None and os.environ.get(OUTPUT_FORMAT_VARIABLE):
        allowed = (*OUTPUT_FORMATS, *ALIASES)
        if chosen not in allowed:
            raise ConfigError(
                f"{OUTPUT_FORMAT_VARIABLE}: {chosen!r} is not an output format "
                f"(one of {', '.join(allowed)})"
            )
    args.output_format = canonical_format(chosen or DEFAULT_FORMAT)
    if args.output_file is None and config.output_file:
        args.output_file = Path(config.root) / config.output_file


def needs_text_edits(args: argparse.Namespace) -> bool:
    """Whether the run must give fixes their text edits: the format shows them."""
    return args.output_format in TEXT_EDIT_FORMATS and not args.statistics
