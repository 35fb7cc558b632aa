"""The Rule base class: one subclass per rule module, registered when it is defined.

A rule keeps everything about itself together: code, name, message, documentation and
examples. It reads facts from the analysis and reports; it never finds regions, resolves
imports or guesses dtypes itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import libcst as cst

from amp_lint.analysis.values.value import Origin
from amp_lint.findings import Fix

if TYPE_CHECKING:
    from amp_lint.analysis.interpreter.interpreter import ExecutionContext
    from amp_lint.analysis.syntax.module import ModuleFacts

_REGISTRY: dict[str, type[Rule]] = {}


@dataclass(frozen=True)
class Report:
    node: cst.CSTNode
    message: str
    fix: Fix | None = None
    # Reported in another file instead, where a constant passed into this module was
    # written (the node is then where it did harm here, for de-duplication only).
    elsewhere: Origin | None = None
    # The message shortened to one line of about 100 characters: what goes wrong at run time
    # and the fix, with the code quoted briefly (`common.brief`).
    summary: str = ""
    # The calls from the autocast region to here, (path, line) each; the message names them.
    via: tuple[tuple[str, int], ...] = ()


class Rule:
    code: ClassVar[str] = ""
    name: ClassVar[str] = ""  # kebab-case, describes the bad pattern
    summary: ClassVar[str] = ""  # "What it does", one sentence
    why: ClassVar[str] = ""  # "Why is this bad?", markdown
    example: ClassVar[str] = ""  # code that is flagged
    fixed_example: ClassVar[str] = ""  # the same code after the fix
    fix_safety: ClassVar[str] = ""  # which fixes are safe, which unsafe, and why
    known_limitations: ClassVar[str] = ""
    # Node types the dtype interpreter hands to check_node, with their execution context.
    node_types: ClassVar[tuple[type[cst.CSTNode], ...]] = ()
    # Whether half dtypes that rest on an assumption (an opaque model's output under
    # autocast) are evidence enough; the message then names the assumption. Otherwise such
    # values look unknown to the rule.
    accepts_assumptions: ClassVar[bool] = False
    # check_module runs only on sources containing one of these byte strings (empty: always).
    # Module-wide analyses cost more than the rest of the lint; most files cannot need them.
    vocabulary: ClassVar[tuple[bytes, ...]] = ()
    # Whether the rule is about code that misbehaves at run time, so that `amp-lint verify`
    # runs its examples and its docs page shows their runtime evidence (not so for AMP900,
    # which reports amp-lint's own noqa comments).
    runtime_evidence: ClassVar[bool] = True
    # Whether the rule reports in test files (sources/test_files.py). False for hazards that
    # need a long training run to show (lost updates, underflowing gradients): tests use half
    # on purpose and run a few steps (a litgpt test fitting two batches in "bf16-true").
    reported_in_tests: ClassVar[bool] = True
    # Command-line arguments the documented examples hold under (`--torch-version 2.5` for a
    # rule about old releases); the rule-page test checks the examples with them.
    example_arguments: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.code:
            return
        if cls.code in _REGISTRY and _REGISTRY[cls.code] is not cls:
            raise ValueError(f"duplicate rule code {cls.code}: {cls.__name__}")
        _REGISTRY[cls.code] = cls

    def check_node(self, node: cst.CSTNode, ctx: ExecutionContext) -> Iterator[Report]:
        """Called for each node of `node_types` as the interpreter executes it."""
        return iter(())

    def check_module(self, facts: ModuleFacts) -> Iterator[Report]:
        """Called once per module, for rules that need no execution context."""
        return iter(())

    def held_back(self) -> list[str]:
        """After the module is checked: the torch release each finding needs that the rule
        did not report because the targeted torch (`torch-version`) is older; the run's
        summary says so, rather than staying silent about them."""
        return []


def registered_rules() -> dict[str, type[Rule]]:
    return dict(sorted(_REGISTRY.items()))
