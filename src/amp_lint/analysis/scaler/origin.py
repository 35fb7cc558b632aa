"""Which GradScaler constructor of the module a `scaler.scale(...)` call's scaler was built by
(AMP310), where the file shows it precisely:

* a name assigned in the same function (or script) from a constructor, every assignment of
  it there one;
* `self.NAME` assigned from a constructor in one method;
* a module-level name (`scaler = GradScaler()` at the top, or under
  `if __name__ == "__main__":`) that the function reads without binding it;
* a parameter of a module-level function that every call of the function in the file binds
  to a scaler found by these rules (`train(..., scaler)` from `main()`), when the function
  is named nowhere else in the file (passed as a callback, its callers are unknown) and no
  call sits in a `with` that could open a region.

A parameter of a method, or of a function with no call in the file, has unknown callers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import libcst as cst

from amp_lint.analysis.scaler.names import SCALER_CONSTRUCTORS, is_disabled
from amp_lint.analysis.syntax.calls import ModuleIndex
from amp_lint.analysis.syntax.module import ModuleFacts
from amp_lint.analysis.syntax.names import dotted_name
from amp_lint.analysis.syntax.outline import subtree_nodes

# How many callers deep a parameter is followed (`main` -> `train` -> `train_one_epoch`).
_MAX_CALLERS = 3

WithItems = tuple[cst.WithItem, ...]


@dataclass
class ScalerOrigins:
    facts: ModuleFacts
    index: ModuleIndex
    # Whether a `with` item is certainly no autocast region.
    plain: Callable[[cst.WithItem], bool]
    constructors: list[tuple[str, cst.Call]] = field(default_factory=list)
    # id(call) -> (its function, that function's body, the `with` items around the call).
    _call_sites: dict[int, tuple[cst.FunctionDef | None, list[cst.BaseStatement], WithItems]] = (
        field(default_factory=dict)
    )

    def __post_init__(self) -> None:
        self.constructors = enabled_constructors(self.facts)

    def constructor_of(
        self, scale: cst.Call, function: cst.FunctionDef | None, body: list[cst.BaseStatement]
    ) -> cst.Call | None:
        assert isinstance(scale.func, cst.Attribute)
        spelled = dotted_name(scale.func.value)
        return self._origin(spelled, function, body, 0) if spelled else None

    def _origin(
        self,
        spelled: str,
        function: cst.FunctionDef | None,
        body: list[cst.BaseStatement],
        depth: int,
    ) -> cst.Call | None:
        local = _built_here(spelled, body, self.constructors)
        if local is not None:
            return local
        if spelled.startswith("self."):
            matches = [call for target, call in self.constructors if target == spelled]
            return matches[-1] if len(matches) == 1 else None
        if "." in spelled or function is None:
            return None
        if _binds(function.body, spelled) or _assigned(spelled, block(function.body)):
            return None
        if spelled in _parameter_names(function):
            return self._from_callers(function, spelled, depth)
        return self._module_level(spelled)

    def _module_level(self, name: str) -> cst.Call | None:
        """The constructor a module-level name is built by, when nothing else binds it
        there and no function declares it `global`."""
        module = self.facts.module
        if (
            _binds(module, name)
            or _assigned_otherwise(name, list(module.body))
            or any(
                isinstance(node, cst.Global) and any(n.name.value == name for n in node.names)
                for node in subtree_nodes(module)
            )
        ):
            return None
        return _built_here(name, list(module.body), self.constructors)

    def _from_callers(
        self, function: cst.FunctionDef, parameter: str, depth: int
    ) -> cst.Call | None:
        name = function.name.value
        if depth >= _MAX_CALLERS or self.index.functions.get(name) is not function:
            return None
        calls = [
            node
            for node in subtree_nodes(self.facts.module)
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Name)
            if node.func.value == name
        ]
        named = sum(
            1
            for node in subtree_nodes(self.facts.module)
            if isinstance(node, cst.Name) and node.value == name
        )
        if not calls or named != len(calls) + 1:  # + the `def`'s own name
            return None
        found: list[cst.Call] = []
        for call in calls:
            site = self._sites().get(id(call))
            argument = _argument_for(function, parameter, call)
            spelled = dotted_name(argument) if argument is not None else None
            if site is None or spelled is None or not all(self.plain(i) for i in site[2]):
                return None
            origin = self._origin(spelled, site[0], site[1], depth + 1)
            if origin is None:
                return None
            found.append(origin)
        return found[0]

    def _sites(
        self,
    ) -> dict[int, tuple[cst.FunctionDef | None, list[cst.BaseStatement], WithItems]]:
        """Where each call of a simple statement is (calls in `if` or `for` headers are not
        there: their callers count as unknown)."""
        if not self._call_sites:
            scopes: list[cst.FunctionDef | None] = [None, *self.index.all_functions]
            for function in scopes:
                body: list[cst.BaseStatement] = (
                    block(function.body) if function is not None else list(self.facts.module.body)
                )
                for statement, withs in statements_with_context(body):
                    for node in subtree_nodes(statement):
                        if isinstance(node, cst.Call):
                            self._call_sites[id(node)] = (function, body, withs)
        return self._call_sites


def enabled_constructors(facts: ModuleFacts) -> list[tuple[str, cst.Call]]:
    """(spelling, call) of every `x = GradScaler(...)` not disabled by a literal."""
    found: list[tuple[str, cst.Call]] = []
    for call, targets in assigned_calls(facts.module):
        if facts.names.qualified_name(call.func) in SCALER_CONSTRUCTORS and not is_disabled(call):
            found.extend((target, call) for target in targets)
    return found


def assigned_calls(node: cst.CSTNode, nested: bool = True) -> Iterator[tuple[cst.Call, list[str]]]:
    for small in _small_statements(node, nested):
        if isinstance(small, cst.Assign) and isinstance(small.value, cst.Call):
            targets = [dotted_name(t.target) for t in small.targets]
            yield small.value, [t for t in targets if t]
        elif (
            isinstance(small, cst.AnnAssign)
            and isinstance(small.value, cst.Call)
            and dotted_name(small.target)
        ):
            yield small.value, [dotted_name(small.target) or ""]


def _small_statements(node: cst.CSTNode, nested: bool) -> Iterator[cst.BaseSmallStatement]:
    """In source order; inside functions and classes defined in `node` if `nested`."""
    stack: list[cst.CSTNode] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.SimpleStatementLine):
            yield from current.body
        elif isinstance(current, (cst.FunctionDef, cst.ClassDef)) and not nested:
            continue
        elif not isinstance(current, cst.BaseExpression):
            stack.extend(reversed(current.children))


def _built_here(
    spelled: str, body: list[cst.BaseStatement], constructors: list[tuple[str, cst.Call]]
) -> cst.Call | None:
    """The scaler constructor `spelled` is assigned from in `body` (not in functions
    defined there), if every assignment of it there is one."""
    assigned = [
        call
        for statement in body
        for call, targets in assigned_calls(statement, nested=False)
        if spelled in targets
    ]
    built = [c for c in assigned if any(c is call for _, call in constructors)]
    return built[-1] if built and len(built) == len(assigned) else None


def _binds(root: cst.CSTNode, name: str) -> bool:
    """Whether `root` (not the functions and classes defined in it) binds `name` other than
    by `name = ...`: a `for`, `with ... as`, an import, `:=`, `global`, a `def`..."""
    stack: list[cst.CSTNode] = list(root.children)
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            if node.name.value == name:
                return True
            continue
        if any(
            isinstance(part, cst.Name) and part.value == name
            for target in _binding_targets(node)
            for part in subtree_nodes(target)
        ):
            return True
        stack.extend(node.children)
    return False


def _binding_targets(node: cst.CSTNode) -> list[cst.CSTNode]:
    if isinstance(node, (cst.For, cst.CompFor, cst.AugAssign, cst.NamedExpr, cst.Del)):
        return [node.target]
    if isinstance(node, cst.AsName):
        return [node.name]
    if isinstance(node, cst.ImportAlias) and node.asname is None:
        return [node.name]
    if isinstance(node, (cst.Global, cst.Nonlocal)):
        return [item.name for item in node.names]
    return []


def _assigned(name: str, body: list[cst.BaseStatement]) -> bool:
    """Whether an assignment in `body` (not in functions defined there) names `name` in a
    target: `name = ...`, `a, name = ...`, `name.x = ...`."""
    return any(name in _target_names(small) for small in _assignments(body))


def _assigned_otherwise(name: str, body: list[cst.BaseStatement]) -> bool:
    """Whether `body` assigns `name` other than as the whole target (`a, name = ...`)."""
    return any(
        name in _target_names(small) and name not in _whole_targets(small)
        for small in _assignments(body)
    )


def _assignments(body: list[cst.BaseStatement]) -> Iterator[cst.Assign | cst.AnnAssign]:
    for statement in body:
        for small in _small_statements(statement, nested=False):
            if isinstance(small, (cst.Assign, cst.AnnAssign)):
                yield small


def _targets(small: cst.Assign | cst.AnnAssign) -> list[cst.BaseExpression]:
    return [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]


def _target_names(small: cst.Assign | cst.AnnAssign) -> set[str]:
    return {
        node.value
        for target in _targets(small)
        for node in subtree_nodes(target)
        if isinstance(node, cst.Name)
    }


def _whole_targets(small: cst.Assign | cst.AnnAssign) -> set[str]:
    return {name for target in _targets(small) if (name := dotted_name(target))}


def _parameter_names(function: cst.FunctionDef) -> list[str]:
    params = function.params
    return [p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)]


def _argument_for(
    function: cst.FunctionDef, parameter: str, call: cst.Call
) -> cst.BaseExpression | None:
    """The argument `call` binds `parameter` to; None when a `*args`/`**kwargs` hides it or
    the default applies."""
    if any(arg.star for arg in call.args):
        return None
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == parameter:
            return arg.value
    params = function.params
    positional = [p.name.value for p in (*params.posonly_params, *params.params)]
    given = [arg.value for arg in call.args if arg.keyword is None]
    if parameter not in positional:
        return None
    position = positional.index(parameter)
    return given[position] if position < len(given) else None


def statements_with_context(
    body: list[cst.BaseStatement],
) -> Iterator[tuple[cst.SimpleStatementLine, WithItems]]:
    """The simple statements of a body (not of functions and classes defined in it), each
    with the `with` items around it."""
    stack: list[tuple[cst.BaseStatement, WithItems]] = [(s, ()) for s in reversed(body)]
    while stack:
        statement, withs = stack.pop()
        if isinstance(statement, cst.SimpleStatementLine):
            yield statement, withs
        elif not isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            inner = (*withs, *statement.items) if isinstance(statement, cst.With) else withs
            stack.extend((s, inner) for s in reversed(list(_nested(statement))))


def block(suite: cst.BaseSuite) -> list[cst.BaseStatement]:
    return list(suite.body) if isinstance(suite, cst.IndentedBlock) else []


def _nested(statement: cst.BaseStatement) -> Iterator[cst.BaseStatement]:
    """The statements of a compound statement's own blocks (an `elif` as one statement)."""
    for child in statement.children:
        if isinstance(child, cst.IndentedBlock):
            yield from child.body
        elif isinstance(child, (cst.Else, cst.Finally, cst.ExceptHandler, cst.MatchCase)):
            yield from block(child.body)
        elif isinstance(child, cst.If):
            yield child
