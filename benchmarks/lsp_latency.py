"""How long `amp-lint server` takes from an edit to the diagnostics, on a real project.

    python benchmarks/lsp_latency.py /work/corpus/diffusers [--files 20] [--debounce-ms 0]

Starts the server over stdio with a real LSP client (pygls), the project folder as its
workspace, waits for the first lint of the workspace, then for each of `--files` files that
mention autocast-related vocabulary (spread over the sorted list): opens it and times
`--edits` edits, each adding or removing a line with a deprecated `torch.cuda.amp` call at
the end of the buffer (unsaved), from the didChange to the publishDiagnostics that shows it
(or its removal). Every edit changes the diagnostics, so each one is answered. Prints the
time to the first diagnostics, and the median and 90th percentile of the edits' latencies.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

PROBE = "\nimport torch\n_probe = torch.cuda.amp.GradScaler()\n"
VOCABULARY = ("autocast", "GradScaler", "half()", "float16")


class Client(LanguageClient):
    def __init__(self) -> None:
        super().__init__("lsp-latency", "1")
        self.published: dict[str, asyncio.Queue[tuple[float, list[str]]]] = {}
        self.first_publish: float | None = None

        @self.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def published(params: types.PublishDiagnosticsParams) -> None:
            now = time.perf_counter()
            if self.first_publish is None:
                self.first_publish = now
            codes = [str(d.code) for d in params.diagnostics]
            self.published.setdefault(params.uri, asyncio.Queue()).put_nowait((now, codes))

    def queue(self, uri: str) -> asyncio.Queue[tuple[float, list[str]]]:
        return self.published.setdefault(uri, asyncio.Queue())


async def until(client: Client, uri: str, probe_shown: bool, timeout: float = 120) -> float:
    """When the document's diagnostics first show (or no longer show) the probe's AMP401."""
    deadline = time.perf_counter() + timeout
    while True:
        remaining = deadline - time.perf_counter()
        at, codes = await asyncio.wait_for(client.queue(uri).get(), remaining)
        if ("AMP401" in codes) == probe_shown:
            return at


def candidates(root: Path, count: int) -> list[Path]:
    found = sorted(
        path
        for path in root.rglob("*.py")
        if "AMP401" not in path.read_text("utf-8", "replace")
        and "torch.cuda.amp" not in path.read_text("utf-8", "replace")
        and any(word in path.read_text("utf-8", "replace") for word in VOCABULARY)
    )
    step = max(1, len(found) // count)
    return found[::step][:count]


async def measure(
    root: Path, files: int, edits: int, debounce_ms: int, cache: Path
) -> dict[str, float]:
    client = Client()
    started = time.perf_counter()
    # The result cache outside the project: a cold start each run, the project untouched.
    environment = {**os.environ, "AMP_LINT_CACHE_DIR": str(cache)}
    await client.start_io(sys.executable, "-m", "amp_lint", "server", env=environment)
    await client.initialize_async(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(),
            root_uri=root.as_uri(),
            workspace_folders=[types.WorkspaceFolder(root.as_uri(), root.name)],
            initialization_options={"debounceMs": debounce_ms},
        )
    )
    client.initialized(types.InitializedParams())
    latencies: list[float] = []
    first_open: float | None = None
    for number, path in enumerate(candidates(root, files)):
        uri = path.as_uri()
        text = path.read_text("utf-8")
        opened = time.perf_counter()
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", 1, text))
        )
        # The first document waits for the whole workspace's first lint.
        client.text_document_did_change(_change(uri, 2, text + PROBE))
        shown_at = await until(client, uri, probe_shown=True)
        if number == 0:
            first_open = shown_at - opened
        for edit in range(edits):
            shown = edit % 2 == 1
            sent = time.perf_counter()
            client.text_document_did_change(_change(uri, 3 + edit, text + PROBE if shown else text))
            latencies.append(await until(client, uri, probe_shown=shown) - sent)
        client.text_document_did_close(
            types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri))
        )
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    latencies.sort()
    return {
        "start_to_first_diagnostics_s": (first_open or 0.0),
        "edits": len(latencies),
        "median_ms": statistics.median(latencies) * 1000,
        "p90_ms": latencies[int(len(latencies) * 0.9) - 1] * 1000,
        "max_ms": latencies[-1] * 1000,
        "total_s": time.perf_counter() - started,
    }


def _change(uri: str, version: int, text: str) -> types.DidChangeTextDocumentParams:
    return types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(version=version, uri=uri),
        [types.TextDocumentContentChangeWholeDocument(text=text)],
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--edits", type=int, default=6)
    parser.add_argument("--debounce-ms", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        result = asyncio.run(
            measure(args.root.resolve(), args.files, args.edits, args.debounce_ms, Path(cache))
        )
    for key, value in result.items():
        print(f"{key}\t{value:.3f}" if isinstance(value, float) else f"{key}\t{value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
