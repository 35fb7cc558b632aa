"""The layout docs/architecture.md describes, kept true: one folder per stage, the stages in
one direction, modules small enough to read.

Imports are read with `ast` (no import runs); an import under `if TYPE_CHECKING:` is for
annotations only and does not count.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "amp_lint"
MAX_LINES = 400
MAX_TOP_LEVEL_MODULES = 8
MAX_MODULES_PER_FOLDER = 20
# Folders that hold one module per rule or per runtime case.
LONG_FOLDERS = {"rules", "verify/cases"}
# The one import cycle between modules: the interpreter's statements, expressions and calls.
CYCLE_PACKAGE = "amp_lint.analysis.interpreter"
# Packages whose subpackages may import each other: the analysis's rooms share facts.
ROOMS_OF_ONE_STAGE = ("amp_lint.analysis", "amp_lint.verify")


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE)
        if relative.parts[:2] == ("verify", "cases"):
            continue  # runtime cases: programs, not amp-lint's code
        parts = ("amp_lint", *relative.with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(path: Path) -> Iterator[str]:
    tree = ast.parse(path.read_text("utf-8"))
    annotations_only = {
        id(node)
        for branch in ast.walk(tree)
        if isinstance(branch, ast.If) and "TYPE_CHECKING" in ast.unparse(branch.test)
        for node in ast.walk(branch)
    }
    for node in ast.walk(tree):
        if id(node) in annotations_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("amp_lint"):
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name.startswith("amp_lint"))


def import_graph() -> dict[str, set[str]]:
    known = modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in known.items():
        for target in imports(path):
            if target in known and target != name and known[target].name != "__init__.py":
                graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one node (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    nodes = set(graph) | {target for targets in graph.values() for target in targets}
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(component)
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def folder_of(module: str, path: Path) -> str:
    if path.parent == PACKAGE:
        return module  # a module directly in amp_lint/ is a stage of its own
    return module if path.name == "__init__.py" else module.rsplit(".", 1)[0]


def test_no_module_is_over_400_lines() -> None:
    long = {
        str(path.relative_to(PACKAGE)): lines
        for path in modules().values()
        if (lines := len(path.read_text("utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}, "split these at their seams"


def test_few_modules_directly_in_the_package_and_in_each_folder() -> None:
    by_folder: dict[str, int] = defaultdict(int)
    for path in PACKAGE.rglob("*.py"):
        by_folder[path.parent.relative_to(PACKAGE).as_posix()] += 1
    assert by_folder["."] <= MAX_TOP_LEVEL_MODULES, by_folder["."]
    crowded = {
        folder: count
        for folder, count in by_folder.items()
        if folder != "." and folder not in LONG_FOLDERS and count > MAX_MODULES_PER_FOLDER
    }
    assert crowded == {}


def test_the_only_module_cycle_is_the_interpreters() -> None:
    for component in cycles(import_graph()):
        outside = sorted(name for name in component if not name.startswith(CYCLE_PACKAGE + "."))
        assert outside == [], f"an import cycle outside {CYCLE_PACKAGE}: {sorted(component)}"


def test_the_stages_import_in_one_direction() -> None:
    """Folders (stages) form no cycle, except rooms of one stage among themselves."""
    known = modules()
    folders: dict[str, set[str]] = defaultdict(set)
    for source, targets in import_graph().items():
        for target in targets:
            a, b = folder_of(source, known[source]), folder_of(target, known[target])
            if a != b:
                folders[a].add(b)
    for component in cycles(folders):
        stages = {
            next((stage for stage in ROOMS_OF_ONE_STAGE if name.startswith(stage)), name)
            for name in component
        }
        assert len(stages) == 1, f"stages that import each other: {sorted(component)}"


def test_the_analysis_never_imports_a_rule_or_a_face() -> None:
    known = modules()
    for name in known:
        if not name.startswith("amp_lint.analysis"):
            continue
        for target in imports(known[name]):
            assert not target.startswith(("amp_lint.rules", "amp_lint.cli", "amp_lint.lsp")), (
                f"{name} imports {target}"
            )
