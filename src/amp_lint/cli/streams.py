"""What the process was given before any argument is read: its standard streams (closed, or
something that never ends) and a first word that looks like a mistyped command. Each gets one
line and exit status 2, never a traceback or a hang, as ruff answers them."""

from __future__ import annotations

import difflib
import io
import os
import sys
from collections.abc import Sequence

from amp_lint.cli.reporting import EXIT_ERROR, PROGRAM
from amp_lint.reading import read_stream
from amp_lint.sources.files import MAX_SOURCE_BYTES

SUBCOMMANDS = ("check", "rules", "rule", "verify", "clean", "server")


def closed_streams() -> int:
    """EXIT_ERROR, said on standard error if it is open, when standard output is closed
    (`amp-lint check >&-`): findings would have nowhere to go. 0 when both are usable."""
    if sys.stderr is None:
        # Errors are still worth an exit status: write them nowhere.
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
    if sys.stdout is None:
        print(f"{PROGRAM}: error: standard output is closed", file=sys.stderr)
        return EXIT_ERROR
    return 0


def read_standard_input() -> bytes:
    """The bytes of standard input (`-`), at most as many as a source file may have.

    Raises OSError: closed, unreadable (a directory), or past the bound (`< /dev/zero`)."""
    if sys.stdin is None:
        raise OSError("closed")
    return read_stream(sys.stdin.buffer, MAX_SOURCE_BYTES)


def unknown_command(arguments: Sequence[str]) -> bool:
    """`amp-lint chek src/`: a first word that is no path, no option and no subcommand but
    close to one is a typo, not a path to lint (said on standard error)."""
    if not arguments:
        return False
    word = arguments[0]
    if word in SUBCOMMANDS or word.startswith("-") or os.path.lexists(word):
        return False
    if os.sep in word or "." in word:
        return False  # a path that does not exist: `check` says so and lints the rest
    close = difflib.get_close_matches(word, SUBCOMMANDS, n=1, cutoff=0.6)
    if not close:
        return False
    print(
        f"{PROGRAM}: error: unknown command `{word}` (did you mean `{close[0]}`?); "
        f"`{PROGRAM} --help` lists the commands",
        file=sys.stderr,
    )
    return True


def print_file_names_as_bytes() -> None:
    """A file name that is not UTF-8 is printed as the bytes it has on disk (as ls and ruff
    print it) instead of failing the output with UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="surrogateescape")
