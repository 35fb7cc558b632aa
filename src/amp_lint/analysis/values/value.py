"""What the interpreter knows about a value: its dtype and a few facts rules ask about,
including the values inside containers (tuples, lists, dicts, nn.Sequential/ModuleList)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from amp_lint.analysis.regions.region import AutocastRegion
from amp_lint.analysis.values.dtypes import OTHER, UNKNOWN, DType, DTypeKind, join

if TYPE_CHECKING:
    # Values that travel between processes (EntryContext) are portable: no syntax nodes,
    # so loading them needs no libcst.
    import libcst as cst


@dataclass(frozen=True)
class Origin:
    """Where a constant passed into a function was written: an argument of the call that
    passed it. A hazard it causes in the callee is the caller's to fix, so it is reported
    there. While the caller's module is the one analysed, `node` is the argument and `call`
    the call (their text is made only for a report: it costs a code generation); across
    files their text and position travel instead."""

    path: str
    written: str = ""  # the argument as written: "-1e20"
    called: str = ""  # the called function as written: "util.replace_masked_values"
    line: int = 0
    column: int = 0
    end_line: int = 0
    end_column: int = 0
    node: cst.CSTNode | None = field(default=None, compare=False)
    call: cst.Call | None = field(default=None, compare=False)
    site: int = 0  # identity of `node`, for equality while unresolved

    @property
    def text(self) -> str:
        if self.node is None:
            return self.written
        from amp_lint.analysis.syntax.outline import source_text  # libcst: only with a node

        return source_text(self.node)

    @property
    def callee(self) -> str:
        if self.call is None:
            return self.called
        from amp_lint.analysis.syntax.outline import source_text  # libcst: only with a node

        return source_text(self.call.func)


@dataclass(frozen=True)
class Fp16Graph:
    """The float16 autocast region a value's autograd graph runs through (see
    autograd_graph.py): how it was entered, and in which file; `node` (the region's call)
    only while that file is the one analysed."""

    spelling: str
    path: str
    node: cst.CSTNode | None = field(default=None, compare=False)
    # The region is an assumption (library mode, a dispatched `forward`, configured
    # functions), not one the code enters: its caller, and that caller's scaler, are unseen.
    assumed: bool = False


@dataclass(frozen=True)
class Value:
    dtype: DType = UNKNOWN
    # A Python number known statically (literals, `float(2**30)`, `torch.finfo(...).min`).
    constant: float | None = None
    # Qualified class of an object, e.g. "torch.nn.Linear", "lpips.LPIPS", "<module>.Net".
    instance_of: str | None = None
    # A context manager object stored in a variable (`ctx = torch.autocast(...)`).
    region: AutocastRegion | None = None
    # A function defined in the module (`def f` binds f), or a method of one of its
    # classes bound to an instance (`self.loss_labels`), whose class is then `bound_to`.
    function: cst.FunctionDef | None = None
    bound_to: str | None = None
    # `y = x.float()` / `x.to(...)`: the conversion call. `.float()` returns x itself when x
    # is already float32, so in-place writes into y may write into x.
    conversion: cst.Call | None = None
    # An integer tensor made from a half-precision float (`(coords * w).long()`): the dtype
    # its values were computed in, and the conversion call.
    integer_from: DType | None = None
    # A container of known length (a tuple, list or dict literal, `nn.Sequential(a, b)`):
    # its elements in order, and for a dict the constant key of each (None: not constant).
    elements: tuple[Value, ...] | None = None
    keys: tuple[str | int | None, ...] | None = None
    # A container of unknown length whose elements are alike (`[f(x) for x in xs]`,
    # `nn.ModuleList(Block() for _ in range(n))`): any one of them.
    each: Value | None = None
    # One of several callables (`losses[name]` over a dict of bound methods): calling the
    # value calls each.
    alternatives: tuple[Value, ...] = ()
    # For a constant received as an argument: the caller's argument it came from.
    origin: Origin | None = None
    # Whether the value is true, where that is known (`x is None` with x bound to None):
    # an `if` on it runs one branch only.
    truth: bool | None = None
    # A dtype object (`torch.float16`, `x.dtype`, a variable holding one): the dtype it names.
    denotes: DType | None = None
    # A short string known statically (`DEVICE = "cuda"`).
    text: str | None = None
    # An optional value that may be None (a parameter defaulting to None, no caller seen):
    # `x is None` is not known, and where it is not None, `dtype` says what it is.
    maybe_none: bool = False
    # `functools.partial(f, x, eps=1e-8)`: the arguments given in advance, positional ones
    # under the name None, for the function (or instance) this value calls.
    preset: tuple[tuple[str | None, Value], ...] = ()
    # Computed under float16 autocast with gradients recorded, or from such a value: a
    # backward through it runs float16 backward ops.
    fp16_graph: Fp16Graph | None = None

    @property
    def is_container(self) -> bool:
        return self.elements is not None or self.each is not None

    def carries_half(self) -> bool:
        """A half-precision tensor, or a container holding one."""
        if self.dtype.is_half:
            return True
        inner = self.elements or ((self.each,) if self.each is not None else ())
        return any(value.carries_half() for value in inner)

    def element(self, key: str | int | None) -> Value | None:
        """`self[key]`; None when nothing is known about the container's elements. An
        unknown key gives any element."""
        if self.elements is not None:
            if self.keys is not None:
                if key is not None and key in self.keys:
                    return self.elements[self.keys.index(key)]
            elif isinstance(key, int) and -len(self.elements) <= key < len(self.elements):
                return self.elements[key]
            return join_all(list(self.elements)) if self.elements else None
        return self.each

    def iterated(self) -> Value | None:
        """The value a `for` loop over this container binds (a dict iterates its keys)."""
        if self.keys:
            return Value(OTHER)
        if self.elements is not None:
            return join_all(list(self.elements)) if self.elements else None
        return self.each

    def portable(self) -> Value:
        """What this value says in another module: dtypes, constants and containers, but no
        syntax nodes or classes, which mean nothing there."""
        return Value(
            dtype=self.dtype,
            constant=self.constant,
            origin=self.origin if self.origin is None or self.origin.node is None else None,
            integer_from=self.integer_from,
            elements=tuple(e.portable() for e in self.elements) if self.elements else None,
            keys=self.keys if self.elements else None,
            each=self.each.portable() if self.each is not None else None,
            denotes=self.denotes,
            text=self.text,
            # `with amp_off(x):`, a helper in another file returning
            # `torch.autocast(..., enabled=False)`: the region, without its syntax nodes.
            region=self.region.portable() if self.region is not None else None,
            fp16_graph=_portable_graph(self.fp16_graph),
        )


def _portable_graph(graph: Fp16Graph | None) -> Fp16Graph | None:
    return graph if graph is None or graph.node is None else replace(graph, node=None)


UNKNOWN_VALUE = Value()
# Alternatives kept before a join gives up on which callable runs.
MAX_ALTERNATIVES = 8


def join_values(a: Value, b: Value) -> Value:
    if a == b:
        return a
    elements, keys = _join_elements(a, b)
    return Value(
        dtype=join(a.dtype, b.dtype),
        constant=a.constant if a.constant == b.constant else None,
        instance_of=a.instance_of if a.instance_of == b.instance_of else None,
        region=_join_regions(a.region, b.region),
        function=a.function if a.function is b.function else None,
        bound_to=a.bound_to if a.bound_to == b.bound_to else None,
        preset=a.preset if a.preset == b.preset else (),
        truth=a.truth if a.truth == b.truth else None,
        denotes=a.denotes if a.denotes == b.denotes else None,
        text=a.text if a.text == b.text else None,
        maybe_none=a.maybe_none
        or b.maybe_none
        or (a.dtype.kind is not b.dtype.kind and DTypeKind.NONE in (a.dtype.kind, b.dtype.kind)),
        conversion=a.conversion if a.conversion is b.conversion else None,
        origin=a.origin if a.origin == b.origin else None,
        integer_from=a.integer_from if a.integer_from == b.integer_from else None,
        elements=elements,
        keys=keys,
        each=_join_each(a, b) if elements is None else None,
        alternatives=_join_alternatives(a, b),
        fp16_graph=a.fp16_graph or b.fp16_graph,
    )


def join_all(values: list[Value]) -> Value:
    result = values[0]
    for value in values[1:]:
        result = join_values(result, value)
    return result


def _join_elements(
    a: Value, b: Value
) -> tuple[tuple[Value, ...] | None, tuple[str | int | None, ...] | None]:
    """Element-wise, when both paths built containers of the same shape."""
    if a.elements is None or b.elements is None:
        return None, None
    if len(a.elements) != len(b.elements) or a.keys != b.keys:
        return None, None
    return tuple(join_values(x, y) for x, y in zip(a.elements, b.elements)), a.keys


def _join_each(a: Value, b: Value) -> Value | None:
    """Any element of either container, when both are containers; an empty one (`cache =
    {}` on one path, filled on the other) adds nothing."""
    if not (a.is_container and b.is_container):
        return None
    sides = [side for side in (a.iterated(), b.iterated()) if side is not None]
    if not sides or (a.keys and b.keys):
        return None
    return join_all(sides)


def _callable(value: Value) -> bool:
    return value.function is not None or value.instance_of is not None


def _join_alternatives(a: Value, b: Value) -> tuple[Value, ...]:
    """Two different callables meeting (`f = g if c else h`): keep both to call each."""
    same = a.function is b.function and a.instance_of == b.instance_of and a.preset == b.preset
    if same and not (a.alternatives or b.alternatives):
        return ()
    options: list[Value] = []
    for side in (a, b):
        for option in side.alternatives or ((side,) if _callable(side) else ()):
            if option not in options:
                options.append(option)
    if len(options) < 2 or len(options) > MAX_ALTERNATIVES:
        return ()
    return tuple(options)


def _join_regions(a: AutocastRegion | None, b: AutocastRegion | None) -> AutocastRegion | None:
    """`ctx = autocast(...) if amp else nullcontext()`: a region that may or may not be on."""
    if a == b:
        return a
    region = a or b
    if region is None:
        return None
    if a is not None and b is not None and a.key != b.key:
        return replace(region, dtype=None if a.dtype != b.dtype else a.dtype, enabled=None)
    return replace(region, enabled=None if region.enabled is not False else False)


class Env:
    """Variables of one frame, keyed by dotted name ("x", "self.fc")."""

    def __init__(self, values: dict[str, Value] | None = None) -> None:
        self.values: dict[str, Value] = dict(values or {})

    def get(self, name: str) -> Value | None:
        return self.values.get(name)

    def set(self, name: str, value: Value) -> None:
        self.values[name] = value
        # Rebinding `x` invalidates what we knew about `x.attr`.
        prefix = name + "."
        for key in [k for k in self.values if k.startswith(prefix)]:
            del self.values[key]

    def copy(self) -> Env:
        return Env(self.values)

    def merge(self, other: Env, outer: Env | None = None) -> Env:
        """Join two control-flow paths. A name bound on one path only is unbound on the
        other, where reading it raises: where it is read, it holds the one value, unless
        `outer` (the module) has one too (a global cache filled on one path)."""
        merged = Env()
        for name in self.values.keys() | other.values.keys():
            mine, theirs = self.values.get(name), other.values.get(name)
            if mine is None or theirs is None:
                present = mine or theirs
                assert present is not None
                before = outer.get(name) if outer is not None else None
                merged.values[name] = join_values(present, before) if before else present
            else:
                merged.values[name] = join_values(mine, theirs)
        return merged
