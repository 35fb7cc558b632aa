"""Which expressions of a function hold a model's parameters, or collections of them, as far
as the syntax shows (AMP307 asks, to recognise in-place updates of the weights).

A collection is followed through the function's variables and the usual ways of building one:
`model.parameters()`, `model.named_parameters()` (pairs: the parameter is the second item),
`list`, `tuple`, `set`, `sorted`, `filter(f, ...)`, `zip`, `enumerate`, `itertools.chain`,
`a + b`, list and generator comprehensions (`[p for n, p in model.named_parameters() if ...]`;
`[p.grad for p in params]` holds gradients, not parameters) and an optimizer's `param_groups`,
whose groups' `["params"]` are parameters. The `.data` of a parameter or of any name
(`model.fc.weight.data`, but not `p.grad.data`) counts as one too: code rarely takes it of
anything else. A name holds what its first assignment or `for` loop in its function gives it
when every later one agrees (`params = [p for p in params if p.requires_grad]` does);
otherwise, or when it is bound any other way (a function parameter, `with ... as`), it holds
nothing known.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import libcst as cst

from amp_lint.analysis.syntax.outline import (
    child_nodes,
    dotted_name,
    own_small_statements,
    positional_arguments,
    walk_function_statements,
)
from amp_lint.analysis.values.literals import number_literal, string_literal


@dataclass(frozen=True)
class Shape:
    """What an expression holds: a parameter, an optimizer's param group (a dict whose
    "params" are parameters), a collection of things of one shape, or a tuple of shapes."""

    kind: str  # "parameter", "group", "collection" or "tuple"
    parts: tuple[Shape | None, ...] = ()


PARAMETER = Shape("parameter")
GROUP = Shape("group")
# Calls that return their argument's items as another collection: `list(model.parameters())`.
_SAME_ITEMS = frozenset(["list", "tuple", "set", "iter", "reversed", "sorted"])
# Calls whose items are made of their arguments' items.
_ITEMS_OF_ARGUMENTS = _SAME_ITEMS | {"filter", "enumerate", "zip", "chain"}


def _collection(of: Shape | None) -> Shape | None:
    return Shape("collection", (of,)) if of is not None else None


def _tuple(parts: Iterable[Shape | None]) -> Shape | None:
    shapes = tuple(parts)
    return Shape("tuple", shapes) if any(s is not None for s in shapes) else None


def _item(shape: Shape | None) -> Shape | None:
    """The shape of one item of a collection."""
    return shape.parts[0] if shape is not None and shape.kind == "collection" else None


def _at(shape: Shape | None, path: tuple[int, ...]) -> Shape | None:
    """The part that unpacking at `path` takes: `(n, p)` of a pair, any item of a collection."""
    for index in path:
        if shape is None:
            return None
        if shape.kind == "tuple":
            shape = shape.parts[index] if index < len(shape.parts) else None
        else:
            shape = _item(shape)
    return shape


@dataclass(frozen=True)
class _Binding:
    value: cst.BaseExpression
    path: tuple[int, ...]  # where in the (unpacked) value the name sits
    loop: bool  # a `for` target: bound to the items of `value`


class ParameterScope:
    """The names of one function (or of a module's top level) that hold parameters or
    collections of them. Names a function does not bind are looked up in the enclosing one."""

    def __init__(
        self,
        statements: Iterable[cst.BaseStatement],
        parent: ParameterScope | None = None,
        parameters: Iterable[str] = (),
    ) -> None:
        self.parent = parent
        # Each name's bindings; None for one whose value is not known (a function's
        # parameter, `with ... as name`, `first, *rest = ...`).
        self._bindings: dict[str, list[_Binding | None]] = {}
        self._shapes: dict[str, Shape | None] = {}
        self._resolving: set[str] = set()
        for name in parameters:
            self._bindings[name] = [None]
        for statement in statements:
            self._add(statement)

    def is_parameter(self, node: cst.BaseExpression) -> bool:
        return self.shape(node) == PARAMETER

    def is_parameter_collection(self, node: cst.BaseExpression) -> bool:
        return _item(self.shape(node)) == PARAMETER

    def shape(
        self, node: cst.BaseExpression, local: Mapping[str, Shape | None] | None = None
    ) -> Shape | None:
        """What `node` holds; `local` binds a comprehension's own names."""
        local = local or {}
        if isinstance(node, cst.Name):
            return local[node.value] if node.value in local else self._name(node.value)
        if isinstance(node, cst.Attribute):
            if node.attr.value == "param_groups":
                return _collection(GROUP)
            if node.attr.value != "data":
                return None
            if self.shape(node.value, local) == PARAMETER:  # params[i].data
                return PARAMETER
            # `model.fc.weight.data`, `p.data`; not a gradient's (`p.grad.data`).
            name = dotted_name(node.value)
            return PARAMETER if name is not None and not name.endswith(".grad") else None
        if isinstance(node, cst.Subscript):
            return self._subscript(node, local)
        if isinstance(node, cst.Call):
            return self._call(node, local)
        if isinstance(node, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            return self._comprehension(node, local)
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
            left = self.shape(node.left, local)  # list(a.parameters()) + list(b.parameters())
            same = _item(left) is not None and left == self.shape(node.right, local)
            return left if same else None
        return None

    # --- bindings ----------------------------------------------------------------------------

    def _add(self, statement: cst.BaseStatement) -> None:
        if isinstance(statement, cst.For):
            self._bind(statement.target, statement.iter, loop=True)
        elif isinstance(statement, cst.With):
            for item in statement.items:
                if item.asname is not None:
                    for name, _ in _target_paths(item.asname.name):
                        self._bindings.setdefault(name, []).append(None)
        for small in own_small_statements(statement):
            if isinstance(small, cst.Assign):
                for target in small.targets:
                    self._bind(target.target, small.value, loop=False)
            elif isinstance(small, cst.AnnAssign) and small.value is not None:
                self._bind(small.target, small.value, loop=False)

    def _bind(self, target: cst.BaseExpression, value: cst.BaseExpression, loop: bool) -> None:
        for name, path in _target_paths(target):
            binding = _Binding(value, path, loop) if path is not None else None
            self._bindings.setdefault(name, []).append(binding)

    def _name(self, name: str) -> Shape | None:
        if name not in self._bindings:
            return self.parent._name(name) if self.parent is not None else None
        if name in self._shapes:  # known, or being checked (`params = [p for p in params]`)
            return self._shapes[name]
        if name in self._resolving:  # its first binding refers to itself
            return None
        self._resolving.add(name)
        known = set(self._shapes)
        first, *rest = self._bindings[name]
        # What the first binding gives it, if every later one (which may read it) agrees.
        shape = self._shapes[name] = self._bound(first)
        if any(self._bound(binding) != shape for binding in rest):
            shape = None
            for other in set(self._shapes) - known:  # they may have read the guess
                del self._shapes[other]
        self._shapes[name] = shape
        self._resolving.discard(name)
        return shape

    def _bound(self, binding: _Binding | None) -> Shape | None:
        if binding is None:
            return None
        value = self.shape(binding.value)
        return _at(_item(value) if binding.loop else value, binding.path)

    # --- expressions -------------------------------------------------------------------------

    def _subscript(self, node: cst.Subscript, local: Mapping[str, Shape | None]) -> Shape | None:
        base = self.shape(node.value, local)
        if base is None or len(node.slice) != 1:
            return None
        index = node.slice[0].slice
        if not isinstance(index, cst.Index):  # params[1:]
            return base if base.kind == "collection" else None
        if base == GROUP:
            return _collection(PARAMETER) if string_literal(index.value) == "params" else None
        if base.kind == "tuple":
            number = number_literal(index.value)
            return _at(base, (number,)) if isinstance(number, int) and number >= 0 else None
        return _item(base)

    def _call(self, node: cst.Call, local: Mapping[str, Shape | None]) -> Shape | None:
        func = node.func
        if isinstance(func, cst.Attribute):
            if func.attr.value == "parameters":
                return _collection(PARAMETER)
            if func.attr.value == "named_parameters":
                return _collection(_tuple([None, PARAMETER]))
            name = func.attr.value if func.attr.value == "chain" else ""  # itertools.chain
        else:
            name = func.value if isinstance(func, cst.Name) else ""
        if name not in _ITEMS_OF_ARGUMENTS or any(arg.star for arg in node.args):
            return None
        args = [self.shape(arg, local) for arg in positional_arguments(node)]
        if name in _SAME_ITEMS and len(args) == 1:
            return _collection(_item(args[0]))
        if name == "filter" and len(args) == 2:
            return _collection(_item(args[1]))
        if name == "enumerate" and args:
            return _collection(_tuple([None, _item(args[0])]))
        if name == "zip":
            return _collection(_tuple(_item(arg) for arg in args))
        if name == "chain" and args and all(arg == args[0] for arg in args):
            return _collection(_item(args[0]))
        return None

    def _comprehension(
        self, node: cst.ListComp | cst.GeneratorExp | cst.SetComp, local: Mapping[str, Shape | None]
    ) -> Shape | None:
        names = dict(local)
        clause: cst.CompFor | None = node.for_in
        while clause is not None:
            items = _item(self.shape(clause.iter, names))
            for name, path in _target_paths(clause.target):
                names[name] = _at(items, path) if path is not None else None
            clause = clause.inner_for_in
        return _collection(self.shape(node.elt, names))


def parameter_scopes(module: cst.Module) -> dict[int, ParameterScope]:
    """A scope for the module's top level (keyed by the module's id) and one for every
    function (keyed by the function's id)."""
    top = ParameterScope(_top_level_statements(module.body))
    scopes = {id(module): top}
    _add_function_scopes(module.body, top, scopes)
    return scopes


def function_scope(function: cst.FunctionDef, parent: ParameterScope) -> ParameterScope:
    return ParameterScope(
        walk_function_statements(function), parent, _parameter_names(function.params)
    )


def _add_function_scopes(
    statements: Iterable[cst.BaseStatement],
    parent: ParameterScope,
    scopes: dict[int, ParameterScope],
) -> None:
    for statement in statements:
        inner = parent  # a class body is no scope its methods see
        if isinstance(statement, cst.FunctionDef):
            inner = scopes[id(statement)] = function_scope(statement, parent)
        for block in child_blocks(statement):
            _add_function_scopes(block, inner, scopes)


def _top_level_statements(statements: Iterable[cst.BaseStatement]) -> Iterator[cst.BaseStatement]:
    """The module's statements outside functions and classes, nested blocks included."""
    for statement in statements:
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            continue
        yield statement
        for block in child_blocks(statement):
            yield from _top_level_statements(block)


def body_of(suite: cst.BaseSuite) -> Sequence[cst.BaseStatement]:
    if isinstance(suite, cst.IndentedBlock):
        return suite.body
    if isinstance(suite, cst.SimpleStatementSuite):
        return [cst.SimpleStatementLine(body=suite.body)]
    return []


def child_blocks(statement: cst.BaseStatement) -> Iterator[Sequence[cst.BaseStatement]]:
    """The statement lists of a compound statement (an `elif` as a list of its own)."""
    if not isinstance(statement, cst.BaseCompoundStatement):
        return
    for child in child_nodes(statement):
        if isinstance(child, cst.BaseSuite):
            yield body_of(child)
        elif isinstance(
            child, (cst.Else, cst.Finally, cst.ExceptHandler, cst.ExceptStarHandler, cst.MatchCase)
        ):
            yield body_of(child.body)
        elif isinstance(child, cst.If):
            yield [child]


def _target_paths(target: cst.BaseExpression) -> Iterator[tuple[str, tuple[int, ...] | None]]:
    """The names an assignment or `for` target binds, each with where it sits in the value
    (`for i, (n, p) in ...`: i at (0,), n at (1, 0), p at (1, 1)); None after a `*name`."""
    if isinstance(target, cst.Name):
        yield target.value, ()
    elif isinstance(target, (cst.Tuple, cst.List)):
        starred = False
        for index, element in enumerate(target.elements):
            if isinstance(element, cst.StarredElement):
                starred = True
                for name, _ in _target_paths(element.value):
                    yield name, None
                continue
            for name, path in _target_paths(element.value):
                yield name, ((index, *path) if path is not None and not starred else None)


def _parameter_names(params: cst.Parameters) -> Iterator[str]:
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        yield param.name.value
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            yield star.name.value
