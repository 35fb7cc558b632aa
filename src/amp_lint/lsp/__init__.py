"""`amp-lint server`: the linter as a Language Server Protocol server on stdio.

workspace_projects.py holds the project (files on disk, the editor's open documents) and
lints it as `amp-lint check` would; it does not import pygls. The modules that speak LSP
(server.py, diagnostics.py, code_actions.py, hover.py) need the `lsp` extra:
`pip install 'amp-lint[lsp]'` (pygls and lsprotocol).
"""

from __future__ import annotations

import argparse

from amp_lint.cli.reporting import EXIT_ERROR, Reporter


def run(args: argparse.Namespace) -> int:
    """`amp-lint server`; without the extra, one line naming it, exit status 2."""
    try:
        from amp_lint.lsp.server import main as serve
    except ImportError as error:  # the lsp extra is not installed
        Reporter().error(
            f"`amp-lint server` needs pygls and lsprotocol ({error}): pip install 'amp-lint[lsp]'"
        )
        return EXIT_ERROR
    return serve()
