"""What a module assigns, for following a value (an FSDP mixed-precision policy, its dtype)
from where it is used to where it is built: each scope's plain names, the module's attributes
(`self.mp_policy = ...`, in any method), and the keyword dicts passed as `**kwargs`
(`kwargs["mp_policy"] = ...`, `{"mixed_precision": ...}`, `dict(...)`).
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from amp_lint.analysis.syntax.names import dotted_name
from amp_lint.analysis.syntax.outline import subtree_nodes


def attribute_assignments(module: cst.Module) -> dict[str, list[cst.BaseExpression]]:
    """What the module assigns to each attribute (`self.mp_policy = ...`), in any function:
    a policy is often built in `__init__` and used in another method."""
    found: dict[str, list[cst.BaseExpression]] = {}
    for node in subtree_nodes(module):
        for target, value in _assigned(node):
            name = dotted_name(target)
            if isinstance(target, cst.Attribute) and name is not None:
                found.setdefault(name, []).append(value)
    return found


def _assigned(node: cst.CSTNode) -> list[tuple[cst.BaseExpression, cst.BaseExpression]]:
    if isinstance(node, cst.Assign):
        return [(target.target, node.value) for target in node.targets]
    if isinstance(node, cst.AnnAssign) and node.value is not None:
        return [(node.target, node.value)]
    return []


class ScopeAssignments:
    """What one scope (a function body, or the module's top level) assigns to each plain
    name, and the keyword dicts it builds; a name the scope does not assign is looked up at
    module level, an attribute in the whole module."""

    def __init__(
        self,
        nodes: list[cst.CSTNode],
        attributes: dict[str, list[cst.BaseExpression]],
        module_level: ScopeAssignments | None = None,
    ) -> None:
        self.attributes = attributes
        self.module_level = module_level
        self.values: dict[str, list[cst.BaseExpression]] = {}
        # (dict name, key) -> values stored by `name["key"] = value`
        self.items: dict[tuple[str, str], list[cst.BaseExpression]] = {}
        for node in nodes:
            for target, value in _assigned(node):
                self._store(target, value)

    def _store(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            self.values.setdefault(target.value, []).append(value)
        elif isinstance(target, cst.Subscript) and len(target.slice) == 1:
            owner = dotted_name(target.value)
            index = target.slice[0].slice
            key = _string(index.value) if isinstance(index, cst.Index) else None
            if owner is not None and key is not None:
                self.items.setdefault((owner, key), []).append(value)

    def _items(self, owner: str, key: str) -> list[cst.BaseExpression]:
        found = self.items.get((owner, key), [])
        if not found and self.module_level is not None and owner not in self.values:
            return self.module_level._items(owner, key)
        return found

    def of(self, expression: cst.BaseExpression) -> list[cst.BaseExpression]:
        if isinstance(expression, cst.Attribute):
            name = dotted_name(expression)
            return self.attributes.get(name, []) if name is not None else []
        if not isinstance(expression, cst.Name):
            return []
        if expression.value in self.values:
            return self.values[expression.value]
        return self.module_level.of(expression) if self.module_level is not None else []

    def resolve(self, expression: cst.BaseExpression, depth: int) -> Iterator[cst.Call]:
        """The calls an expression may evaluate to, through names and conditionals."""
        if isinstance(expression, cst.Call):
            yield expression
        elif isinstance(expression, cst.IfExp):
            yield from self.resolve(expression.body, depth)
            yield from self.resolve(expression.orelse, depth)
        elif depth > 0:
            for value in self.of(expression):
                yield from self.resolve(value, depth - 1)

    def unassigned_names(self, expression: cst.BaseExpression, depth: int) -> Iterator[cst.Name]:
        """The names an expression may evaluate to that the module does not assign (imported
        ones), through names and conditionals."""
        if isinstance(expression, cst.IfExp):
            yield from self.unassigned_names(expression.body, depth)
            yield from self.unassigned_names(expression.orelse, depth)
        elif isinstance(expression, cst.Name):
            assigned = self.of(expression)
            if not assigned:
                yield expression
            elif depth > 0:
                for value in assigned:
                    yield from self.unassigned_names(value, depth - 1)

    def keyword_values(self, mapping: cst.BaseExpression, keyword: str) -> list[cst.BaseExpression]:
        """The values `**mapping` may pass as `keyword`: from a dict literal or `dict(...)`
        (inline or assigned to the name) and from `name["keyword"] = value` stores."""
        found = list(_dict_entries(mapping).get(keyword, []))
        for value in self.of(mapping):
            found += _dict_entries(value).get(keyword, [])
        name = dotted_name(mapping)
        if name is not None:
            found += self._items(name, keyword)
        return found

    def is_readable_dict(self, mapping: cst.BaseExpression) -> bool:
        """Whether every dict `**mapping` may be is built in sight (so a missing key is
        really missing)."""
        if _is_dict(mapping):
            return True
        assigned = self.of(mapping)
        return bool(assigned) and all(_is_dict(value) for value in assigned)


def _is_dict(expression: cst.BaseExpression) -> bool:
    if isinstance(expression, cst.Dict):
        return all(isinstance(e, cst.DictElement) for e in expression.elements)
    return (
        isinstance(expression, cst.Call)
        and isinstance(expression.func, cst.Name)
        and expression.func.value == "dict"
        and all(arg.keyword is not None for arg in expression.args)
    )


def _dict_entries(expression: cst.BaseExpression) -> dict[str, list[cst.BaseExpression]]:
    entries: dict[str, list[cst.BaseExpression]] = {}
    if isinstance(expression, cst.Dict):
        for element in expression.elements:
            if isinstance(element, cst.DictElement):
                key = _string(element.key)
                if key is not None:
                    entries.setdefault(key, []).append(element.value)
    elif (
        isinstance(expression, cst.Call)
        and isinstance(expression.func, cst.Name)
        and expression.func.value == "dict"
    ):
        for arg in expression.args:
            if arg.keyword is not None:
                entries.setdefault(arg.keyword.value, []).append(arg.value)
    return entries


def _string(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None
