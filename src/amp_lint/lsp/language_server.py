"""The server's state and what it does between LSP messages: the workspace's projects,
debounced lints in one worker thread on snapshots taken on the event loop, and publishing
the diagnostics that changed. server.py connects it to the protocol's messages."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol

from amp_lint import __version__
from amp_lint.lsp.diagnostics import diagnostic
from amp_lint.lsp.documents import Cell, NotebookFile, OpenFile, Place, TextFile, path_of, uri_of
from amp_lint.lsp.workspace_projects import FileResult, WorkspaceProjects
from amp_lint.sources.files import LINTED_SUFFIXES
from amp_lint.sources.notebooks import is_notebook, split_lines

_log = logging.getLogger(__name__)


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
        # The version of each open document the last lint saw (diagnostics say which).
        self.linted_versions: dict[str, int | None] = {}
        self.published: dict[str, list[types.Diagnostic]] = {}
        # One lint at a time, off the event loop; the lint is CPU-bound Python.
        self.linter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="amp-lint")
        self.loaded = False  # the workspace's files are read (at `initialized`)
        self.loop: asyncio.AbstractEventLoop | None = None  # set at `initialize`
        self._reported: set[str] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._running: asyncio.Task[None] | None = None
        self._dirty = False

    # Messages to the user's log (the editor's output panel).

    def report(self, message: str) -> None:
        """Log `message`; callable from the worker thread (reading the workspace's files),
        whose messages are sent from the event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # not on the loop's thread
            if self.loop is not None:
                self.loop.call_soon_threadsafe(self.report, message)
            return
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

    def stop_linting(self) -> None:
        """At `shutdown`: no lint starts any more; one running finishes on its own."""
        self.loaded = False
        if self._timer is not None:
            self._timer.cancel()
        self.linter.shutdown(wait=False, cancel_futures=True)

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
            versions = self._document_versions()
            snapshot = self.projects.snapshot()
            try:
                self.results = await loop.run_in_executor(self.linter, self.projects.lint, snapshot)
            except Exception as error:  # a bug must cost one run, not the server
                _log.exception("lint failed")
                self.report(f"internal error, please report it: {type(error).__name__}: {error}")
                continue
            self.linted_versions = versions
            self.publish()

    def _document_versions(self) -> dict[str, int | None]:
        return {uri: doc.version for uri, doc in self.workspace.text_documents.items()}

    def is_current(self, opened: OpenFile) -> bool:
        """Whether the last lint saw the open file as the editor holds it now: edits made
        from older results could land on the wrong text."""
        now = self._document_versions()
        return all(self.linted_versions.get(uri) == now.get(uri) for uri in opened.uris)

    async def read_workspace(self) -> None:
        """Discover and read the workspace's files again, in the worker thread (one lint
        running finishes first)."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self.linter, self.projects.load_disk)

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
            path = path_of(uri)
            if path is None:
                continue
            cells = []
            for cell in notebook.cells:
                document = workspace.get_text_document(cell.document)
                language = document.language_id or "python"
                cells.append(Cell(cell.document, cell.kind, language, document.source))
            opened[path] = NotebookFile(path, uri, tuple(cells))
        for uri, document in workspace.text_documents.items():
            path = path_of(uri)
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
            if any(uri not in self.linted_versions for uri in view.uris):
                # Opened (or a cell added) after the lint started: the next lint, already
                # scheduled, shows it; what it showed stays until then.
                current.update((u, self.published[u]) for u in view.uris if u in self.published)
                continue
            for uri in view.uris:
                current[uri] = []
            for finding in self._findings(path):
                place = view.finding_place(finding)
                if place is not None:
                    current[place.uri].append(diagnostic(finding, place, codec, uri_of))
        if self.settings.workspace_diagnostics:
            for path, result in self.results.items():
                if path not in opened and result.findings:
                    current.update(self._closed_file_diagnostics(path, result))
        for uri in self.published.keys() - current.keys():
            current[uri] = []  # closed, or its findings are gone
        for uri, diagnostics in current.items():
            if self.published.get(uri) != diagnostics:
                self.text_document_publish_diagnostics(
                    types.PublishDiagnosticsParams(
                        uri=uri, diagnostics=diagnostics, version=self.linted_versions.get(uri)
                    )
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
        place = Place(uri_of(path), tuple(split_lines(text)))
        codec = self.workspace.position_codec
        return {place.uri: [diagnostic(f, place, codec, uri_of) for f in result.findings]}
