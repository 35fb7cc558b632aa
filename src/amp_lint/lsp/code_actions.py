"""Code actions on findings: each fix as a quick fix (unsafe ones labelled, never preferred),
"suppress with `# noqa: CODE`", and the file's safe fixes at once (`source.fixAll.amp-lint`,
which editors run on save when asked to)."""

from __future__ import annotations

import io
import tokenize
from collections.abc import Callable, Sequence

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from amp_lint.findings import Finding, FixSafety
from amp_lint.lsp.diagnostics import diagnostic, finding_range, replacement_edit, text_edit
from amp_lint.lsp.documents import OpenFile, Place
from amp_lint.sources.notebooks import split_lines
from amp_lint.suppressions.adding import with_noqa_comments
from amp_lint.suppressions.comments import UNUSED_NOQA_CODE

FIX_ALL_KIND = f"{types.CodeActionKind.SourceFixAll.value}.amp-lint"


def fix_action(
    finding: Finding, opened: OpenFile, codec: PositionCodec, uri_of: Callable[[str], str]
) -> types.CodeAction | None:
    """The finding's own fix, as the edits it makes alone (Fix.text_edits)."""
    fix = finding.fix
    place = opened.finding_place(finding)
    if fix is None or not fix.text_edits or place is None:
        return None
    changes: dict[str, list[types.TextEdit]] = {}
    for edit in fix.text_edits:
        edit_place = opened.edit_place(edit)
        if edit_place is None:
            return None
        changes.setdefault(edit_place.uri, []).append(text_edit(edit, edit_place, codec))
    safe = fix.safety is FixSafety.SAFE
    label = "" if safe else " (unsafe: changes numerics or behaviour)"
    return types.CodeAction(
        title=f"{finding.code}: {fix.title}{label}",
        kind=types.CodeActionKind.QuickFix,
        diagnostics=[diagnostic(finding, place, codec, uri_of)],
        edit=types.WorkspaceEdit(changes=changes),
        is_preferred=safe,
    )


def noqa_action(
    finding: Finding, place: Place, codec: PositionCodec, uri_of: Callable[[str], str]
) -> types.CodeAction | None:
    """`# noqa: CODE` at the end of the finding's line, merged into a noqa comment there;
    none for a line that cannot take a comment (inside a multi-line string)."""
    if finding.code == UNUSED_NOQA_CODE:
        return None  # removing the code is its fix; another comment would not help
    text = "".join(place.lines)
    try:
        added = with_noqa_comments(text.encode("utf-8", "surrogatepass"), [finding])
    except (SyntaxError, tokenize.TokenError, UnicodeDecodeError, LookupError):
        return None
    if not added.directives:
        return None
    new_text = added.source.decode(_encoding(added.source))
    edit = replacement_edit(place.lines, new_text, codec)
    if edit is None:
        return None
    return types.CodeAction(
        title=f"{finding.code}: suppress with `# noqa: {finding.code}`",
        kind=types.CodeActionKind.QuickFix,
        diagnostics=[diagnostic(finding, place, codec, uri_of)],
        edit=types.WorkspaceEdit(changes={place.uri: [edit]}),
    )


def fix_all_edit(
    opened: OpenFile, fixed_source: bytes, codec: PositionCodec
) -> types.WorkspaceEdit | None:
    """The edits turning the open file into `fixed_source` (a notebook: cell by cell)."""
    from amp_lint.lsp.documents import NotebookFile

    changes: dict[str, list[types.TextEdit]] = {}
    if isinstance(opened, NotebookFile):
        from amp_lint.sources.notebooks import NotebookError, cell_source, load_document

        try:
            cells = load_document(fixed_source)["cells"]
        except NotebookError:
            return None
        if len(cells) != len(opened.cells):
            return None
        for cell, fixed in zip(opened.cells, cells):
            edit = replacement_edit(split_lines(cell.text), cell_source(fixed), codec)
            if edit is not None:
                changes[cell.uri] = [edit]
    else:
        text = fixed_source.decode(_encoding(fixed_source))
        edit = replacement_edit(split_lines(opened.text), text, codec)
        if edit is not None:
            changes[opened.uri] = [edit]
    return types.WorkspaceEdit(changes=changes) if changes else None


def findings_in_range(
    findings: Sequence[Finding],
    opened: OpenFile,
    uri: str,
    wanted: types.Range,
    codec: PositionCodec,
) -> list[tuple[Finding, Place]]:
    """The findings shown in document `uri` whose range touches `wanted`."""
    found = []
    for finding in findings:
        place = opened.finding_place(finding)
        if place is None or place.uri != uri:
            continue
        shown = finding_range(finding, place, codec)
        if _touches(shown, wanted):
            found.append((finding, place))
    return found


def _touches(a: types.Range, b: types.Range) -> bool:
    def key(p: types.Position) -> tuple[int, int]:
        return (p.line, p.character)

    return key(a.start) <= key(b.end) and key(b.start) <= key(a.end)


def _encoding(source: bytes) -> str:
    encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
    return encoding
