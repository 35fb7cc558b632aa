"""`amp-lint server`: the linter as a Language Server Protocol server on stdio.

workspace_projects.py holds the project (files on disk, the editor's open documents) and
lints it as `amp-lint check` would; it does not import pygls. The modules that speak LSP
(server.py, diagnostics.py, code_actions.py, hover.py) need the `lsp` extra:
`pip install 'amp-lint[lsp]'` (pygls and lsprotocol). `amp-lint server` (cli/server_command.py)
starts server.py.
"""
