"""What a run checked, for the line a clean run prints: silence after linting a model package
without its trainer, an empty directory or a run whose every file was skipped would look
like "AMP-safe" when nothing was analysed under autocast at all.

Counted from the bytes read (a byte search, as files.has_amp_vocabulary), and stored with a
cached run's result, so a warm run, which reads no file, prints the same line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from amp_lint.formats.text import plural
from amp_lint.run.cache_codec import cached_type
from amp_lint.settings.config import Config
from amp_lint.sources.files import AMP_VOCABULARY, has_amp_vocabulary

# What turns half precision on somewhere in a program: an autocast region, a GradScaler, a
# half cast or dtype, a custom_fwd, a deprecated AMP namespace, a framework's precision
# setting. Without any of these, no rule has a region to reason about.
# The AMP vocabulary less the words that only use what another file set up (a custom_bwd, a
# scaler handed in), plus the frameworks' precision settings.
MIXED_PRECISION_WORDS = (
    *(word for word in AMP_VOCABULARY if word not in (b"custom_bwd", b"scaler.")),
    b"precision=",
    b"fp16",
    b"bf16",
)


@cached_type
@dataclass(frozen=True)
class RunSummary:
    files: int = 0  # files found to lint
    without_amp_code: int = 0  # skipped: no AMP vocabulary, so no rule can fire
    unreadable: int = 0
    not_linted_for_config: int = 0  # under a config file that could not be used
    excluded: int = 0  # paths left out by `exclude`
    # Whether any file turns mixed precision on, or library mode / a framework setting
    # assumes it; if not, a clean run says that nothing was analysed under autocast.
    mixed_precision: bool = False

    def __add__(self, other: RunSummary) -> RunSummary:
        return RunSummary(
            self.files + other.files,
            self.without_amp_code + other.without_amp_code,
            self.unreadable + other.unreadable,
            self.not_linted_for_config + other.not_linted_for_config,
            self.excluded + other.excluded,
            self.mixed_precision or other.mixed_precision,
        )

    @property
    def analysed(self) -> int:
        return self.files - self.without_amp_code - self.unreadable - self.not_linted_for_config


def summarise(files: int, sources: dict[str, bytes], config: Config) -> RunSummary:
    """The summary of one project: `files` found, `sources` the bytes of those read."""
    return RunSummary(
        files=files,
        without_amp_code=sum(
            1 for source in sources.values() if not has_amp_vocabulary(source, config)
        ),
        unreadable=files - len(sources),
        mixed_precision=assumes_mixed_precision(config)
        or any(
            any(word in source for word in MIXED_PRECISION_WORDS) for source in sources.values()
        ),
    )


def assumes_mixed_precision(config: Config) -> bool:
    """Library mode or a framework precision setting: regions exist without being written."""
    trainer = config.transformers_trainer_precision not in (None, "no")
    return config.assume_autocast is not None or bool(config.lightning_precision) or trainer


def clean_run_line(summary: RunSummary, paths: Sequence[str]) -> str:
    """The line a run without findings prints: what was checked, and, when nothing in it
    turns mixed precision on, that nothing was analysed under autocast."""
    skipped = []
    if summary.without_amp_code:
        skipped.append(f"{summary.without_amp_code} had no AMP code")
    if summary.unreadable:
        skipped.append(f"{summary.unreadable} could not be read")
    if summary.not_linted_for_config:
        skipped.append(f"{summary.not_linted_for_config} not linted: bad config")
    details = f" ({', '.join(skipped)})" if skipped else ""
    line = f"Checked {plural(summary.files, 'file')}{details}; no findings"
    if summary.mixed_precision:
        return line + "."
    where = ", ".join(paths[:3]) + (", ..." if len(paths) > 3 else "")
    return (
        f"{line}, but no autocast region reaches {where}: lint the training script with it, "
        "or use --assume-autocast float16."
    )


def no_files_message(summary: RunSummary, paths: Sequence[str]) -> str:
    """The warning for a run that found no file to lint."""
    where = ", ".join(paths[:3]) + (", ..." if len(paths) > 3 else "")
    if summary.excluded:
        return f"no Python files to lint under {where} ({summary.excluded} excluded by `exclude`)"
    return f"no Python files found under {where}"
