"""CPython's verdict on a file's syntax, for files the analysis never parses.

A file without AMP vocabulary is not analysed, but a linter that exits 0 over a file that is
not Python misleads (ruff reports every syntax error). CPython's own parser decides first: it
is several times faster than libcst's, the analysis's parser. The run (runner.py) shows what
CPython refuses to libcst as well and reports it only if libcst refuses it too, so that a file
parses or fails exactly as it would with AMP vocabulary: code in syntax newer than the running
Python, which libcst reads, is not an error.
"""

from __future__ import annotations

import ast
import gc
import sys
import warnings

from amp_lint.parse.parse_guard import CPYTHON_DEFAULT_RECURSION_LIMIT


def cpython_refusal(source: bytes, path: str) -> str | None:
    """Why CPython refuses `source` (one line naming the file), or None if it parses."""
    # CPython's nesting limits scale with the recursion limit: ask what a default interpreter
    # accepts (parse_guard.py does the same).
    previous_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(CPYTHON_DEFAULT_RECURSION_LIMIT)
    # A syntax tree holds no reference cycles, but building one allocates enough objects to
    # start collections, each walking the worker's whole heap (the analyses' parsed modules):
    # that tripled the time of these checks after a large project's analysis.
    collecting = gc.isenabled()
    gc.disable()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes and the like are not errors
            compile(source, "<amp-lint>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as error:
        where = f"{error.lineno}:{error.offset or 0}:" if error.lineno else ""
        return f"{path}:{where} cannot parse: {error.msg}"
    except (RecursionError, MemoryError):
        return f"{path}: cannot parse: too deeply nested (CPython refuses it too)"
    except ValueError as error:  # null bytes
        return f"{path}: cannot parse: {error}"
    finally:
        sys.setrecursionlimit(previous_limit)
        if collecting:
            gc.enable()
    return None
