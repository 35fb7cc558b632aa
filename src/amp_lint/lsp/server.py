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
import logging
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.uris import from_fs_path, to_fs_path

from amp_lint import __version__
from amp_lint.files import LINTED_SUFFIXES
from amp_lint.lsp.code_actions import (
    FIX_ALL_KIND,
    findings_in_range,
    fix_action,
    fix_all_edit,
    noqa_action,
)
from amp_lint.lsp.diagnostics import diagnostic, finding_range
from amp_lint.lsp.documents import Cell, NotebookFile, OpenFile, Place, TextFile
from amp_lint.lsp.hover import hover_text
from amp_lint.lsp.workspace_projects import FileResult, WorkspaceProjects
from amp_lint.notebooks import is_notebook, split_lines

_log = logging.getLogger(__name__)
# Files whose change on disk changes what is linted, or how.
_WATCHED = ("**/*.py", "**/*.pyi", "**/*.ipynb", "**/pyproject.toml", "**/.gitignore")
_SETTINGS_FILES = ("pyproject.toml", ".gitignore")


@dataclass
class ServerSettings:
    debounce: float = 0.15  # seconds
    workspace_diagnostics: bool = False

    @classmethod
    def of(cls, options: object) -> ServerSettings:
        settings = cls()
        if not isinstance(options, dict):
            return settings
        debounce = options.get("debounceMs")
        if isinstance(debounce, (int, float)) and debounce >= 0:
            settings.debounce = debounce / 1000
        settings.workspace_diagnostics = options.get("diagnostics") == "workspace"
        return settings


class _Protocol(LanguageServerProtocol):
    """pygls answers a request whose params do not fit the protocol's types with nothing
    (it shows a message), which leaves the client waiting for ever: this answers it with
    the error."""

    _ANSWERED = object()

    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as error:
            if "id" not in data or "method" not in data:
                raise
            self._send_response(data["id"], error=error.to_response_error())
            return self._ANSWERED

    def handle_message(self, message: Any) -> None:
        if message is not self._ANSWERED:
            super().handle_message(message)


class AmpLintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "amp-lint",
            __version__,
            protocol_cls=_Protocol,
            notebook_document_sync=types.NotebookDocumentSyncOptions(
                notebook_selector=[
                    types.NotebookDocumentFilterWithCells(
                        cells=[types.NotebookCellLanguage(language="python")], notebook="*"
                    )
                ],
                save=True,
            ),
        )
        self.settings = ServerSettings()
        self.projects = WorkspaceProjects([], report=self.report)
        self.results: dict[str, FileResult] = {}
        self.published: dict[str, list[types.Diagnostic]] = {}
        # One lint at a time, off the event loop; the lint is CPU-bound Python.
        self.linter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="amp-lint")
        self.loaded = False  # the workspace's files are read (at `initialized`)
        self._reported: set[str] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._running: asyncio.Task[None] | None = None
        self._dirty = False

    # Messages to the user's log (the editor's output panel).

    def report(self, message: str) -> None:
        self.window_log_message(
            types.LogMessageParams(types.MessageType.Warning, f"amp-lint: {message}")
        )

    # Linting.

    def schedule(self, delay: float | None = None) -> None:
        """Lint after `delay` seconds (default: the debounce), unless asked again first."""
        self._dirty = True
        if self._timer is not None:
            self._timer.cancel()
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(
            self.settings.debounce if delay is None else delay, self._start
        )

    def _start(self) -> None:
        self._timer = None
        if self._running is None or self._running.done():
            self._running = asyncio.ensure_future(self._lint_while_dirty())

    async def _lint_while_dirty(self) -> None:
        if not self.loaded:
            return  # `initialized` lints once the files are read
        loop = asyncio.get_running_loop()
        while self._dirty:
            self._dirty = False
            self._sync_documents()
            snapshot = self.projects.snapshot()
            try:
                self.results = await loop.run_in_executor(self.linter, self.projects.lint, snapshot)
            except Exception as error:  # a bug must cost one run, not the server
                _log.exception("lint failed")
                self.report(f"internal error, please report it: {type(error).__name__}: {error}")
                continue
            self.publish()

    async def fixed_source(self, path: str) -> bytes | None:
        """The file with its safe fixes applied, as the open documents hold it."""
        self._sync_documents()
        snapshot = self.projects.snapshot()
        loop = asyncio.get_running_loop()
        results = await loop.run_in_executor(
            self.linter, lambda: self.projects.lint(snapshot, fix=path)
        )
        result = results.get(path)
        return result.fixed_source if result is not None else None

    # The editor's documents.

    def open_files(self) -> dict[str, OpenFile]:
        """Linted path -> the open text or notebook document showing it."""
        opened: dict[str, OpenFile] = {}
        workspace = self.workspace
        for uri, notebook in workspace.notebook_documents.items():
            path = _path(uri)
            if path is None:
                continue
            cells = []
            for cell in notebook.cells:
                document = workspace.get_text_document(cell.document)
                language = document.language_id or "python"
                cells.append(Cell(cell.document, cell.kind, language, document.source))
            opened[path] = NotebookFile(path, uri, tuple(cells))
        for uri, document in workspace.text_documents.items():
            path = _path(uri)
            if path is None or workspace.get_notebook_document(cell_uri=uri) is not None:
                continue
            if not path.endswith(LINTED_SUFFIXES) and document.language_id != "python":
                continue
            opened[path] = TextFile(path, uri, document.source)
        return opened

    def _sync_documents(self) -> None:
        opened = self.open_files()
        for path in list(self.projects.documents):
            if path not in opened:
                self.projects.close(path)
        for path, document in opened.items():
            self.projects.open(path, document.source())

    def opened_at(self, uri: str) -> OpenFile | None:
        """The open file a document (or a notebook cell) belongs to."""
        for opened in self.open_files().values():
            if uri in opened.uris:
                return opened
        return None

    # Diagnostics.

    def publish(self) -> None:
        """Send the diagnostics of every document whose diagnostics changed."""
        codec = self.workspace.position_codec
        current: dict[str, list[types.Diagnostic]] = {}
        opened = self.open_files()
        for path, view in opened.items():
            for uri in view.uris:
                current[uri] = []
            for finding in self._findings(path):
                place = view.finding_place(finding)
                if place is not None:
                    current[place.uri].append(diagnostic(finding, place, codec, _uri))
        if self.settings.workspace_diagnostics:
            for path, result in self.results.items():
                if path not in opened and result.findings:
                    current.update(self._closed_file_diagnostics(path, result))
        for uri in self.published.keys() - current.keys():
            current[uri] = []  # closed, or its findings are gone
        for uri, diagnostics in current.items():
            if self.published.get(uri) != diagnostics:
                self.text_document_publish_diagnostics(
                    types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics)
                )
        # Kept: what open documents show (empty too, so that it is not sent again) and what
        # other files show; a closed document's cleared entry is dropped.
        showing = {uri for view in opened.values() for uri in view.uris}
        self.published = {uri: found for uri, found in current.items() if found or uri in showing}

    def _findings(self, path: str) -> tuple[Any, ...]:
        result = self.results.get(path)
        if result is None:
            return ()
        for message in (result.error, result.notice):
            if message and message not in self._reported:
                self._reported.add(message)  # once, not after every keystroke
                self.report(message)
        return result.findings

    def _closed_file_diagnostics(
        self, path: str, result: FileResult
    ) -> dict[str, list[types.Diagnostic]]:
        if is_notebook(path):
            return {}  # cells have no URIs until the notebook is opened
        source = self.projects.disk.get(path)
        if source is None:
            return {}
        text = source.decode("utf-8", "replace")
        place = Place(_uri(path), tuple(split_lines(text)))
        codec = self.workspace.position_codec
        return {place.uri: [diagnostic(f, place, codec, _uri) for f in result.findings]}


SERVER = AmpLintServer()


@SERVER.feature(types.INITIALIZE)
def _initialize(server: AmpLintServer, params: types.InitializeParams) -> None:
    server.settings = ServerSettings.of(params.initialization_options)
    folders = [_path(folder.uri) for folder in params.workspace_folders or []]
    if not folders:
        root = params.root_uri or (from_fs_path(params.root_path) if params.root_path else None)
        folders = [_path(root) if root else os.getcwd()]
    server.projects.folders = [Path(folder) for folder in folders if folder]


@SERVER.feature(types.INITIALIZED)
async def _initialized(server: AmpLintServer, params: types.InitializedParams) -> None:
    await _watch_files(server)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(server.linter, server.projects.load_disk)
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
def _saved(server: AmpLintServer, params: types.DidSaveTextDocumentParams) -> None:
    path = _path(params.text_document.uri)
    if path is not None:
        server.projects.reread(path)
    server.schedule(0)


@SERVER.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
def _notebook_saved(server: AmpLintServer, params: types.DidSaveNotebookDocumentParams) -> None:
    path = _path(params.notebook_document.uri)
    if path is not None:
        server.projects.reread(path)
    server.schedule(0)


@SERVER.feature(types.TEXT_DOCUMENT_DID_CLOSE)
@SERVER.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
def _closed(server: AmpLintServer, params: object) -> None:
    server.schedule(0)


@SERVER.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
async def _files_changed(server: AmpLintServer, params: types.DidChangeWatchedFilesParams) -> None:
    paths = [path for change in params.changes if (path := _path(change.uri)) is not None]
    if any(os.path.basename(path) in _SETTINGS_FILES for path in paths):
        # Settings or ignores changed: which files are linted, and how, may have too.
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(server.linter, server.projects.load_disk)
    else:
        for path in paths:
            server.projects.reread(path)
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
    if opened is None or result is None:
        return None
    codec = server.workspace.position_codec
    only = params.context.only
    actions: list[types.CodeAction] = []
    if _wants(only, types.CodeActionKind.QuickFix):
        for finding, place in findings_in_range(result.findings, opened, uri, params.range, codec):
            for action in (
                fix_action(finding, opened, codec, _uri),
                noqa_action(finding, place, codec, _uri),
            ):
                if action is not None:
                    actions.append(action)
    safe = [f for f in result.findings if f.fix is not None and f.fix.safety.value == "safe"]
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
    server.linter.shutdown(wait=False, cancel_futures=True)


def _wants(only: Sequence[str] | None, kind: str) -> bool:
    """Whether a request limited to the kinds `only` asks for `kind` (kinds are
    hierarchical: `source.fixAll` covers `source.fixAll.amp-lint`)."""
    return only is None or any(kind == k or kind.startswith(f"{k}.") for k in only)


def _path(uri: str) -> str | None:
    if not uri.startswith("file:"):
        return None
    path = to_fs_path(uri)
    return os.path.normpath(os.path.abspath(path)) if path else None


def _uri(path: str) -> str:
    return from_fs_path(path) or path


def main() -> int:
    SERVER.start_io()
    return 0
