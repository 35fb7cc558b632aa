"""`amp-lint server`: the language server (lsp/) on stdio, when the `lsp` extra is installed."""

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
