"""Settings from `[tool.amp-lint]` in pyproject.toml, merged with command-line flags."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePath

from amp_lint.settings.errors import ConfigError
from amp_lint.settings.output_formats import ALIASES, OUTPUT_FORMATS
from amp_lint.settings.rule_selectors import UnknownSelector, resolve_selectors
from amp_lint.settings.toml_files import amp_lint_table
from amp_lint.settings.torch_target import is_file, torch_version_setting, with_torch_version
from amp_lint.settings.torch_version import SETTING_FORM, TorchVersion, parse_torch_version


@dataclass(frozen=True)
class Config:
    # Code prefixes, as in ruff: "AMP" selects every rule, "AMP0" the seed rules.
    select: tuple[str, ...] = ("AMP",)
    ignore: tuple[str, ...] = ()
    # (glob, code prefixes) pairs; globs match paths relative to `root`, or a file's name.
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = ()
    # Added to `exclude` (kept when --exclude replaces it, as in ruff).
    extend_exclude: tuple[str, ...] = ()
    # Leave out what .gitignore, .git/info/exclude and git's global excludes file ignore
    # (inside a git work tree), as ruff does by default (gitignore.py).
    respect_gitignore: bool = True
    # Apply the excludes (.gitignore included) to files named on the command line too.
    force_exclude: bool = False
    # Dotted names (e.g. "mypkg.losses.PerceptualLoss") AMP005 treats as float32-only.
    fp32_only_callables: tuple[str, ...] = ()
    # Function or "Class.method" names analysed as if called under an fp16 autocast region.
    autocast_functions: tuple[str, ...] = ()
    # Analyse nn.Module.forward methods as running under autocast when the file has an
    # fp16 autocast region or a GradScaler.
    forward_under_autocast: bool = True
    # Library mode: every nn.Module.forward, autograd.Function.forward and configured function
    # runs under autocast of this dtype ("float16" or "bfloat16") on `assume_device`.
    assume_autocast: str | None = None
    assume_device: str | None = None
    # Framework settings for projects whose trainer is not among the linted files.
    lightning_precision: str | None = None  # "16-mixed", "bf16-mixed", ...
    transformers_trainer_precision: str | None = None  # "fp16" or "bf16"
    # Where results are cached between runs; relative to `root`.
    cache_dir: str | None = None
    # How and where findings are reported (`--output-format`, `--output-file`; the file
    # relative to `root`). Not part of what results depend on, so not compared or cached.
    output_format: str | None = field(default=None, compare=False, repr=False)
    output_file: str | None = field(default=None, compare=False, repr=False)
    # The oldest torch the project supports, e.g. (2, 1) (torch_version.py); None assumes the
    # newest. Where it came from is said for --show-settings.
    torch_version: TorchVersion | None = None
    torch_version_source: str | None = None
    root: str = "."

    def is_enabled(self, code: str, path: str = "") -> bool:
        if not _selects(code, self.select) or _matches_any(code, self.ignore):
            return False
        return not any(
            _matches_any(code, codes)
            for pattern, codes in self.per_file_ignores
            if path and _path_matches(path, pattern, self.root)
        )

    def is_excluded(self, path: str) -> bool:
        """Whether an `exclude` glob matches the path (relative to `root`) or its name."""
        return any(
            _path_matches(path, pattern, self.root)
            for pattern in (*self.exclude, *self.extend_exclude)
        )


# Rules only a selection naming them enables (AMP9, AMP90, AMP900 or ALL): the default "AMP"
# does not, as ruff's default selection leaves out RUF100 (unused-noqa). They report on
# amp-lint's own comments, not on the code.
OPT_IN_PREFIX = "AMP9"


def _selects(code: str, prefixes: tuple[str, ...]) -> bool:
    if code.startswith(OPT_IN_PREFIX):
        return any(
            p == "ALL" or (p.startswith(OPT_IN_PREFIX) and code.startswith(p)) for p in prefixes
        )
    return _matches_any(code, prefixes)


def _matches_any(code: str, prefixes: tuple[str, ...]) -> bool:
    return any(prefix == "ALL" or code.startswith(prefix) for prefix in prefixes)


def _path_matches(path: str, pattern: str, root: str) -> bool:
    pure = PurePath(path)
    # Both made absolute against the cwd, and normalised so that `../x` cannot match `sub/*`
    # by way of `sub/../x`: a relative path given from a subdirectory still matches globs
    # written relative to the config's directory.
    try:
        relative = PurePath(os.path.abspath(path)).relative_to(os.path.abspath(root)).as_posix()
    except ValueError:  # outside the root: match the path as written
        relative = pure.as_posix()
    relative = relative.removeprefix("./")
    return any(
        fnmatch.fnmatch(relative, variant)
        or fnmatch.fnmatch(pure.name, variant)
        or fnmatch.fnmatch(relative, variant.rstrip("/") + "/*")
        for variant in _glob_variants(pattern)
    )


def _glob_variants(pattern: str) -> set[str]:
    """`pattern` and its forms with each `**/` matching no directory, as in ruff's globs:
    `**/gen/*` matches `gen/x.py` at the root, `a/**/b.py` matches `a/b.py`."""
    variants = {pattern}
    while True:
        more = {v.replace("**/", "", 1) for v in variants if "**/" in v} - variants
        if not more or len(variants) > 64:
            return variants
        variants |= more


PYPROJECT = "pyproject.toml"

# `[tool.amp-lint]` key -> the type its value must have ("list" means a list of strings).
_KEY_TYPES: dict[str, str] = {
    "select": "list",
    "extend-select": "list",
    "ignore": "list",
    "per-file-ignores": "table",
    "exclude": "list",
    "extend-exclude": "list",
    "respect-gitignore": "bool",
    "force-exclude": "bool",
    "fp32-only-callables": "list",
    "autocast-functions": "list",
    "forward-under-autocast": "bool",
    "assume-autocast": "dtype",
    "assume-device": "device",
    "lightning-precision": "lightning",
    "transformers-trainer-precision": "trainer",
    "cache-dir": "string",
    "output-format": "output-format",
    "output-file": "string",
    "torch-version": "version",
}

# Allowed values of the keys that take one of a few strings.
CHOICES: dict[str, tuple[str, ...]] = {
    "dtype": ("float16", "bfloat16"),
    "device": ("cuda", "cpu", "xpu"),
    "lightning": ("16", "16-mixed", "bf16", "bf16-mixed", "32", "32-true", "16-true", "bf16-true"),
    "trainer": ("fp16", "bf16", "no"),
    "output-format": (*OUTPUT_FORMATS, *ALIASES),
}


def load_config(
    start: Path,
    *,
    config_file: Path | None = None,
    select: Sequence[str] | None = None,
    extend_select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    torch_version: str | None = None,
    discover: bool = True,
) -> Config:
    """The configuration for a run started in directory `start`.

    Reads `[tool.amp-lint]` from `config_file` when given, else from the nearest
    `pyproject.toml` at or above `start` that has such a table (as ruff does, pyproject files
    without the table are passed over). Command-line code lists are applied on top: `select`
    replaces the configured selection and, like ruff's `--select`, drops configured ignores so
    that what was asked for is shown; `extend_select` and `ignore` add to it.
    `torch_version` (`--torch-version`) overrides the configured one. With `discover` false
    and no `config_file`, the defaults rooted at `start` (settings_discovery.py has found
    that no config file applies).
    """
    found: Path | None = config_file
    if config_file is not None:
        table = _read_table(config_file, required=True)
        config = _config_from_table(table or {}, config_file)
    else:
        found = find_config_file(start) if discover else None
        if found is None:
            config = Config(root=str(start.resolve()))
        else:
            config = _config_from_table(_read_table(found, required=False) or {}, found)
    config = with_torch_version(config, torch_version, found or start)
    return _with_command_line_codes(config, select, extend_select, ignore)


def find_config_file(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above `start` holding a `[tool.amp-lint]` table."""
    directory = start.resolve()
    for candidate_dir in (directory, *directory.parents):
        candidate = candidate_dir / PYPROJECT
        if is_file(candidate) and _read_table(candidate, required=False) is not None:
            return candidate
    return None


def read_amp_lint_table(path: Path) -> dict[str, object] | None:
    """The `[tool.amp-lint]` table of a TOML file, None if it has none; raises ConfigError
    (naming the file) if it cannot be read or parsed."""
    return _read_table(path, required=False)


def check_code_prefixes(codes: Sequence[str], where: str) -> tuple[str, ...]:
    """The code prefixes that rule selectors ("AMP", "AMP4", "AMP401", "ALL", a rule name such
    as "masked-assign") stand for; ConfigError, naming `where`, if one matches no rule."""
    try:
        return resolve_selectors(codes)
    except UnknownSelector as error:
        raise ConfigError(f"{where}: {error}") from None


def _read_table(path: Path, *, required: bool) -> dict[str, object] | None:
    return amp_lint_table(path, required=required)


def _config_from_table(table: dict[str, object], path: Path) -> Config:
    for key, value in table.items():
        if key not in _KEY_TYPES:
            known = ", ".join(sorted(_KEY_TYPES))
            raise ConfigError(f"{path}: unknown key tool.amp-lint.{key} (known keys: {known})")
        _check_type(key, value, path)

    def strings(key: str) -> tuple[str, ...]:
        value = table.get(key, [])
        assert isinstance(value, list)
        return tuple(str(item) for item in value)

    def codes(key: str) -> tuple[str, ...]:
        return check_code_prefixes(strings(key), f"{path}: tool.amp-lint.{key}")

    select = codes("select") if "select" in table else Config.select
    per_file_ignores = table.get("per-file-ignores", {})
    assert isinstance(per_file_ignores, dict)
    forward_under_autocast = table.get("forward-under-autocast", Config.forward_under_autocast)
    assert isinstance(forward_under_autocast, bool)

    def choice(key: str) -> str | None:
        value = table.get(key)
        return str(value) if value is not None else None

    return Config(
        select=select + codes("extend-select"),
        ignore=codes("ignore"),
        per_file_ignores=tuple(
            (
                pattern,
                check_code_prefixes(
                    file_codes, f"{path}: tool.amp-lint.per-file-ignores.{pattern!r}"
                ),
            )
            for pattern, file_codes in per_file_ignores.items()
        ),
        exclude=strings("exclude"),
        extend_exclude=strings("extend-exclude"),
        respect_gitignore=_flag(table, "respect-gitignore", Config.respect_gitignore),
        force_exclude=_flag(table, "force-exclude", Config.force_exclude),
        fp32_only_callables=strings("fp32-only-callables"),
        autocast_functions=strings("autocast-functions"),
        forward_under_autocast=forward_under_autocast,
        assume_autocast=choice("assume-autocast"),
        assume_device=choice("assume-device"),
        lightning_precision=choice("lightning-precision"),
        transformers_trainer_precision=choice("transformers-trainer-precision"),
        cache_dir=choice("cache-dir"),
        output_format=choice("output-format"),
        output_file=choice("output-file"),
        torch_version=torch_version_setting(table),
        torch_version_source=f"tool.amp-lint.torch-version in {path}"
        if "torch-version" in table
        else None,
        root=str(path.resolve().parent),
    )


def _flag(table: dict[str, object], key: str, default: bool) -> bool:
    value = table.get(key, default)
    assert isinstance(value, bool)  # checked by _check_type
    return value


def _check_type(key: str, value: object, path: Path) -> None:
    expected = _KEY_TYPES[key]
    where = f"{path}: tool.amp-lint.{key}"
    if expected == "bool" and not isinstance(value, bool):
        raise ConfigError(f"{where} must be true or false, not {_toml_type(value)}")
    if expected == "version" and not (isinstance(value, str) and parse_torch_version(value)):
        # A TOML float (`torch-version = 2.1`) is the likely slip; 2.10 would read as 2.1.
        hint = f' ({_toml_type(value)}: write "{value}")' if isinstance(value, float) else ""
        raise ConfigError(
            f"{where} must be a string of the form {SETTING_FORM}, not {value!r}{hint}"
        )
    if expected == "string" and not isinstance(value, str):
        raise ConfigError(f"{where} must be a string, not {_toml_type(value)}")
    if expected in CHOICES:
        allowed = CHOICES[expected]
        if (
            not isinstance(value, (str, int))
            or isinstance(value, bool)
            or str(value) not in allowed
        ):
            raise ConfigError(f"{where} must be one of {', '.join(allowed)}, not {value!r}")
    if expected == "list" and not _is_string_list(value):
        raise ConfigError(f"{where} must be a list of strings, not {_toml_type(value)}")
    if expected == "table":
        if not isinstance(value, dict):
            raise ConfigError(f"{where} must be a table of glob = [codes], not {_toml_type(value)}")
        for pattern, codes in value.items():
            if not _is_string_list(codes):
                raise ConfigError(
                    f"{where}.{pattern!r} must be a list of strings, not {_toml_type(codes)}"
                )


def _is_string_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _toml_type(value: object) -> str:
    names = {
        bool: "a boolean",
        str: "a string",
        int: "an integer",
        float: "a float",
        list: "an array",
        dict: "a table",
    }
    return names.get(type(value), type(value).__name__)


def _with_command_line_codes(
    config: Config,
    select: Sequence[str] | None,
    extend_select: Sequence[str],
    ignore: Sequence[str],
) -> Config:
    if select is not None:
        config = replace(config, select=tuple(select), ignore=())
    return replace(
        config,
        select=config.select + tuple(extend_select),
        ignore=config.ignore + tuple(ignore),
    )
