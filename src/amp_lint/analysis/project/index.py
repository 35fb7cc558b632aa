"""The files of one run seen as a project: which linted file a dotted module name is, and the
contexts in which analysis enters a file from another one.

Imports are resolved against the linted files only, by path arithmetic (no file system access
and no parsing): `models.attn` is the linted file whose path ends in `models/attn.py` or
`models/attn/__init__.py`; `.losses` is `losses.py` beside the importing file. Where several
linted files share a dotted suffix (many projects have a `utils.py`), the one inside the
importing file's package wins; if that does not decide, the import is left unresolved, since
a wrong target would produce findings in the wrong file.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from amp_lint.analysis.regions.region import AutocastRegion
from amp_lint.analysis.values.dtypes import DType
from amp_lint.analysis.values.value import Value
from amp_lint.sources.files import read_source

# Instances of classes defined in other linted files: "project:<path>:<Class>".
PROJECT_PREFIX = "project:"
# Modules (files, or a file's own classes) a dispatch may reach: beyond this, the program is a
# model zoo, which of its modules an opaque call runs is anyone's guess, and guessing all of
# them is library mode (`--assume-autocast`), which the user asks for.
MAX_DISPATCH_TARGETS = 64
# Longest dotted suffix of a path recorded as a module name; deeper imports are rare.
_MAX_NAME_PARTS = 8


@dataclass(frozen=True)
class ProjectTarget:
    path: str  # the linted file, as discovered
    attribute: str  # what is reached inside it: "attention", "SSIMLoss", "SSIMLoss.forward"

    @property
    def looks_like_class(self) -> bool:
        """`SSIMLoss` (a class, called to build an instance) versus `ssim` (a function). The
        file holding it is not parsed yet, so PEP 8 naming decides."""
        return "." not in self.attribute and self.attribute[:1].isupper()


@dataclass
class ProjectIndex:
    """Dotted module names of the linted files."""

    by_name: dict[str, list[str]] = field(default_factory=dict)
    # Normalised absolute path -> the path as discovered.
    by_absolute: dict[str, str] = field(default_factory=dict)
    # Linted files whose text is not the disk's (an editor's unsaved buffers, in the language
    # server): analysing one file reads the others through `source`, which gives these.
    unsaved: dict[str, bytes] = field(default_factory=dict)

    def source(self, path: str) -> bytes:
        """A linted file's bytes as this run sees them; raises OSError as read_source does."""
        text = self.unsaved.get(path)
        return text if text is not None else read_source(path)

    @classmethod
    def from_paths(cls, paths: Iterable[str]) -> ProjectIndex:
        index = cls()
        for path in paths:
            absolute = _absolute(path)
            index.by_absolute[absolute] = path
        packages = {
            os.path.dirname(a) for a in index.by_absolute if os.path.basename(a) == "__init__.py"
        }
        for absolute, path in index.by_absolute.items():
            for name in _dotted_suffixes(absolute, packages):
                index.by_name.setdefault(name, []).append(path)
        return index

    def resolve(self, qualified: str, from_path: str) -> ProjectTarget | None:
        """The linted file and attribute an imported dotted name refers to, if any."""
        if qualified.startswith("."):
            return self._resolve_relative(qualified, from_path)
        parts = qualified.split(".")
        for split in range(len(parts) - 1, 0, -1):
            path = self._module_path(".".join(parts[:split]), from_path)
            if path is not None:
                return ProjectTarget(path, ".".join(parts[split:]))
        return None

    def _module_path(self, module: str, from_path: str) -> str | None:
        candidates = self.by_name.get(module)
        if not candidates:
            return None
        if len(candidates) == 1:
            return candidates[0]
        # `utils` from inside a package: the candidate sharing the longest directory prefix.
        here = os.path.dirname(_absolute(from_path))
        ranked = sorted(candidates, key=lambda c: -len(os.path.commonpath([here, _absolute(c)])))
        best, second = ranked[0], ranked[1]
        same = os.path.commonpath([here, _absolute(best)]) == os.path.commonpath(
            [here, _absolute(second)]
        )
        return None if same else best

    def _resolve_relative(self, qualified: str, from_path: str) -> ProjectTarget | None:
        level = len(qualified) - len(qualified.lstrip("."))
        parts = [p for p in qualified[level:].split(".") if p]
        directory = os.path.dirname(_absolute(from_path))
        for _ in range(level - 1):
            directory = os.path.dirname(directory)
        for split in range(len(parts) - 1, -1, -1):
            module_dir = os.path.join(directory, *parts[:split])
            attribute = ".".join(parts[split:])
            if not attribute:
                continue
            for candidate in (module_dir + ".py", os.path.join(module_dir, "__init__.py")):
                path = self.by_absolute.get(os.path.normpath(candidate))
                if path is not None and (split > 0 or candidate.endswith("__init__.py")):
                    return ProjectTarget(path, attribute)
        return None


def _absolute(path: str) -> str:
    return os.path.normpath(os.path.abspath(path))


def _dotted_suffixes(absolute: str, packages: set[str]) -> list[str]:
    """The dotted names an absolute import may reach this file by: `parlai.utils.torch` for
    parlai/utils/torch.py, but not `torch` or `utils.torch` when parlai/utils/ and parlai/
    are packages (a linted `__init__.py`), whose modules only their full name reaches."""
    stem, extension = os.path.splitext(absolute)
    if extension == ".ipynb":  # a notebook imports project modules; nothing imports it
        return []
    parts = [p for p in stem.split(os.sep) if p]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    if not parts or not all(p.isidentifier() for p in parts[-1:]):
        return []
    names = []
    for length in range(1, min(len(parts), _MAX_NAME_PARTS) + 1):
        suffix = parts[-length:]
        if not all(p.isidentifier() for p in suffix):
            break
        parent = os.sep + os.path.join(*parts[:-length]) if len(parts) > length else os.sep
        if parent not in packages:
            names.append(".".join(suffix))
    return names


@dataclass(frozen=True)
class EntryContext:
    """A call from one linted file into another, made under autocast or with half-precision
    arguments: the callee's file is analysed again from this function, in this context."""

    path: str
    target: str  # "attention", "Attention.__call__", "Attention.method"
    regions: tuple[AutocastRegion, ...]  # outermost first, without their syntax nodes
    positional: tuple[Value, ...] = ()  # portable values (Value.portable)
    keywords: tuple[tuple[str, Value], ...] = ()
    chain: tuple[str, ...] = ()  # "train.py:88", one per call from the region
    assumption: str | None = None
    depth: int = 0
    # The caller runs in a model cast to half (Frame.half_params).
    half_params: DType | None = None
    # The caller was analysed because of a dispatch (Frame.dispatched).
    dispatched: bool = False

    @property
    def key(self) -> tuple[object, ...]:
        """What makes two entries analyse the same thing; the chain is only for messages."""
        return (
            self.path,
            self.target,
            tuple(r.key for r in self.regions),
            self.positional,
            self.keywords,
            self.half_params,
            self.dispatched,
        )


@dataclass(frozen=True)
class ClassAssumption:
    """Methods run under autocast without a call amp-lint can see: Lightning's
    `training_step` of every LightningModule once a `Trainer(precision="16-mixed")` exists,
    the `forward` of a model given to `accelerator.prepare`, the `forward` of the modules a
    region may be running when it calls a model it received as a parameter or built from a
    registry (dispatch). Classes match by a base's or their own name."""

    # "LightningModule": subclasses, or the class itself; empty: every class that has a
    # base class (nn.Module subclasses, also through bases in other files).
    class_names: tuple[str, ...]
    methods: tuple[str, ...]
    # The autocast they run under; None for a model cast to half with no autocast.
    region: AutocastRegion | None
    why: str
    # The linted file defining the class, when the assumption names one class.
    path: str | None = None
    # Only the files of the program around this one (ImportGraph.program): a region there
    # calls a model amp-lint cannot resolve, which may be any of their modules.
    near: str | None = None
    # The dtype of the parameters, for a model cast to half (`model.half()`).
    half_params: DType | None = None
    # The dispatched call's positional arguments (portable values; UNKNOWN where not
    # known), bound to the parameters after `self`.
    positional: tuple[Value, ...] = ()
    # A model's call (not a loss's): classes named as losses or metrics (`DiceLoss`) are not
    # what it runs.
    models_only: bool = False


def dispatch_key(assumption: ClassAssumption) -> object:
    """Dispatch assumptions from different calls under the same region (or casts to the same
    dtype) analyse the same methods: one is enough. Others are kept whole."""
    if assumption.near is None:
        return assumption
    precision = assumption.half_params.precision if assumption.half_params else None
    region = assumption.region.key if assumption.region is not None else None
    return ("dispatch", region, precision, assumption.methods, assumption.positional)


@dataclass(frozen=True)
class ProjectContext:
    """What one file's analysis gets from the rest of the project."""

    project: ProjectIndex | None = None
    # Calls from other files into this one, and framework assumptions found elsewhere.
    entries: tuple[EntryContext, ...] = ()
    assumptions: tuple[ClassAssumption, ...] = ()
    # False when the file's own roots were analysed already (an earlier round).
    own_roots: bool = True


SINGLE_FILE = ProjectContext()
