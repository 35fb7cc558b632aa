"""flake8 plugin: `flake8 --select=AMP` reports the same findings as `amp-lint check`.

flake8 does the selection, `# noqa` and per-file ignores itself, so the plugin runs every rule
with noqa off. It reads only the analysis settings from `[tool.amp-lint]` (`autocast-functions`,
`fp32-only-callables`, `forward-under-autocast`), from the pyproject.toml nearest each file.

Errors, chosen to match what flake8 users see for other plugins:

* a file that cannot be parsed yields nothing: flake8 already reports it as E999, and a second
  report of the same syntax error would only be noise;
* a file too large to analyse (over 60,000 tokens of code, see `engine.parse_source`) yields
  nothing either: flake8 has no warning channel, and a finding would fail the run for a file
  that has no AMP problem; `amp-lint check` names such files in a warning;
* a bad `[tool.amp-lint]` table raises ConfigError, which flake8 shows as a failed plugin
  naming the file and key: a misconfiguration should stop the run, not be silently ignored;
* a bug in amp-lint yields one `AMP999` finding at 1:1 naming the exception, so that one file
  cannot abort a whole flake8 run but the failure is still visible (and can be ignored).
"""

from __future__ import annotations

import ast
import functools
import tokenize
from collections.abc import Iterator, Sequence
from pathlib import Path

from amp_lint import __version__
from amp_lint.config import Config, load_config
from amp_lint.engine import SourceError, lint_source
from amp_lint.files import has_amp_vocabulary
from amp_lint.parse_guard import call_with_deep_stack

Flake8Result = tuple[int, int, str, type]


class AmpLintChecker:
    name = "amp-lint"
    version = __version__

    # flake8 passes constructor arguments by parameter name. `tree` (the ast) is unused, since
    # amp-lint needs libcst's tree, but a plugin without a `tree` or `logical_line` parameter
    # is not run as a file plugin at all.
    def __init__(self, tree: ast.AST, lines: Sequence[str], filename: str) -> None:
        self.lines = lines
        self.filename = filename

    def run(self) -> Iterator[Flake8Result]:
        config = _config_for_directory(Path(self.filename).absolute().parent)
        source = _encode(self.lines)
        if not has_amp_vocabulary(source, config):
            return
        try:
            findings = call_with_deep_stack(
                functools.partial(lint_source, source, self.filename, config, honour_noqa=False)
            )
        except (SourceError, RecursionError):  # flake8 reports syntax errors itself
            return
        except Exception as error:  # see the module docstring
            detail = " ".join(str(error).split())
            message = f"AMP999 amp-lint internal error, please report it: {type(error).__name__}"
            yield 1, 0, f"{message}: {detail}" if detail else message, type(self)
            return
        for finding in findings:
            # 0-based: flake8 adds 1 to plugin columns itself (TorchFix added it twice).
            yield finding.line, finding.column, f"{finding.code} {finding.message}", type(self)


@functools.cache
def _config_for_directory(directory: Path) -> Config:
    loaded = load_config(directory)
    return Config(
        fp32_only_callables=loaded.fp32_only_callables,
        autocast_functions=loaded.autocast_functions,
        forward_under_autocast=loaded.forward_under_autocast,
        root=loaded.root,
    )


def _encode(lines: Sequence[str]) -> bytes:
    """The file's bytes again, in its declared encoding, so libcst (which honours a coding
    cookie) sees the same text, and reports the same columns, as `amp-lint check`."""
    text = "".join(lines)
    try:
        encoding, _ = tokenize.detect_encoding(iter(text.encode("utf-8").splitlines(True)).__next__)
        return text.encode(encoding)
    except (SyntaxError, LookupError, UnicodeEncodeError):
        return text.encode("utf-8")
