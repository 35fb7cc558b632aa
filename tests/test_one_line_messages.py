"""One finding, one short line: the concise format (and flake8) print each finding's summary,
which fits with its path in about 160 columns, while `--output-format json` keeps the long
message beside it. Run through the real `amp-lint check` over every fixture and example."""

from __future__ import annotations

import functools
import json
import keyword
import re
from pathlib import Path

import libcst as cst
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from runners import amp_lint, flake8

ROOT = Path(__file__).parent.parent
FIXTURES = Path(__file__).parent / "fixtures"
# `path:line:col: CODE [*] summary`, the format editors' and CI problem matchers parse.
CONCISE_LINE = re.compile(r"^(?P<path>.+?):\d+:\d+: (?P<code>AMP\d{3}) (?:\[\*\] )?(?P<text>.+)$")
LINE_LIMIT = 160  # for a path of at most PATH_LIMIT characters
PATH_LIMIT = 40
SUMMARY_LIMIT = 120
ALL_RULES = {
    *(f"AMP00{n}" for n in range(1, 6)),
    *(f"AMP10{n}" for n in range(1, 5)),
    *(f"AMP20{n}" for n in range(1, 4)),
    *(f"AMP30{n}" for n in range(1, 9)),
    "AMP401",
}


def check(cwd: Path, *args: str) -> str:
    result = amp_lint(cwd, "check", "--no-cache", "--exit-zero", "--select", "AMP", *args)
    assert result.returncode == 0, result.stderr
    return result.stdout


@functools.cache
def concise_output() -> list[str]:
    """Every concise line for the fixtures (paths relative to tests/fixtures, as a user
    linting their project sees them) and the examples."""
    lines = check(FIXTURES, "--output-format", "concise", ".").splitlines()
    lines += check(ROOT, "--output-format", "concise", "examples").splitlines()
    return lines


@functools.cache
def json_findings() -> list[dict[str, object]]:
    findings: list[dict[str, object]] = json.loads(check(FIXTURES, "--output-format", "json", "."))
    findings += json.loads(check(ROOT, "--output-format", "json", "examples"))
    return findings


def test_every_rule_is_exercised() -> None:
    assert {f["code"] for f in json_findings()} >= ALL_RULES


def test_concise_lines_are_short_single_lines() -> None:
    lines = concise_output()
    assert len(lines) == len(json_findings())
    too_long = []
    for line in lines:
        match = CONCISE_LINE.match(line)
        assert match, f"not a `path:line:col: CODE message` line: {line!r}"
        if len(match["path"]) <= PATH_LIMIT and len(line) > LINE_LIMIT:
            too_long.append(f"{len(line)}: {line}")
    assert not too_long, "\n".join(too_long)


def test_concise_lines_print_the_summary() -> None:
    summaries = sorted(str(f["summary"]) for f in json_findings())
    texts = sorted(match["text"] for match in map(CONCISE_LINE.match, concise_output()) if match)
    assert texts == summaries


def test_every_finding_has_its_own_summary() -> None:
    for finding in json_findings():
        message, summary = str(finding["message"]), str(finding["summary"])
        assert len(summary) <= SUMMARY_LIMIT, f"{len(summary)}: {summary}"
        if len(message) > SUMMARY_LIMIT:  # a short message may stand in for its summary
            assert summary != message, f"{finding['code']} gives no summary: {message}"
        assert len(summary) <= len(message)


@pytest.mark.parametrize("field", ["message", "summary"])
def test_no_text_spans_lines(field: str) -> None:
    for finding in json_findings():
        text = str(finding[field])
        assert "\n" not in text and "\r" not in text, text
        assert text == text.strip() and "  " not in text, text


MULTI_LINE = """\
import torch


def forward(q, k, pad_mask):
    with torch.autocast("cuda"):
        scores = q @ k.transpose(-2, -1)
        scores = scores.masked_fill(
            pad_mask,
            -1e9,
        )
        return scores.softmax(-1)
"""


def test_multi_line_call_is_quoted_on_one_line(tmp_path: Path) -> None:
    (tmp_path / "attention.py").write_text(MULTI_LINE)
    concise = check(tmp_path, "--output-format", "concise", "attention.py").splitlines()
    assert len(concise) == 1
    assert concise[0].startswith("attention.py:7:18: AMP101 `scores.masked_fil")
    assert "c10::Half without overflow" in concise[0]
    (finding,) = json.loads(check(tmp_path, "--output-format", "json", "attention.py"))
    assert "`scores.masked_fill(pad_mask, -1e9)`" in finding["message"]
    assert "\n" not in finding["message"] + finding["summary"]


def test_long_message_stays_in_json(tmp_path: Path) -> None:
    (tmp_path / "attention.py").write_text(MULTI_LINE)
    (finding,) = json.loads(check(tmp_path, "--output-format", "json", "attention.py"))
    assert '"value cannot be converted to type c10::Half without overflow"' in finding["message"]
    assert "outside the float16 range (±65504)" in finding["message"]


def test_flake8_prints_the_summary(tmp_path: Path) -> None:
    (tmp_path / "attention.py").write_text(MULTI_LINE)
    concise = check(tmp_path, "--output-format", "concise", "attention.py")
    plugin = flake8(tmp_path, "--select=AMP", "attention.py")
    assert plugin.stdout == concise


# --- the helpers that quote code, on any layout -----------------------------------------------

NAMES = st.from_regex(r"[a-z_][a-z0-9_]{0,12}", fullmatch=True).filter(
    lambda name: not keyword.iskeyword(name)
)
BREAKS = st.sampled_from([" ", "\n", "\r\n", "\n    ", "  # why\n", "\t", "\\\n"])


@st.composite
def multi_line_calls(draw: st.DrawFn) -> str:
    """`f(a, b, ...)` with any line breaks, comments and indentation between the arguments."""
    arguments = draw(st.lists(NAMES, min_size=1, max_size=6))
    text = draw(NAMES) + "(" + draw(BREAKS).replace("\\\n", "\n")
    for argument in arguments:
        text += argument + "," + draw(BREAKS).replace("\\\n", "\n")
    return text + ")"


@settings(max_examples=200, deadline=None)
@given(call=multi_line_calls(), limit=st.integers(min_value=8, max_value=60))
def test_quoted_code_is_one_short_line(call: str, limit: int) -> None:
    from amp_lint.rules.common import brief, code

    node = cst.parse_expression(call)
    for quoted in (brief(node, limit), code(node)):
        assert "\n" not in quoted and "\r" not in quoted, quoted
        assert "  " not in quoted and quoted == quoted.strip(), quoted
    assert len(brief(node, limit)) <= limit
    assert len(brief(call, limit)) <= limit and "\n" not in brief(call, limit)
