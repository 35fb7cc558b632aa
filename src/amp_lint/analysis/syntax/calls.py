"""The module's call targets: its functions, classes, methods and the objects `__init__`
stores on `self`, so that a call under autocast can be followed into its body."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import libcst as cst

from amp_lint.analysis.syntax.names import ModuleNames, dotted_name
from amp_lint.analysis.syntax.outline import child_nodes, walk_statements

LOCAL_PREFIX = "<module>"
_NN_MODULE_BASES = {"torch.nn.Module", "torch.nn.modules.module.Module"}
_AUTOGRAD_FUNCTION_BASES = {"torch.autograd.Function", "torch.autograd.function.Function"}


@dataclass(frozen=True)
class CallSite:
    """One step of the chain from an autocast region to the code a finding is in."""

    path: str
    call: cst.Call
    # Resolves the call's line only when a finding needs it (positions are costly).
    line_of: Callable[[cst.CSTNode], int] = field(compare=False, repr=False)

    def __str__(self) -> str:
        return f"{self.path}:{self.line_of(self.call)}"


@dataclass(eq=False)  # one per class statement: compared (and hashed) by identity
class ClassInfo:
    name: str
    node: cst.ClassDef
    base_names: list[str]
    methods: dict[str, cst.FunctionDef] = field(default_factory=dict)
    # `self.NAME = Call(...)` in __init__: NAME -> the qualified name of what was called.
    attribute_calls: dict[str, cst.Call] = field(default_factory=dict)
    # `self.scale = dim ** -0.5`: attributes holding Python numbers, not tensors.
    scalar_attributes: set[str] = field(default_factory=set)
    is_nn_module: bool = False
    is_autograd_function: bool = False

    @property
    def qualified(self) -> str:
        return f"{LOCAL_PREFIX}.{self.name}"


@dataclass
class ModuleIndex:
    functions: dict[str, cst.FunctionDef] = field(default_factory=dict)
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    # Every function and method in source order, nested ones included.
    all_functions: list[cst.FunctionDef] = field(default_factory=list)
    # method node -> its class
    owner: dict[int, ClassInfo] = field(default_factory=dict)
    # `ext = load_ext("_ext")` at module level: name -> the value assigned (last wins).
    module_assignments: dict[str, cst.BaseExpression] = field(default_factory=dict)

    def class_for_qualified(self, qualified: str | None) -> ClassInfo | None:
        if qualified is None or not qualified.startswith(LOCAL_PREFIX + "."):
            return None
        return self.classes.get(qualified[len(LOCAL_PREFIX) + 1 :])


def build_index(module: cst.Module, names: ModuleNames) -> ModuleIndex:
    index = ModuleIndex()
    for statement in module.body:
        if isinstance(statement, cst.FunctionDef):
            index.functions[statement.name.value] = statement
        elif isinstance(statement, cst.ClassDef):
            info = _class_info(statement, names)
            index.classes[info.name] = info
        elif isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Assign):
                    for target in small.targets:
                        if isinstance(target.target, cst.Name):
                            index.module_assignments[target.target.value] = small.value
    _mark_subclasses(index)
    index.all_functions = [
        statement for statement in walk_statements(module) if isinstance(statement, cst.FunctionDef)
    ]
    for info in index.classes.values():
        for method in info.methods.values():
            index.owner[id(method)] = info
    return index


def _class_info(node: cst.ClassDef, names: ModuleNames) -> ClassInfo:
    bases = []
    for base in node.bases:
        qualified = names.qualified_name(base.value)
        bases.append(qualified or dotted_name(base.value) or "")
    info = ClassInfo(name=node.name.value, node=node, base_names=bases)
    if isinstance(node.body, cst.IndentedBlock):
        for item in node.body.body:
            if isinstance(item, cst.FunctionDef):
                info.methods[item.name.value] = item
    init = info.methods.get("__init__")
    if init is not None:
        _record_self_assignments(info, init)
    return info


def _mark_subclasses(index: ModuleIndex) -> None:
    """nn.Module / autograd.Function subclasses, also through local base classes."""
    changed = True
    while changed:
        changed = False
        for info in index.classes.values():
            local_bases = [index.classes.get(b) for b in info.base_names]
            nn_module = any(b in _NN_MODULE_BASES for b in info.base_names) or any(
                b is not None and b.is_nn_module for b in local_bases
            )
            function = any(b in _AUTOGRAD_FUNCTION_BASES for b in info.base_names) or any(
                b is not None and b.is_autograd_function for b in local_bases
            )
            if (nn_module, function) != (info.is_nn_module, info.is_autograd_function):
                info.is_nn_module, info.is_autograd_function = nn_module, function
                changed = True


def _record_self_assignments(info: ClassInfo, init: cst.FunctionDef) -> None:
    """`self.NAME = ...` statements of `__init__` (not of functions nested in it)."""
    stack: list[cst.BaseStatement] = (
        list(init.body.body) if isinstance(init.body, cst.IndentedBlock) else []
    )
    while stack:
        statement = stack.pop()
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Assign):
                    _record_self_assignment(info, small)
        elif isinstance(statement, cst.BaseCompoundStatement) and not isinstance(
            statement, (cst.FunctionDef, cst.ClassDef)
        ):
            for child in child_nodes(statement):
                if isinstance(child, cst.IndentedBlock):
                    stack.extend(child.body)
                elif isinstance(child, cst.Else) and isinstance(child.body, cst.IndentedBlock):
                    stack.extend(child.body.body)


def _record_self_assignment(info: ClassInfo, node: cst.Assign) -> None:
    for target in node.targets:
        name = dotted_name(target.target)
        if not name or not name.startswith("self.") or name.count(".") != 1:
            continue
        if isinstance(node.value, cst.Call):
            info.attribute_calls[name] = node.value
        elif _is_arithmetic(node.value):
            info.scalar_attributes.add(name)


def _is_arithmetic(node: cst.BaseExpression) -> bool:
    """Numbers combined with operators (`dim ** -0.5`, `1.0 / heads`): in `__init__` these
    are Python numbers, since constructor arguments are sizes and hyper-parameters."""
    if isinstance(node, (cst.Integer, cst.Float)):
        return True
    if isinstance(node, cst.UnaryOperation):
        return _is_arithmetic(node.expression)
    if isinstance(node, cst.BinaryOperation):
        sides = (node.left, node.right)
        return any(_is_arithmetic(s) for s in sides) and all(
            _is_arithmetic(s) or isinstance(s, (cst.Name, cst.Attribute)) for s in sides
        )
    return False
