"""Rule selectors (`--select`, `ignore = [...]`, per-file-ignores) checked against the rules
that exist, as ruff checks them: a selector that selects nothing is a typo, and a typo in
`ignore` would otherwise silently ignore nothing.

A selector is `ALL`, a rule code or a prefix of one (`AMP`, `AMP3`, `AMP30`, `AMP301`), or a
rule name (`masked-assign`), which stands for its code.

The registry is read from the rule modules' file names (`amp001_masked_assign.py` is AMP001,
masked-assign), not by importing the rules: that imports libcst, which costs more than a warm
run (warm_run.py) takes in all. tests/test_selection.py checks that the two agree.
"""

from __future__ import annotations

import functools
import pkgutil
import re
from collections.abc import Sequence
from pathlib import Path

from amp_lint.suppressions.comments import UNUSED_NOQA_CODE, UNUSED_NOQA_NAME

ALL = "ALL"
_RULES_DIRECTORY = Path(__file__).parents[1] / "rules"
_RULE_MODULE = re.compile(r"^(amp[0-9]+)_([a-z0-9_]+)$")


class UnknownSelector(ValueError):
    """A selector that matches no rule; the message is ruff's wording."""

    def __init__(self, selector: str) -> None:
        super().__init__(f"Unknown rule selector: `{selector}`")
        self.selector = selector


@functools.cache
def known_rules() -> dict[str, str]:
    """Rule code -> rule name, in code order: the rule modules', and the codes reported
    outside them (AMP900, unused-noqa, by suppressions.py)."""
    rules = {UNUSED_NOQA_CODE: UNUSED_NOQA_NAME}
    for info in pkgutil.iter_modules([str(_RULES_DIRECTORY)]):
        match = _RULE_MODULE.match(info.name)
        if match:
            rules[match.group(1).upper()] = match.group(2).replace("_", "-")
    return dict(sorted(rules.items()))


def resolve_selector(text: str) -> str:
    """The code prefix a selector stands for; raises UnknownSelector if it selects no rule."""
    selector = text.strip()
    rules = known_rules()
    by_name = {name: code for code, name in rules.items()}
    if selector.lower() in by_name:
        return by_name[selector.lower()]
    upper = selector.upper()
    if upper == ALL or (upper and any(code.startswith(upper) for code in rules)):
        return upper
    raise UnknownSelector(selector)


def resolve_selectors(selectors: Sequence[str]) -> tuple[str, ...]:
    """Each selector's code prefix, in order; raises UnknownSelector on the first bad one."""
    return tuple(resolve_selector(selector) for selector in selectors)
