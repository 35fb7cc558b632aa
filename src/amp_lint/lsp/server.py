"""`amp-lint server`: diagnostics, quick fixes and hovers over stdio (pygls).

The workspace is linted as a project (workspace_projects.py): on open and save at once, on
change after a pause (`debounceMs`, default 150), on a change to watched files. Lints run
one at a time in a worker thread, each on a snapshot of the open documents taken on the
event loop; edits arriving meanwhile start one more run when it ends. After each run every
open document whose diagnostics changed gets them, positioned in the client's units.

Initialization options (all optional):
  debounceMs      the pause after a change before linting, in milliseconds
  diagnostics     "open" (default): diagnostics for open documents; "workspace": for every
                  linted file with findings too, as `amp-lint check` reports them
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path

from lsprotocol import types
from pygls.uris import from_fs_path

from amp_lint.findings import FixSafety
from amp_lint.lsp.code_actions import (
    FIX_ALL_KIND,
    findings_in_range,
    fix_action,
    fix_all_edit,
    noqa_action,
)
from amp_lint.lsp.diagnostics import finding_range
from amp_lint.lsp.documents import path_of, uri_of
from amp_lint.lsp.hover import hover_text
from amp_lint.lsp.language_server import AmpLintServer, ServerSettings

# Files whose change on disk changes what is linted, or how.
_WATCHED = ("**/*.py", "**/*.pyi", "**/*.ipynb", "**/pyproject.toml", "**/.gitignore")
_SETTINGS_FILES = ("pyproject.toml", ".gitignore")

SERVER = AmpLintServer()


@SERVER.feature(types.INITIALIZE)
def _initialize(server: AmpLintServer, params: types.InitializeParams) -> None:
    server.loop = asyncio.get_running_loop()
    server.settings = ServerSettings.of(params.initialization_options)
    folders = [path_of(folder.uri) for folder in params.workspace_folders or []]
    if not folders:
        root = params.root_uri or (from_fs_path(params.root_path) if params.root_path else None)
        folders = [path_of(root) if root else os.getcwd()]
    server.projects.folders = [Path(folder) for folder in folders if folder]


@SERVER.feature(types.INITIALIZED)
async def _initialized(server: AmpLintServer, params: types.InitializedParams) -> None:
    await _watch_files(server)
    await server.read_workspace()
    server.loaded = True
    server.schedule(0)


async def _watch_files(server: AmpLintServer) -> None:
    capabilities = server.client_capabilities.workspace
    watching = capabilities and capabilities.did_change_watched_files
    if not (watching and watching.dynamic_registration):
        return
    options = types.DidChangeWatchedFilesRegistrationOptions(
        watchers=[types.FileSystemWatcher(glob_pattern=pattern) for pattern in _WATCHED]
    )
    registration = types.Registration(
        id="amp-lint-watched-files",
        method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
        register_options=options,
    )
    try:
        await server.client_register_capability_async(types.RegistrationParams([registration]))
    except Exception as error:  # the client said no: saves still re-read files
        server.report(f"cannot watch files: {error}")


@SERVER.feature(types.TEXT_DOCUMENT_DID_OPEN)
@SERVER.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
def _opened(server: AmpLintServer, params: object) -> None:
    server.schedule(0)


@SERVER.feature(types.TEXT_DOCUMENT_DID_CHANGE)
@SERVER.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
def _changed(server: AmpLintServer, params: object) -> None:
    server.schedule()


@SERVER.feature(types.TEXT_DOCUMENT_DID_SAVE)
@SERVER.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
def _saved(
    server: AmpLintServer,
    params: types.DidSaveTextDocumentParams | types.DidSaveNotebookDocumentParams,
) -> None:
    if isinstance(params, types.DidSaveTextDocumentParams):
        path = path_of(params.text_document.uri)
    else:
        path = path_of(params.notebook_document.uri)
    if path is not None:
        server.projects.reread(path)  # the disk now holds what the editor saved
    server.schedule(0)


@SERVER.feature(types.TEXT_DOCUMENT_DID_CLOSE)
@SERVER.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
def _closed(server: AmpLintServer, params: object) -> None:
    server.schedule(0)


@SERVER.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
async def _files_changed(server: AmpLintServer, params: types.DidChangeWatchedFilesParams) -> None:
    paths = [path for change in params.changes if (path := path_of(change.uri)) is not None]
    if any(os.path.basename(path) in _SETTINGS_FILES for path in paths):
        # Settings or ignores changed: which files are linted, and how, may have too.
        await server.read_workspace()
    else:
        for path in paths:
            server.projects.reread(path)
    server.schedule(0)


@SERVER.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
async def _folders_changed(
    server: AmpLintServer, params: types.DidChangeWorkspaceFoldersParams
) -> None:
    """Folders added to or removed from the workspace: its files are read again."""
    removed = {path_of(folder.uri) for folder in params.event.removed}
    kept = [folder for folder in server.projects.folders if os.fspath(folder) not in removed]
    for folder in params.event.added:
        path = path_of(folder.uri)
        if path is not None and Path(path) not in kept:
            kept.append(Path(path))
    server.projects.folders = kept
    await server.read_workspace()
    server.schedule(0)


@SERVER.feature(
    types.TEXT_DOCUMENT_CODE_ACTION,
    types.CodeActionOptions(
        code_action_kinds=[
            types.CodeActionKind.QuickFix,
            types.CodeActionKind.SourceFixAll,
            FIX_ALL_KIND,
        ]
    ),
)
async def _code_actions(
    server: AmpLintServer, params: types.CodeActionParams
) -> list[types.CodeAction] | None:
    uri = params.text_document.uri
    opened = server.opened_at(uri)
    result = server.results.get(opened.path) if opened is not None else None
    # Edits made from findings of an older text could land on the wrong code: none until
    # the pending lint has caught up (it is scheduled by the change).
    if opened is None or result is None or not server.is_current(opened):
        return None
    codec = server.workspace.position_codec
    only = params.context.only
    actions: list[types.CodeAction] = []
    if _wants(only, types.CodeActionKind.QuickFix):
        for finding, place in findings_in_range(result.findings, opened, uri, params.range, codec):
            for action in (
                fix_action(finding, opened, codec, uri_of),
                noqa_action(finding, place, codec, uri_of),
            ):
                if action is not None:
                    actions.append(action)
    safe = [f for f in result.findings if f.fix is not None and f.fix.safety is FixSafety.SAFE]
    # Computing it runs the fixes: not for the requests editors make as the cursor moves.
    automatic = params.context.trigger_kind == types.CodeActionTriggerKind.Automatic
    if safe and _wants(only, FIX_ALL_KIND) and not (only is None and automatic):
        fixed = await server.fixed_source(opened.path)
        edit = fix_all_edit(opened, fixed, codec) if fixed is not None else None
        if edit is not None:
            actions.append(
                types.CodeAction(
                    title="amp-lint: fix all safe fixes",
                    kind=FIX_ALL_KIND,
                    edit=edit,
                )
            )
    return actions


@SERVER.feature(types.TEXT_DOCUMENT_HOVER)
def _hover(server: AmpLintServer, params: types.HoverParams) -> types.Hover | None:
    uri = params.text_document.uri
    opened = server.opened_at(uri)
    result = server.results.get(opened.path) if opened is not None else None
    if opened is None or result is None:
        return None
    codec = server.workspace.position_codec
    point = types.Range(params.position, params.position)
    found = [f for f, _ in findings_in_range(result.findings, opened, uri, point, codec)]
    if not found:
        return None
    place = opened.finding_place(found[0])
    assert place is not None  # findings_in_range placed it
    return types.Hover(
        contents=types.MarkupContent(types.MarkupKind.Markdown, hover_text(found)),
        range=finding_range(found[0], place, codec),
    )


@SERVER.feature(types.SHUTDOWN)
def _shutdown(server: AmpLintServer, params: object) -> None:
    server.stop_linting()


def _wants(only: Sequence[str] | None, kind: str) -> bool:
    """Whether a request limited to the kinds `only` asks for `kind` (kinds are
    hierarchical: `source.fixAll` covers `source.fixAll.amp-lint`)."""
    return only is None or any(kind == k or kind.startswith(f"{k}.") for k in only)


def main() -> int:
    SERVER.start_io()
    return 0
