"""flake8 plugin: `flake8 --select=AMP` reports the same findings as `amp-lint check`.

Settings come from `[tool.amp-lint]` in the pyproject.toml nearest each file, found as
`amp-lint check` finds them (settings_discovery.py). flake8 does the selection and `# noqa`
itself, so the plugin runs every rule with noqa off and leaves `select`/`ignore` to flake8's
own options. It honours every other setting: the analysis settings (`assume-autocast`,
`assume-device`, `autocast-functions`, `fp32-only-callables`, `forward-under-autocast`,
`lightning-precision`, `transformers-trainer-precision`), and `per-file-ignores` and
`exclude` (a file they exclude gets no AMP finding, nor do the codes they ignore for it).

What a file-at-a-time plugin cannot do is follow the project: calls into other files under
autocast, and framework settings applied to a class defined in another file, are what
`amp-lint check` adds. `lightning-precision` and `transformers-trainer-precision` therefore
reach only classes defined in the checked file itself; a config setting either gets a
one-time warning on stderr saying so.

Errors, chosen to match what flake8 users see for other plugins:

* a file that cannot be parsed yields nothing: flake8 already reports it as E999, and a second
  report of the same syntax error would only be noise;
* a file too large to analyse (over 60,000 tokens of code, see `engine.parse_source`) yields
  nothing either: flake8 has no warning channel, and a finding would fail the run for a file
  that has no AMP problem; `amp-lint check` names such files in a warning;
* a bad `[tool.amp-lint]` table yields one `AMP000 amp-lint: configuration error: FILE: ...`
  finding at 1:1 of the first file it governs (once per flake8 process), and the files it
  governs are not linted. A finding rather than a message on stderr, so that the run fails
  and CI shows it; rather than an exception, which flake8 turns into a traceback naming the
  plugin, not the file; once rather than once per file, because one mistake is one line;
* a bug in amp-lint yields one `AMP999` finding at 1:1 naming the exception, so that one file
  cannot abort a whole flake8 run but the failure is still visible (and can be ignored).
"""

from __future__ import annotations

import ast
import functools
import os
import sys
import tokenize
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

from amp_lint import __version__
from amp_lint.formats.text import concise_message
from amp_lint.parse.parse_guard import call_with_deep_stack
from amp_lint.run.engine import SourceError, lint_source
from amp_lint.settings.config import Config
from amp_lint.settings.discovery import ConfigResolver, Resolved
from amp_lint.sources.files import has_amp_vocabulary
from amp_lint.suppressions.comments import NoqaMap

Flake8Result = tuple[int, int, str, type]

# Config files whose error, or whose project-wide settings, this process reported already.
_REPORTED_CONFIG_ERRORS: set[Path | None] = set()
_WARNED: set[Path | None] = set()


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
        resolved = _resolver().resolve_file(Path(self.filename))
        if resolved.error is not None:
            if resolved.source not in _REPORTED_CONFIG_ERRORS:
                _REPORTED_CONFIG_ERRORS.add(resolved.source)
                message = f"AMP000 amp-lint: configuration error: {resolved.error}"
                yield 1, 0, " ".join(message.split()), type(self)
            return
        config = resolved.config
        _warn_about_project_settings(resolved)
        if _is_excluded(self.filename, config):
            return
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
        # Selection is flake8's: every code counts as selected, and only per-file-ignores
        # apply here.
        selection_free = replace(config, select=("ALL",), ignore=())
        # flake8 honours its own file-level comment, not amp-lint's (`amp-lint: noqa`).
        noqa = NoqaMap(source.decode("utf-8", "replace"))
        for finding in findings:
            if noqa.suppresses_in_file(finding.code):
                continue
            if selection_free.is_enabled(finding.code, self.filename):
                # The one-line summary, as `amp-lint check` prints by default: flake8's lines
                # share terminals and CI logs with other plugins' short messages, and
                # `amp-lint rule CODE` (or `--output-format full`) gives the rest.
                text = f"{finding.code} {concise_message(finding)}"
                # 0-based: flake8 adds 1 to plugin columns itself (TorchFix added it twice).
                yield finding.line, finding.column, text, type(self)


@functools.cache
def _resolver() -> ConfigResolver:
    """One per flake8 process: each directory's lookup and each config file's read happen
    once however many files are checked."""
    return ConfigResolver(Path.cwd())


def _is_excluded(filename: str, config: Config) -> bool:
    """Whether `exclude` leaves out the file or a directory it is in (below the config's
    directory), as `amp-lint check` would when walking to it."""
    if not (config.exclude or config.extend_exclude):
        return False
    absolute = Path(os.path.abspath(filename))
    root = Path(os.path.abspath(config.root))
    candidates = [Path(filename)]
    for parent in absolute.parents:
        if parent == root or root not in parent.parents:
            break
        candidates.append(parent)
    return any(config.is_excluded(str(candidate)) for candidate in candidates)


def _warn_about_project_settings(resolved: Resolved) -> None:
    """Once per config file: the settings that reach other files under `amp-lint check`."""
    config = resolved.config
    settings = [
        f'{key} = "{value}"'
        for key, value in (
            ("lightning-precision", config.lightning_precision),
            ("transformers-trainer-precision", config.transformers_trainer_precision),
        )
        if value is not None
    ]
    if not settings or resolved.source in _WARNED:
        return
    _WARNED.add(resolved.source)
    print(
        f"amp-lint: warning: {resolved.source}: under flake8, {' and '.join(settings)} reaches "
        "only classes defined in the checked file; `amp-lint check` follows it into the "
        "classes' other files",
        file=sys.stderr,
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
