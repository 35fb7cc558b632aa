"""Facts read from another linted file's bytes without a libcst parse, which would cost as
much as analysing the file: a module-level constant (a pattern over the text) and the
functions that enter autocast themselves (the standard library's parser). A call into such a
function from outside any region is worth following for what it returns (a loss computed
under float16 autocast in a helper); most calls go to functions that do not."""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Iterator

from amp_lint.analysis.project.index import ProjectIndex

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_SOURCE_TEXT: dict[str, bytes] = {}
_REGION_OPENERS: dict[str, frozenset[str]] = {}
_LAUNCHES_KERNELS: dict[str, bool] = {}
# The project the two caches above were filled for: a new one (the next run of a language
# server, whose files may have changed) starts them empty.
_CACHED_FOR: list[ProjectIndex] = []


def _start_caches(project: ProjectIndex) -> None:
    if not _CACHED_FOR or _CACHED_FOR[0] is not project:
        _SOURCE_TEXT.clear()
        _REGION_OPENERS.clear()
        _LAUNCHES_KERNELS.clear()
        _CACHED_FOR[:] = [project]


def source_text(project: ProjectIndex, path: str) -> bytes | None:
    """A linted file's bytes, kept for the few hundred files read last."""
    _start_caches(project)
    text = _SOURCE_TEXT.get(path)
    if text is None:
        try:
            text = project.source(path)
        except OSError:
            return None
        if len(_SOURCE_TEXT) > 256:
            _SOURCE_TEXT.clear()
        _SOURCE_TEXT[path] = text
    return text


def module_constant(project: ProjectIndex, path: str, name: str) -> float | None:
    """`NAME = -1e20` (or `NAME: float = 1e-8`) at the top level of a file."""
    text = source_text(project, path)
    if text is None:
        return None
    pattern = rf"^{re.escape(name)}[ \t]*(?::[^=\n]*)?=[ \t]*({_NUMBER})[ \t]*(?:#[^\n]*)?$"
    match = re.search(pattern.encode(), text, re.MULTILINE)
    return float(match.group(1)) if match else None


def region_openers(project: ProjectIndex, path: str) -> frozenset[str]:
    """The functions (`name`, `Class.method`) of a linted file that enter autocast
    themselves: `with torch.autocast(...)`, `with ctx:` over a module-level
    `ctx = ...autocast(...)`, or an `@...autocast(...)` decorator."""
    _start_caches(project)
    found = _REGION_OPENERS.get(path)
    if found is None:
        text = source_text(project, path)
        found = frozenset(_region_openers(text)) if text and b"autocast" in text else frozenset()
        if len(_REGION_OPENERS) > 256:
            _REGION_OPENERS.clear()
        _REGION_OPENERS[path] = found
    return found


def _region_openers(text: bytes) -> Iterator[str]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return
    contexts = {
        target.id
        for statement in tree.body
        if isinstance(statement, ast.Assign) and _names_autocast(statement.value)
        for target in statement.targets
        if isinstance(target, ast.Name)
    }
    for statement in tree.body:
        methods = statement.body if isinstance(statement, ast.ClassDef) else [statement]
        prefix = f"{statement.name}." if isinstance(statement, ast.ClassDef) else ""
        for function in methods:
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if any(_names_autocast(decorator) for decorator in function.decorator_list) or any(
                _names_autocast(item.context_expr)
                or (isinstance(item.context_expr, ast.Name) and item.context_expr.id in contexts)
                for node in ast.walk(function)
                if isinstance(node, (ast.With, ast.AsyncWith))
                for item in node.items
            ):
                yield prefix + function.name


def _names_autocast(node: ast.expr) -> bool:
    return any(
        (isinstance(part, ast.Attribute) and part.attr == "autocast")
        or (isinstance(part, ast.Name) and part.id == "autocast")
        for part in ast.walk(node)
    )


# `import triton`, `from triton import ...`, or a module's re-export (`from ._triton import
# triton`), and a launch `kernel[grid](`; any import of tilelang, whose kernels are called
# like functions; or a registered custom op other than torch's own.
_IMPORTS_TRITON = re.compile(
    rb"(?m)^\s*(?:import\s+triton\b|from\s+triton\b|from\s+\S+\s+import\b.*\btriton\b)"
)
_IMPORTS_TILELANG = re.compile(rb"(?m)^\s*(?:import|from)\s+tilelang\b")
_LAUNCH = re.compile(rb"\b\w+\[(?:[^\[\]\n]|\[[^\[\]\n]*\])*\]\(")  # kernel[(n[0],)](
_CUSTOM_OP = re.compile(rb"\btorch\.ops\.(?!aten\.|prims?\.)\w+\.\w+")


def launches_kernels(project: ProjectIndex, path: str) -> bool:
    """Whether a linted file launches Triton kernels (it imports triton and has a
    `kernel[grid](...)` launch), builds tilelang kernels (it imports tilelang) or calls a
    registered custom op (`torch.ops.ns.op`): its
    functions hand tensors to kernels that load each input in its own dtype. Read from the
    text: an autograd Function's forward calling such a module's functions (mamba's
    `mamba3_siso_fwd`) needs no parse of it to be told apart from an extension call."""
    _start_caches(project)
    found = _LAUNCHES_KERNELS.get(path)
    if found is None:
        text = source_text(project, path) or b""
        found = bool(
            (b"triton" in text and _IMPORTS_TRITON.search(text) and _LAUNCH.search(text))
            or (b"tilelang" in text and _IMPORTS_TILELANG.search(text))
            or _CUSTOM_OP.search(text)
        )
        if len(_LAUNCHES_KERNELS) > 256:
            _LAUNCHES_KERNELS.clear()
        _LAUNCHES_KERNELS[path] = found
    return found
