"""AMP900 unused-noqa: a `# noqa: AMP...` code that suppressed nothing (ruff's RUF100).

Whether a directive was used is known only once every finding of the run is in, so the rule
has no check of its own: the run computes it after the suppressions (project_run.py, with
suppressions.unused_noqa). This class carries its code, name and documentation.
"""

from __future__ import annotations

from amp_lint.rules.base import Rule
from amp_lint.suppressions.comments import UNUSED_NOQA_CODE, UNUSED_NOQA_NAME


class UnusedNoqa(Rule):
    code = UNUSED_NOQA_CODE
    name = UNUSED_NOQA_NAME
    # It reports on amp-lint's own comments: there is no code to run under autocast.
    runtime_evidence = False
    summary = (
        "Checks for amp-lint codes in `noqa` comments that suppress no finding: codes of rules "
        "that found nothing there, of rules not enabled, or of no rule at all."
    )
    why = """\
A `# noqa: AMP101` left behind after the code was fixed, or written on the wrong line,
hides nothing today and will silently hide a real finding that appears on that line later.
Codes that are not amp-lint's (`E501`, `F401`) belong to other tools and are never reported;
neither is a bare `# noqa`, which other tools may rely on.

The rule is not in the default selection (as ruff's RUF100 is not): enable it with
`--extend-select AMP900` or `extend-select = ["AMP900"]`. It reports codes of rules that are
not enabled as unused too, so run it with the selection the project uses."""
    example = """\
import torch

with torch.autocast("cuda"):
    scores = logits.float().softmax(-1)  # noqa: AMP003
"""
    fixed_example = """\
import torch

with torch.autocast("cuda"):
    scores = logits.float().softmax(-1)
"""
    fix_safety = """\
The fix is **safe**: it removes the unused codes from the comment, keeping the others
(other tools' codes included), and removes the `noqa` comment when none is left, keeping any
words after the codes as a plain comment. A file-level `# amp-lint: noqa: ...` line with no
code left is removed whole."""
    known_limitations = """\
A finding of a file that could not be parsed, or was too large to analyse, is unknown, so
such a file's comments are not checked. Files analysed on standard input are not checked."""
