"""A file's bytes with comments and docstrings blanked: what the code itself says.

A word test over raw bytes (does the file mention autocast?) is fooled by the commonest way
authors switch mixed precision off: they comment the region out and keep the rest
(`# with torch.cuda.amp.autocast():`). Blanking keeps every other byte in place, so offsets
and substring tests over the result still work; other string literals stay (a config key or
a flag named `"autocast"` is code that may enter it)."""

from __future__ import annotations

import io
import tokenize
from functools import lru_cache

# Tokens after which a string literal starts a statement (a docstring when it is alone).
_STATEMENT_START = frozenset(
    [tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING]
)


def mentions_in_code(text: bytes, words: tuple[bytes, ...]) -> bool:
    """Whether the code of `text` (lowered, comments and docstrings aside) contains one of
    `words`; the raw bytes are tested first, and are the answer when they cannot be
    tokenized."""
    lowered = text.lower()
    if not any(word in lowered for word in words):
        return False
    code = code_only(text).lower()
    return any(word in code for word in words)


@lru_cache(maxsize=64)
def code_only(text: bytes) -> bytes:
    """`text` with comments and docstrings (a string literal alone in a statement) replaced
    by spaces, line breaks kept; `text` itself when it does not tokenize."""
    try:
        spans = list(_blanked_spans(text))
    except (tokenize.TokenError, SyntaxError, ValueError):
        return text
    if not spans:
        return text
    line_starts = _line_starts(text)
    blanked = bytearray(text)
    for (start_row, start_col), (end_row, end_col) in spans:
        start = _offset(text, line_starts, start_row, start_col)
        end = _offset(text, line_starts, end_row, end_col)
        blanked[start:end] = bytes(b if b in b"\r\n" else 32 for b in blanked[start:end])
    return bytes(blanked)


Span = tuple[tuple[int, int], tuple[int, int]]


def _blanked_spans(text: bytes) -> list[Span]:
    spans: list[Span] = []
    previous = tokenize.ENCODING
    pending: list[Span] = []  # the strings of a statement that so far holds only strings
    for token in tokenize.tokenize(io.BytesIO(text).readline):
        if token.type == tokenize.COMMENT:
            spans.append((token.start, token.end))
            continue
        if token.type == tokenize.STRING and (previous in _STATEMENT_START or pending):
            pending.append((token.start, token.end))
        elif token.type == tokenize.NEWLINE and pending:
            spans.extend(pending)
            pending = []
        elif token.type != tokenize.NL:
            pending = []
        if token.type != tokenize.NL or not pending:
            previous = token.type
    return spans


def _line_starts(text: bytes) -> list[int]:
    starts = [0, 0]  # rows count from 1
    starts.extend(i + 1 for i, byte in enumerate(text) if byte == 10)
    return starts


def _offset(text: bytes, line_starts: list[int], row: int, column: int) -> int:
    """A token position's byte offset: tokenize counts columns in characters of the
    decoded line."""
    start = line_starts[row] if row < len(line_starts) else len(text)
    end = text.find(b"\n", start)
    line = text[start : end if end >= 0 else len(text)]
    return start + len(line.decode("utf-8", errors="replace")[:column].encode("utf-8"))
