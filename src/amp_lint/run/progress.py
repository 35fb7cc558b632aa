"""Progress on stderr for runs long enough to need it: files done out of files to analyse, and
the round, on one line rewritten in place. Nothing is shown before the run has taken
`delay` seconds (most runs end sooner), nor when stderr is not a terminal or with --quiet;
the line is erased before the findings are printed."""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO

# Seconds before the first line; AMP_LINT_PROGRESS_AFTER overrides it (the tests use 0).
DEFAULT_DELAY = 2.0
# At most this many redraws a second: a terminal is slow to write to.
_REDRAW_INTERVAL = 0.1


class Progress:
    def __init__(self, stream: TextIO | None = None, delay: float | None = None) -> None:
        self.stream = stream
        self.delay = delay if delay is not None else _configured_delay()
        self.started = time.monotonic()
        self.drawn_at = 0.0
        self.shown = False
        self.label = ""
        self.done = 0
        self.total = 0

    @classmethod
    def for_terminal(cls, quiet: bool) -> Progress:
        """Drawn on stderr when it is a terminal and the user did not ask for quiet."""
        return cls(None if quiet or not sys.stderr.isatty() else sys.stderr)

    def phase(self, label: str, total: int) -> None:
        self.label, self.done, self.total = label, 0, total
        self._draw(force=True)

    def collected(self, count: int) -> None:
        """`count` of this phase's files are done (it may go back: work started again)."""
        went_back = count < self.done
        self.done = count
        self._draw(force=went_back or self.done == self.total)

    def clear(self) -> None:
        if self.stream is not None and self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False

    def _draw(self, *, force: bool) -> None:
        if self.stream is None or self.total == 0:
            return
        now = time.monotonic()
        if now - self.started < self.delay:
            return
        if not force and now - self.drawn_at < _REDRAW_INTERVAL:
            return
        self.drawn_at = now
        self.shown = True
        self.stream.write(f"\r\x1b[Kamp-lint: {self.label}: {self.done}/{self.total} files")
        self.stream.flush()


def _configured_delay() -> float:
    try:
        return float(os.environ.get("AMP_LINT_PROGRESS_AFTER", DEFAULT_DELAY))
    except ValueError:
        return DEFAULT_DELAY
