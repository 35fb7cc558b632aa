"""Per-module facts shared by every rule: the tree, its imports, its path, positions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from amp_lint.analysis.project.index import ProjectIndex
from amp_lint.analysis.syntax.code_text import mentions_in_code
from amp_lint.analysis.syntax.names import ModuleNames
from amp_lint.settings.config import Config

# What code that TorchScript may compile says: `torch.jit.script`, `jit.is_scripting()`, ...
TORCHSCRIPT_WORDS = (b"jit.", b"is_scripting", b"scriptmodule")


@dataclass
class ModuleFacts:
    path: str
    module: cst.Module
    names: ModuleNames
    config: Config
    _positions: Mapping[cst.CSTNode, CodeRange] | None = field(default=None, repr=False)
    # The bytes the module was parsed from, when the caller has them (for cheap lines).
    source: bytes | None = field(default=None, repr=False)
    # Where the code of an enclosing node lies, if it occurs once (by node identity).
    _spans: dict[int, tuple[int, int] | None] = field(default_factory=dict, repr=False)
    # The linted files of the run when the module is linted as part of a project (set by the
    # Interpreter, which receives it); None for a file linted on its own.
    project: ProjectIndex | None = field(default=None, repr=False)
    _scripted: bool | None = field(default=None, repr=False)

    @property
    def may_be_scripted(self) -> bool:
        """Whether the module's code may run under TorchScript: it names `torch.jit` at all
        (`torch.jit.script(...)`, `@torch.jit.export`, `is_scripting()`). A scripted
        function accepts only a constant device in `torch.autocast(...)`."""
        if self._scripted is None:
            source = self.source if self.source is not None else self.module.code.encode()
            self._scripted = mentions_in_code(source, TORCHSCRIPT_WORDS)
        return self._scripted

    @property
    def positions(self) -> Mapping[cst.CSTNode, CodeRange]:
        """Source ranges of every node, computed on first use: it costs as much as a parse,
        and most files have nothing to report."""
        if self._positions is None:
            wrapper = MetadataWrapper(self.module, unsafe_skip_copy=True)
            self._positions = wrapper.resolve(PositionProvider)
        return self._positions

    def line_of(self, node: cst.CSTNode, *enclosing: cst.CSTNode | None) -> int:
        """The node's first line. Without positions computed yet, found by the node's own
        code when it occurs once in the source, or once in the code of an enclosing node
        (its function, its class) that occurs once: positions cost as much as a parse, and
        a chain of calls needs a few lines of files that often have nothing to report."""
        if self._positions is None and self.source is not None:
            text = _code(node)
            start = _unique_offset(self.source, text, 0, len(self.source))
            for outer in enclosing:
                span = self._span(outer) if start is None and outer is not None else None
                if span is not None:
                    start = _unique_offset(self.source, text, *span)
            if start is not None:
                return self.source.count(b"\n", 0, start) + 1
        return self.positions[node].start.line

    def _span(self, node: cst.CSTNode) -> tuple[int, int] | None:
        assert self.source is not None
        if id(node) not in self._spans:
            text = _code(node)
            start = _unique_offset(self.source, text, 0, len(self.source))
            self._spans[id(node)] = None if start is None else (start, start + len(text))
        return self._spans[id(node)]


def _code(node: cst.CSTNode) -> bytes:
    return cst.Module([]).code_for_node(node).encode()


def _unique_offset(source: bytes, text: bytes, start: int, end: int) -> int | None:
    """Where `text` occurs in source[start:end], if it occurs there exactly once."""
    found = source.find(text, start, end) if text else -1
    if found < 0 or source.find(text, found + 1, end) >= 0:
        return None
    return found
