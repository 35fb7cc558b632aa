"""Keeping pathological but small inputs from crashing or exhausting a run.

libcst's native parser recurses on the C stack: about 1,500 nested brackets, or a few
thousand chained unary operators or lambdas, overflow it and kill the process (SIGSEGV). Such
code is not Python: CPython refuses more than 200 nested brackets ("too many nested
parentheses") and expressions a few thousand levels deep ("too complex", RecursionError). So a
file that looks deep is first shown to CPython's own parser, and what CPython refuses is
reported as a syntax error instead of being handed to libcst.

Code CPython accepts can still be deep enough for Python-level recursion in libcst's
visitors and in the analysis (a `+` chain of 350 terms is a syntax tree 350 levels deep), so
the analysis of a file runs in a thread with a large stack and a high recursion limit
(`call_with_deep_stack`).
"""

from __future__ import annotations

import ast
import re
import sys
import threading
from collections.abc import Callable
from typing import TypeVar

# Below this depth of brackets, and these runs of prefix operators, libcst and the analysis
# are far from any limit, so CPython's parser (an extra ~10% of libcst's parse time) is not
# asked. Above them it is, and decides.
_SUSPECT_BRACKET_DEPTH = 100
_SUSPECT_PREFIX_RUN = re.compile(rb"(?:(?:[-+~]|\bnot\b|\blambda\b[^:\n]*:|\bawait\b)\s*){100}")
# An operator chain (`a + b + ...`, `x.f().g()...`, `a and b and ...`) is a syntax tree as deep
# as it is long, and libcst takes minutes over one CPython refuses (20,000 terms). A file with
# fewer operators than this in all cannot hold a chain near CPython's limit (about 3,000); 1.4%
# of 13,039 real files have more, and CPython's parser decides for those.
_SUSPECT_OPERATOR_COUNT = 2_500
_CHAIN_OPERATORS = (b"+", b"-", b"*", b"/", b"|", b"&", b"^", b"%", b"@", b"<", b">", b".", b"[")
_CHAIN_WORDS = (b" and ", b" or ", b" if ")

_OPENING = b"([{"
_CLOSING = b")]}"
_BRACKETS_ONLY = bytes.maketrans(_OPENING + _CLOSING, b"(((" + b")))")
_NOT_BRACKETS = bytes(byte for byte in range(256) if byte not in _OPENING + _CLOSING)

# Deep enough for any syntax tree CPython accepts (its own limits stop at a few thousand
# levels) times the frames each level costs in libcst's visitors and in the interpreter.
RECURSION_LIMIT = 60_000
# Reserved address space, not memory: pages are only used as deep recursion touches them.
STACK_BYTES = 1024 * 1024 * 1024

CPYTHON_DEFAULT_RECURSION_LIMIT = 1000
# Python 3.11 and later refuse syntax trees deeper than about 3,000 levels (a 1,494-call method
# chain is 2,990); Python 3.9 and 3.10 accept a 20,000-term `+` chain, over which libcst takes
# minutes. Trees deeper than this are refused on every Python, so that all of them agree.
DEEPEST_SYNTAX_TREE = 3_000

Result = TypeVar("Result")


def refused_by_cpython(source: bytes) -> str | None:
    """CPython's reason for refusing a file that looks deeply nested, or None.

    Files that do not look deep are not parsed here (None): libcst handles them, and reports
    their syntax errors itself.
    """
    if not _looks_deep(source):
        return None
    # CPython's nesting limits scale with the recursion limit, which call_with_deep_stack
    # raises; the check asks what a default interpreter would accept.
    previous_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(CPYTHON_DEFAULT_RECURSION_LIMIT)
    try:
        tree = compile(source, "<amp-lint>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
        if _deeper_than(tree, DEEPEST_SYNTAX_TREE):
            return (
                f"cannot parse: too deeply nested (a syntax tree over {DEEPEST_SYNTAX_TREE:,} "
                "levels deep; Python 3.11 and later refuse it too)"
            )
    except SyntaxError as error:
        where = f"{error.lineno}:{(error.offset or 0)}: " if error.lineno else ""
        return f"{where}cannot parse: {error.msg}"
    except (RecursionError, MemoryError):
        return "cannot parse: too deeply nested (CPython refuses it too)"
    except ValueError as error:  # null bytes
        return f"cannot parse: {error}"
    finally:
        sys.setrecursionlimit(previous_limit)
    return None


def _deeper_than(tree: ast.AST, limit: int) -> bool:
    """Whether the syntax tree is more than `limit` levels deep (walked without recursion)."""
    pending: list[tuple[ast.AST, int]] = [(tree, 1)]
    while pending:
        node, depth = pending.pop()
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return False


def _looks_deep(source: bytes) -> bool:
    return (
        _bracket_depth_exceeds(source, _SUSPECT_BRACKET_DEPTH)
        or _SUSPECT_PREFIX_RUN.search(source) is not None
        or _operator_count(source) >= _SUSPECT_OPERATOR_COUNT
    )


def _operator_count(source: bytes) -> int:
    return sum(source.count(operator) for operator in _CHAIN_OPERATORS + _CHAIN_WORDS)


def _bracket_depth_exceeds(source: bytes, limit: int) -> bool:
    """Whether brackets nest deeper than `limit`, counting those in strings and comments too
    (an overestimate is only a false suspicion). Removing innermost `()` pairs takes one pass
    per level, each pass at C speed."""
    brackets = source.translate(_BRACKETS_ONLY, _NOT_BRACKETS)
    for _ in range(limit):
        shorter = brackets.replace(b"()", b"")
        if len(shorter) == len(brackets):
            return False
        brackets = shorter
    return b"()" in brackets


def call_with_deep_stack(function: Callable[[], Result]) -> Result:
    """`function()` in a thread whose stack and recursion limit allow the deepest syntax
    trees CPython accepts; its exception, if any, is raised here."""
    outcome: list[Result] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            outcome.append(function())
        except BaseException as error:  # handed to the caller's thread
            failure.append(error)

    previous_limit = sys.getrecursionlimit()
    try:
        previous_stack = threading.stack_size(STACK_BYTES)
    except (ValueError, RuntimeError):  # a platform that cannot size thread stacks
        return function()
    try:
        sys.setrecursionlimit(max(previous_limit, RECURSION_LIMIT))
        thread = threading.Thread(target=target, name="amp-lint-analysis")
        thread.start()
        thread.join()
    finally:
        threading.stack_size(previous_stack)
        sys.setrecursionlimit(previous_limit)
    if failure:
        raise failure[0]
    return outcome[0]
