"""What every output format is given: the findings, in order, whether unsafe fixes count as
fixable, and the text of the files they are in (for the formats that show or hash code)."""

from __future__ import annotations

import io
import tokenize
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from amp_lint.findings import Finding
from amp_lint.fixes.text_edits import split_lines
from amp_lint.sources.files import read_source


class SourceTexts:
    """The lines of the linted files, decoded as Python decodes them: from the bytes the run
    read where it has them, else read again (a cached run keeps no sources)."""

    def __init__(self, known: Mapping[str, bytes] | None = None) -> None:
        self._known = dict(known or {})
        self._lines: dict[str, list[str] | None] = {}

    def lines(self, path: str) -> list[str] | None:
        """The file's lines without their line breaks; None when it cannot be read."""
        if path not in self._lines:
            self._lines[path] = self._read(path)
        return self._lines[path]

    def line(self, path: str, number: int) -> str:
        """Line `number` (1-based), "" past the end or when the file cannot be read."""
        lines = self.lines(path) or []
        return lines[number - 1] if 0 < number <= len(lines) else ""

    def _read(self, path: str) -> list[str] | None:
        data = self._known.get(path)
        if data is None:
            try:
                data = read_source(path)
            except OSError:
                return None
        text = decode(data)
        return [line.rstrip("\r\n") for line in split_lines(text)]


def decode(data: bytes) -> str:
    """The text of Python source bytes: its coding cookie or BOM decides, UTF-8 otherwise."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:
        encoding = "utf-8"
    try:
        text = data.decode(encoding, errors="replace")
    except LookupError:
        text = data.decode("utf-8", errors="replace")
    return text.removeprefix("\ufeff")


@dataclass
class Listing:
    findings: list[Finding]
    unsafe_fixes: bool = False  # `--unsafe-fixes`: unsafe fixes are shown as applicable too
    sources: SourceTexts = field(default_factory=SourceTexts)
    # (path, one-line message) of each file that could not be analysed; stderr names them
    # too, the formats for CI systems report them as errors where they have a place for it.
    errors: list[tuple[str, str]] = field(default_factory=list)

    @classmethod
    def of(
        cls,
        findings: Iterable[Finding],
        *,
        unsafe_fixes: bool = False,
        sources: Mapping[str, bytes] | None = None,
        errors: Iterable[tuple[str, str]] = (),
    ) -> Listing:
        ordered = sorted(findings, key=lambda f: f.sort_key)
        return cls(ordered, unsafe_fixes, SourceTexts(sources), sorted(errors))
