"""`amp-lint server` driven over stdio by a real LSP client (pytest-lsp, built on pygls):
the process the editor would start, the messages it would send."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pytest_lsp")  # Python 3.10 and later

import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "amp_lint", "server"])
TIMEOUT = 60  # seconds: a cold start parses the project; CI machines are slow and shared

TRAIN = """\
    import torch

    from model import normalise


    def step(x):
        with torch.autocast("cuda"):
            h = torch.mm(x, x)
            return normalise(h)


    def legacy(x):
        with torch.cuda.amp.autocast():
            return x
"""
MODEL = """\
    def normalise(h):
        return h / (h.std(0) + 1e-8)
"""


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient) -> AsyncIterator[None]:
    """A server process per test, initialised by the test (with its own workspace), shut
    down and exited after it: the test fails if the server does not exit cleanly."""
    yield
    await lsp_client.shutdown_session()


def write_project(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


def capabilities(notebooks: bool = False) -> types.ClientCapabilities:
    return types.ClientCapabilities(
        general=types.GeneralClientCapabilities(
            position_encodings=[types.PositionEncodingKind.Utf16]
        ),
        text_document=types.TextDocumentClientCapabilities(
            publish_diagnostics=types.PublishDiagnosticsClientCapabilities(
                related_information=True, code_description_support=True
            ),
            code_action=types.CodeActionClientCapabilities(
                code_action_literal_support=types.ClientCodeActionLiteralOptions(
                    code_action_kind=types.ClientCodeActionKindOptions(
                        value_set=[
                            types.CodeActionKind.QuickFix,
                            types.CodeActionKind.SourceFixAll,
                        ]
                    )
                )
            ),
            hover=types.HoverClientCapabilities(content_format=[types.MarkupKind.Markdown]),
        ),
        notebook_document=types.NotebookDocumentClientCapabilities(
            synchronization=types.NotebookDocumentSyncClientCapabilities()
        )
        if notebooks
        else None,
    )


async def start(client: LanguageClient, root: Path, **options: Any) -> types.InitializeResult:
    params = types.InitializeParams(
        capabilities=capabilities(notebooks=options.pop("notebooks", False)),
        workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
        root_uri=root.as_uri(),
        initialization_options={"debounceMs": 20, **options},
    )
    return await client.initialize_session(params)


def open_file(client: LanguageClient, path: Path, version: int = 1) -> str:
    uri = path.as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            types.TextDocumentItem(uri, "python", version, path.read_text(encoding="utf-8"))
        )
    )
    return uri


def replace_text(client: LanguageClient, uri: str, text: str, version: int) -> None:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(version=version, uri=uri),
            [types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


async def diagnostics_until(
    client: LanguageClient,
    uri: str,
    done: Callable[[Sequence[types.Diagnostic]], bool],
) -> Sequence[types.Diagnostic]:
    """The document's diagnostics once `done` holds for them (failing after TIMEOUT)."""

    async def wait() -> Sequence[types.Diagnostic]:
        while uri not in client.diagnostics or not done(client.diagnostics[uri]):
            await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        return client.diagnostics[uri]

    return await asyncio.wait_for(wait(), TIMEOUT)


def codes(diagnostics: Sequence[types.Diagnostic]) -> list[str]:
    return sorted(str(d.code) for d in diagnostics)


def apply_edits(text: str, edits: Sequence[types.TextEdit]) -> str:
    """Apply LSP edits (UTF-16 positions) to `text`, last first."""
    lines = text.splitlines(keepends=True)

    def offset(position: types.Position) -> int:
        before = sum(len(line) for line in lines[: position.line])
        line = lines[position.line] if position.line < len(lines) else ""
        units = line.encode("utf-16-le")[: position.character * 2].decode("utf-16-le")
        return before + len(units)

    ordered = sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character))
    for edit in reversed(ordered):
        text = text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end) :]
        lines = text.splitlines(keepends=True)
    return text


@pytest.mark.asyncio
async def test_cross_file_finding_follows_the_caller(
    client: LanguageClient, tmp_path: Path
) -> None:
    write_project(tmp_path, {"train.py": TRAIN, "model.py": MODEL})
    result = await start(client, tmp_path)
    assert result.capabilities.code_action_provider
    assert result.capabilities.hover_provider
    model_uri = open_file(client, tmp_path / "model.py")
    train_uri = open_file(client, tmp_path / "train.py")

    found = await diagnostics_until(client, model_uri, lambda d: len(d) == 1)
    (half_division,) = found
    assert half_division.code == "AMP004"
    assert half_division.source == "amp-lint"
    assert half_division.severity == types.DiagnosticSeverity.Warning
    assert half_division.range.start == types.Position(1, 11)
    assert "1e-08 rounds to 0" in half_division.message
    assert half_division.code_description is not None
    assert half_division.code_description.href.endswith("AMP004-half-division.md")
    # The chain from the autocast region: the call under autocast in train.py.
    (call,) = half_division.related_information or []
    assert call.location.uri == train_uri
    assert call.location.range.start.line == 8
    assert call.message == "called under autocast here"

    # The caller loses its region (unsaved): the callee's finding goes.
    no_region = textwrap.dedent(TRAIN).replace('with torch.autocast("cuda"):', "if True:")
    replace_text(client, train_uri, no_region, 2)
    await diagnostics_until(client, model_uri, lambda d: len(d) == 0)
    # And comes back with it.
    replace_text(client, train_uri, textwrap.dedent(TRAIN), 3)
    await diagnostics_until(client, model_uri, lambda d: codes(d) == ["AMP004"])


@pytest.mark.asyncio
async def test_quick_fixes_fix_all_noqa_and_hover(client: LanguageClient, tmp_path: Path) -> None:
    write_project(tmp_path, {"train.py": TRAIN, "model.py": MODEL})
    await start(client, tmp_path)
    train_uri = open_file(client, tmp_path / "train.py")
    model_uri = open_file(client, tmp_path / "model.py")
    (deprecated,) = await diagnostics_until(client, train_uri, lambda d: len(d) == 1)
    assert deprecated.code == "AMP401"
    assert list(deprecated.tags or ()) == [types.DiagnosticTag.Deprecated]
    text = textwrap.dedent(TRAIN)

    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            types.TextDocumentIdentifier(train_uri),
            deprecated.range,
            types.CodeActionContext(diagnostics=[deprecated]),
        )
    )
    by_title = {a.title: a for a in actions or [] if isinstance(a, types.CodeAction)}
    fix = next(a for t, a in by_title.items() if t.startswith("AMP401: Use `torch.amp.autocast`"))
    assert fix.kind == types.CodeActionKind.QuickFix and fix.is_preferred
    assert fix.edit is not None and fix.edit.changes is not None
    fixed = apply_edits(text, fix.edit.changes[train_uri])
    assert 'with torch.amp.autocast("cuda"):' in fixed
    assert fixed.replace('torch.amp.autocast("cuda")', "torch.cuda.amp.autocast()") == text

    noqa = by_title["AMP401: suppress with `# noqa: AMP401`"]
    assert noqa.edit is not None and noqa.edit.changes is not None
    suppressed = apply_edits(text, noqa.edit.changes[train_uri])
    assert "    with torch.cuda.amp.autocast():  # noqa: AMP401\n" in suppressed

    fix_all = await client.text_document_code_action_async(
        types.CodeActionParams(
            types.TextDocumentIdentifier(train_uri),
            types.Range(types.Position(0, 0), types.Position(0, 0)),
            types.CodeActionContext(diagnostics=[], only=[types.CodeActionKind.SourceFixAll]),
        )
    )
    (everything,) = fix_all or []
    assert isinstance(everything, types.CodeAction)
    assert everything.kind == "source.fixAll.amp-lint"
    assert everything.edit is not None and everything.edit.changes is not None
    assert apply_edits(text, everything.edit.changes[train_uri]) == fixed

    # The unsafe fix in the callee is offered, labelled, never preferred.
    (half_division,) = await diagnostics_until(client, model_uri, lambda d: len(d) == 1)
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            types.TextDocumentIdentifier(model_uri),
            half_division.range,
            types.CodeActionContext(diagnostics=[half_division]),
        )
    )
    unsafe = next(
        a for a in actions or [] if isinstance(a, types.CodeAction) and "unsafe" in a.title
    )
    assert not unsafe.is_preferred
    assert unsafe.edit is not None and unsafe.edit.changes is not None
    divided = apply_edits(textwrap.dedent(MODEL), unsafe.edit.changes[model_uri])
    # h may be float64 (autocast leaves float64 alone): the upcast keeps it (fixes/upcasts.py).
    promoted = "h.to(torch.promote_types(h.dtype, torch.float32))"
    assert f"{promoted} / ({promoted}.std(0) + 1e-8)" in divided
    assert divided.startswith("import torch\n")

    hover = await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(model_uri), half_division.range.start)
    )
    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    assert hover.contents.value.startswith("**AMP004** `half-division`: ")
    assert "Measured: the bad example gives nonfinite" in hover.contents.value
    # Paths as `amp-lint check` prints them: relative (to the workspace folder here).
    assert "train.py:9" in hover.contents.value
    assert str(tmp_path) not in hover.contents.value
    assert str(tmp_path) not in half_division.message
    nothing = await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(model_uri), types.Position(0, 0))
    )
    assert nothing is None


@pytest.mark.asyncio
async def test_a_file_that_does_not_parse_has_its_findings_withdrawn(
    client: LanguageClient, tmp_path: Path
) -> None:
    write_project(tmp_path, {"train.py": TRAIN, "model.py": MODEL})
    await start(client, tmp_path)
    train_uri = open_file(client, tmp_path / "train.py")
    await diagnostics_until(client, train_uri, lambda d: codes(d) == ["AMP401"])
    replace_text(client, train_uri, "import torch\nwith torch.autocast('cuda'):\n  x = (\n", 2)
    # A file that does not parse: its findings are withdrawn, none invented.
    await diagnostics_until(client, train_uri, lambda d: len(d) == 0)

    # Still serving: the file fixed, its finding back.
    replace_text(client, train_uri, textwrap.dedent(TRAIN), 3)
    await diagnostics_until(client, train_uri, lambda d: codes(d) == ["AMP401"])


@pytest.mark.asyncio
async def test_notebook_document_cells_get_their_diagnostics_and_fixes(
    client: LanguageClient, tmp_path: Path
) -> None:
    write_project(tmp_path, {"model.py": MODEL})
    await start(client, tmp_path, notebooks=True)
    notebook_uri = (tmp_path / "explore.ipynb").as_uri()
    cells = [
        ("import torch\nfrom torch.cuda.amp import autocast\n", types.NotebookCellKind.Code),
        ("# Half precision", types.NotebookCellKind.Markup),
        ("with autocast():\n    y = 1\n", types.NotebookCellKind.Code),
    ]
    cell_uris = [f"vscode-notebook-cell:{tmp_path / 'explore.ipynb'}#cell{n}" for n in range(3)]
    language = {types.NotebookCellKind.Code: "python", types.NotebookCellKind.Markup: "markdown"}
    client.notebook_document_did_open(
        types.DidOpenNotebookDocumentParams(
            types.NotebookDocument(
                uri=notebook_uri,
                notebook_type="jupyter-notebook",
                version=1,
                cells=[types.NotebookCell(kind, uri) for uri, (_, kind) in zip(cell_uris, cells)],
            ),
            [
                types.TextDocumentItem(uri, language[kind], 1, text)
                for uri, (text, kind) in zip(cell_uris, cells)
            ],
        )
    )
    (deprecated,) = await diagnostics_until(client, cell_uris[2], lambda d: len(d) == 1)
    assert deprecated.code == "AMP401"
    assert deprecated.range.start == types.Position(0, 5)  # line 1 of the third cell
    # The import the call comes through, in the first cell, is reported too.
    (imported,) = client.diagnostics[cell_uris[0]]
    assert (imported.code, imported.range.start) == ("AMP401", types.Position(1, 0))
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            types.TextDocumentIdentifier(cell_uris[2]),
            deprecated.range,
            types.CodeActionContext(diagnostics=[deprecated]),
        )
    )
    fix = next(a for a in actions or [] if isinstance(a, types.CodeAction) and a.is_preferred)
    assert fix.edit is not None and fix.edit.changes is not None
    # The fix edits two cells: the call, and the import it leaves unused.
    assert sorted(fix.edit.changes) == [cell_uris[0], cell_uris[2]]
    fixed = apply_edits(cells[2][0], fix.edit.changes[cell_uris[2]])
    assert fixed == 'with torch.amp.autocast("cuda"):\n    y = 1\n'
    assert apply_edits(cells[0][0], fix.edit.changes[cell_uris[0]]) == "import torch\n"


@pytest.mark.asyncio
async def test_workspace_settings_and_diagnostics_scope(
    client: LanguageClient, tmp_path: Path
) -> None:
    """With `"diagnostics": "workspace"` closed files with findings get theirs too, and the
    workspace's `[tool.amp-lint]` applies (here it ignores AMP401)."""
    write_project(tmp_path, {"train.py": TRAIN, "model.py": MODEL})
    (tmp_path / "pyproject.toml").write_text('[tool.amp-lint]\nignore = ["AMP401"]\n')
    await start(client, tmp_path, diagnostics="workspace")
    model_uri = (tmp_path / "model.py").as_uri()
    found = await diagnostics_until(client, model_uri, lambda d: len(d) == 1)
    assert codes(found) == ["AMP004"]
    assert (tmp_path / "train.py").as_uri() not in client.diagnostics


def test_server_without_the_lsp_extra_says_how_to_install_it(tmp_path: Path) -> None:
    """Where pygls cannot be imported: one error line naming the extra, exit 2."""
    import subprocess

    blocker = tmp_path / "pygls"
    blocker.mkdir()
    (blocker / "__init__.py").write_text("raise ImportError('no pygls here')\n")
    run = subprocess.run(
        [sys.executable, "-m", "amp_lint", "server"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert run.returncode == 2
    assert run.stdout == ""
    assert run.stderr.count("\n") == 1
    assert "pip install 'amp-lint[lsp]'" in run.stderr


def _frame(message: dict[str, Any] | bytes) -> bytes:
    body = message if isinstance(message, bytes) else json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def _read_message(stream: Any) -> dict[str, Any]:
    length = 0
    while (line := stream.readline()) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    loaded: dict[str, Any] = json.loads(stream.read(length))
    return loaded


def _response(stream: Any, request_id: int) -> dict[str, Any]:
    """The response to `request_id`, past any notifications (log messages) before it."""
    while True:
        message = _read_message(stream)
        if message.get("id") == request_id and "method" not in message:
            return message


def test_malformed_messages_get_errors_and_the_server_keeps_serving(tmp_path: Path) -> None:
    """Raw JSON-RPC over the server's stdio, as a broken client would send it: a body that
    is not JSON, a request with wrongly typed params, an unknown method. Each unanswerable
    request gets an error response; the server then still answers, and exits cleanly."""
    import subprocess

    write_project(tmp_path, {"train.py": TRAIN})
    server = subprocess.Popen(
        [sys.executable, "-m", "amp_lint", "server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert server.stdin is not None and server.stdout is not None
    send = server.stdin

    def request(request_id: int, method: str, params: object) -> dict[str, Any]:
        send.write(_frame({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))
        send.flush()
        return _response(server.stdout, request_id)

    try:
        initialized = request(
            1, "initialize", {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}}
        )
        assert "capabilities" in initialized["result"]
        send.write(_frame(b"{this is not json"))
        bad_params = request(2, "textDocument/hover", {"textDocument": 17, "position": "nowhere"})
        assert bad_params["error"]["code"] < 0
        unknown = request(3, "amp-lint/no-such-method", {})
        assert unknown["error"]["code"] == -32601  # method not found
        hover = request(
            4,
            "textDocument/hover",
            {
                "textDocument": {"uri": (tmp_path / "train.py").as_uri()},
                "position": {"line": 0, "character": 0},
            },
        )
        assert hover == {"jsonrpc": "2.0", "id": 4, "result": None}
        assert request(5, "shutdown", None)["result"] is None
        send.write(_frame({"jsonrpc": "2.0", "method": "exit"}))
        send.flush()
        assert server.wait(timeout=TIMEOUT) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


@pytest.mark.asyncio
async def test_files_changed_on_disk_are_read_again(client: LanguageClient, tmp_path: Path) -> None:
    """The caller is not open: when it changes on disk (another tool, a git checkout) and
    the client reports it, the callee's diagnostics follow the new text."""
    write_project(tmp_path, {"train.py": TRAIN, "model.py": MODEL})
    await start(client, tmp_path)
    model_uri = open_file(client, tmp_path / "model.py")
    await diagnostics_until(client, model_uri, lambda d: codes(d) == ["AMP004"])
    no_region = textwrap.dedent(TRAIN).replace('with torch.autocast("cuda"):', "if True:")
    (tmp_path / "train.py").write_text(no_region, encoding="utf-8")
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            [types.FileEvent((tmp_path / "train.py").as_uri(), types.FileChangeType.Changed)]
        )
    )
    await diagnostics_until(client, model_uri, lambda d: len(d) == 0)
    # The region back on disk: the finding comes back.
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN), encoding="utf-8")
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            [types.FileEvent((tmp_path / "train.py").as_uri(), types.FileChangeType.Changed)]
        )
    )
    await diagnostics_until(client, model_uri, lambda d: codes(d) == ["AMP004"])
    # A new config file re-reads the workspace's settings: AMP004 ignored from now on.
    (tmp_path / "pyproject.toml").write_text('[tool.amp-lint]\nignore = ["AMP004"]\n')
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            [types.FileEvent((tmp_path / "pyproject.toml").as_uri(), types.FileChangeType.Created)]
        )
    )
    await diagnostics_until(client, model_uri, lambda d: len(d) == 0)


@pytest.mark.asyncio
async def test_no_quick_fixes_from_findings_of_an_older_text(
    client: LanguageClient, tmp_path: Path
) -> None:
    """After an edit the next lint is pending (a long debounce here): the findings describe
    the old text, so fixes made from them could land on the wrong code, and none are
    offered until a lint has seen the new text (a save lints at once)."""
    write_project(tmp_path, {"train.py": TRAIN})
    await start(client, tmp_path, debounceMs=600_000)
    train_uri = open_file(client, tmp_path / "train.py")
    (deprecated,) = await diagnostics_until(client, train_uri, lambda d: len(d) == 1)
    shifted = "# a new first line\n" + textwrap.dedent(TRAIN)

    def request(range_: types.Range) -> types.CodeActionParams:
        return types.CodeActionParams(
            types.TextDocumentIdentifier(train_uri),
            range_,
            types.CodeActionContext(diagnostics=[]),
        )

    assert await client.text_document_code_action_async(request(deprecated.range))
    replace_text(client, train_uri, shifted, 2)
    assert await client.text_document_code_action_async(request(deprecated.range)) is None
    client.text_document_did_save(
        types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(train_uri))
    )
    (moved,) = await diagnostics_until(
        client, train_uri, lambda d: len(d) == 1 and d[0].range.start.line == 13
    )
    actions = await client.text_document_code_action_async(request(moved.range))
    assert actions and any("torch.amp.autocast" in a.title for a in actions)


@pytest.mark.asyncio
async def test_a_bad_config_file_is_named_in_the_log(
    client: LanguageClient, tmp_path: Path
) -> None:
    """The files under an unusable `[tool.amp-lint]` are not linted, as on the command line,
    and the editor's log says why, once; files under other settings are linted."""
    write_project(tmp_path, {"train.py": TRAIN, "lib/model.py": MODEL})
    (tmp_path / "lib" / "pyproject.toml").write_text('[tool.amp-lint]\nselect = ["AMPX"]\n')
    await start(client, tmp_path)
    train_uri = open_file(client, tmp_path / "train.py")
    model_uri = open_file(client, tmp_path / "lib" / "model.py")
    await diagnostics_until(client, train_uri, lambda d: codes(d) == ["AMP401"])
    # Another lint (the finding moves down a line): the config is not named again.
    replace_text(client, train_uri, "\n" + textwrap.dedent(TRAIN), 2)
    await diagnostics_until(client, train_uri, lambda d: d[0].range.start.line == 13)
    named = [m.message for m in client.log_messages if "AMPX" in m.message]
    assert len(named) == 1, named
    assert "pyproject.toml" in named[0] and "its files are not linted" in named[0]
    assert list(client.diagnostics.get(model_uri, ())) == []


@pytest.mark.asyncio
async def test_workspace_folders_added_and_removed(client: LanguageClient, tmp_path: Path) -> None:
    """model.py is open but outside the workspace: linted alone, it has no region. Its
    folder joins the workspace, with the caller that runs it under autocast: the finding
    appears; the folder leaves: it goes."""
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    write_project(project, {"train.py": TRAIN, "model.py": MODEL})
    elsewhere.mkdir()
    await start(client, elsewhere)
    model_uri = open_file(client, project / "model.py")
    await diagnostics_until(client, model_uri, lambda d: len(d) == 0)
    folder = types.WorkspaceFolder(uri=project.as_uri(), name="project")

    def change(added: list[types.WorkspaceFolder], removed: list[types.WorkspaceFolder]) -> None:
        client.workspace_did_change_workspace_folders(
            types.DidChangeWorkspaceFoldersParams(types.WorkspaceFoldersChangeEvent(added, removed))
        )

    change([folder], [])
    await diagnostics_until(client, model_uri, lambda d: codes(d) == ["AMP004"])
    change([], [folder])
    await diagnostics_until(client, model_uri, lambda d: len(d) == 0)
