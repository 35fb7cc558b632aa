"""Settings from `[tool.amp-lint]` in pyproject.toml, merged with command-line flags."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import PurePath


@dataclass(frozen=True)
class Config:
    # Code prefixes, as in ruff: "AMP" selects every rule, "AMP0" the seed rules.
    select: tuple[str, ...] = ("AMP",)
    ignore: tuple[str, ...] = ()
    # (glob, code prefixes) pairs; globs match paths relative to `root`, or a file's name.
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = ()
    # Dotted names (e.g. "mypkg.losses.PerceptualLoss") AMP005 treats as float32-only.
    fp32_only_callables: tuple[str, ...] = ()
    # Function or "Class.method" names analysed as if called under an fp16 autocast region.
    autocast_functions: tuple[str, ...] = ()
    # Analyse nn.Module.forward methods as running under autocast when the file has an
    # fp16 autocast region or a GradScaler.
    forward_under_autocast: bool = True
    root: str = "."

    def is_enabled(self, code: str, path: str = "") -> bool:
        if not _matches_any(code, self.select) or _matches_any(code, self.ignore):
            return False
        return not any(
            _matches_any(code, codes) for pattern, codes in self.per_file_ignores
            if path and _path_matches(path, pattern, self.root)
        )


def _matches_any(code: str, prefixes: tuple[str, ...]) -> bool:
    return any(prefix == "ALL" or code.startswith(prefix) for prefix in prefixes)


def _path_matches(path: str, pattern: str, root: str) -> bool:
    pure = PurePath(path)
    try:
        relative = pure.relative_to(root).as_posix() if pure.is_absolute() else pure.as_posix()
    except ValueError:
        relative = pure.as_posix()
    relative = relative.removeprefix("./")
    return (
        fnmatch.fnmatch(relative, pattern)
        or fnmatch.fnmatch(pure.name, pattern)
        or fnmatch.fnmatch(relative, pattern.rstrip("/") + "/*")
    )
