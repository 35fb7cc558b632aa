"""Findings as LSP diagnostics and text edits, positioned in the client's units.

A finding's line is 1-based and its column counts characters (code points), as in
`amp-lint check`; LSP positions are 0-based and count UTF-16 code units unless the client
agreed on another encoding, so each is converted against the line's text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from amp_lint.findings import Finding, FixSafety, TextEdit
from amp_lint.formats import rule_url
from amp_lint.lsp.documents import Place
from amp_lint.sources.notebooks import split_lines

SOURCE = "amp-lint"
# Rules about code that still works but should go: shown struck through or faded.
_TAGS = {
    "AMP401": [types.DiagnosticTag.Deprecated],  # deprecated torch.cuda.amp APIs
    "AMP900": [types.DiagnosticTag.Unnecessary],  # a noqa code that suppresses nothing
}


def position(place: Place, codec: PositionCodec, line: int, column: int) -> types.Position:
    """0-based `line` and a column in characters, in the client's units."""
    return codec.position_to_client_units(list(place.lines), types.Position(line, column))


def finding_range(finding: Finding, place: Place, codec: PositionCodec) -> types.Range:
    start = position(place, codec, finding.line - 1, finding.column)
    if finding.end_line >= finding.line and finding.end_line > 0:
        end = position(place, codec, finding.end_line - 1, finding.end_column)
    else:  # no end known: to the end of the line
        text = place.lines[finding.line - 1] if finding.line <= len(place.lines) else ""
        end = position(place, codec, finding.line - 1, len(text.rstrip("\r\n")))
    return types.Range(start, end)


def diagnostic(
    finding: Finding,
    place: Place,
    codec: PositionCodec,
    uri_of: Callable[[str], str],
) -> types.Diagnostic:
    """The finding as `amp-lint check` reports it: its code, its message, its rule's page,
    and the calls from the autocast region to it as related locations."""
    related = [
        types.DiagnosticRelatedInformation(
            types.Location(uri_of(path), _line_range(line)),
            "called under autocast here" if number == 0 else "which calls this",
        )
        for number, (path, line) in enumerate(finding.via)
    ]
    return types.Diagnostic(
        range=finding_range(finding, place, codec),
        message=finding.message,
        severity=types.DiagnosticSeverity.Warning,
        code=finding.code,
        code_description=types.CodeDescription(href=rule_url(finding.code, finding.name)),
        source=SOURCE,
        tags=_TAGS.get(finding.code),
        related_information=related or None,
        data={"fix": _fix_kind(finding)},
    )


def text_edit(edit: TextEdit, place: Place, codec: PositionCodec) -> types.TextEdit:
    """A fix's edit (1-based lines and columns, the end exclusive) as an LSP edit."""
    start = position(place, codec, edit.line - 1, edit.column - 1)
    end = position(place, codec, edit.end_line - 1, edit.end_column - 1)
    return types.TextEdit(types.Range(start, end), edit.content)


def replacement_edit(old: Sequence[str], new: str, codec: PositionCodec) -> types.TextEdit | None:
    """One edit turning the lines `old` into the text `new`: the lines between their common
    first and last lines replaced, so that the editor keeps its cursor and folds outside
    them; None when nothing changes."""
    new_lines = split_lines(new)
    if list(old) == new_lines:
        return None
    head = 0
    while head < min(len(old), len(new_lines)) and old[head] == new_lines[head]:
        head += 1
    tail = 0
    while (
        tail < min(len(old), len(new_lines)) - head
        and old[len(old) - 1 - tail] == new_lines[len(new_lines) - 1 - tail]
    ):
        tail += 1
    # Whole lines: positions at line starts need no conversion between encodings.
    start = types.Position(head, 0)
    end = types.Position(len(old) - tail, 0)
    content = "".join(new_lines[head : len(new_lines) - tail])
    if len(old) - tail == len(old) and old and not old[-1].endswith(("\n", "\r")):
        # The replaced part runs to the end of a text without a final line break: the
        # position after its last character closes it.
        end = types.Position(len(old) - 1, codec.client_num_units(old[-1]))
    return types.TextEdit(types.Range(start, end), content)


def _line_range(line: int) -> types.Range:
    start = types.Position(max(line - 1, 0), 0)
    return types.Range(start, start)


def _fix_kind(finding: Finding) -> str | None:
    if finding.fix is None:
        return None
    return "safe" if finding.fix.safety is FixSafety.SAFE else "unsafe"
