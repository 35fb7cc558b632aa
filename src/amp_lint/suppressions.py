"""`# noqa` and `# noqa: AMP001,AMP003` comments, with flake8's syntax."""

from __future__ import annotations

import re

_NOQA = re.compile(
    r"#\s*noqa"
    r"(?::[\s]?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?",
    re.IGNORECASE,
)
_CODE = re.compile(r"[A-Z]+[0-9]+", re.IGNORECASE)
# Python's line breaks; str.splitlines() also breaks at form feeds and other separators
# that Python reads as whitespace, which would shift every later line number.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class NoqaMap:
    """Which lines carry a noqa comment, and for which codes (None means all codes)."""

    def __init__(self, text: str) -> None:
        self._by_line: dict[int, frozenset[str] | None] = {}
        for number, line in enumerate(_LINE_BREAK.split(text), start=1):
            if "noqa" not in line.lower() or "#" not in line:
                continue
            match = _NOQA.search(line)
            if match is None:
                continue
            codes = match.group("codes")
            self._by_line[number] = (
                frozenset(code.upper() for code in _CODE.findall(codes)) if codes else None
            )

    def suppresses(self, line: int, code: str) -> bool:
        if line not in self._by_line:
            return False
        codes = self._by_line[line]
        return codes is None or any(code.startswith(c) for c in codes)
