"""The device-specific AMP APIs deprecated in PyTorch 2.4 (`torch.cuda.amp.*`,
`torch.cpu.amp.*`) and a walk that finds where a module uses them, in any spelling.

AMP401 (amp401_deprecated_amp_api.py) reports these uses; fixes/amp_api.py rewrites them.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from amp_lint.analysis.syntax.names import ModuleNames
from amp_lint.analysis.syntax.outline import child_nodes, own_small_statements, walk_statements
from amp_lint.settings.torch_version import TorchVersion, format_torch_version

# The first torch release with each replacement, and the one where the old names started to
# warn. Evidence, from PyTorch's own sources, is on AMP401's page (`DeprecatedAmpApi.fix_safety`).
REPLACEMENT_SINCE: dict[str, TorchVersion] = {
    "autocast": (1, 13),  # torch.amp.autocast (as torch.autocast since 1.10)
    "GradScaler": (2, 3),  # torch.amp.GradScaler(device, ...)
    "custom_fwd": (2, 4),  # torch.amp.custom_fwd(device_type=...)
    "custom_bwd": (2, 4),
}
DEPRECATED_SINCE: TorchVersion = (2, 4)


@dataclass(frozen=True)
class DeprecatedApi:
    """One deprecated callable: `torch.<device>.amp.<name>`."""

    name: str  # autocast, GradScaler, custom_fwd or custom_bwd
    device: str  # "cuda" or "cpu"

    @property
    def old(self) -> str:
        return f"torch.{self.device}.amp.{self.name}"

    @property
    def replacement_since(self) -> TorchVersion:
        return REPLACEMENT_SINCE[self.name]

    @property
    def needs(self) -> str:
        """The torch the replacement needs, as a message says it: "torch >= 2.3"."""
        return f"torch >= {format_torch_version(self.replacement_since)}"

    def replaceable_on(self, target: TorchVersion | None) -> bool:
        """Whether every torch from `target` on has the replacement (unset: the newest)."""
        return target is None or target >= self.replacement_since

    @property
    def device_is_keyword(self) -> bool:
        return self.name in ("custom_fwd", "custom_bwd")

    @property
    def warning(self) -> str:
        """The FutureWarning torch emits, word for word (torch/cuda/amp, torch/cpu/amp)."""
        if self.device_is_keyword:
            new = f"torch.amp.{self.name}(args..., device_type='{self.device}')"
        else:
            new = f"torch.amp.{self.name}('{self.device}', args...)"
        return f"`{self.old}(args...)` is deprecated. Please use `{new}` instead."


def _deprecated_apis() -> dict[str, DeprecatedApi]:
    table: dict[str, DeprecatedApi] = {}
    for device, name, defining_module in (
        ("cuda", "autocast", "autocast_mode"),
        ("cuda", "custom_fwd", "autocast_mode"),
        ("cuda", "custom_bwd", "autocast_mode"),
        ("cuda", "GradScaler", "grad_scaler"),
        ("cpu", "autocast", "autocast_mode"),
        ("cpu", "GradScaler", "grad_scaler"),
    ):
        api = DeprecatedApi(name, device)
        table[api.old] = api
        # The same objects, reached through the module that defines them.
        table[f"torch.{device}.amp.{defining_module}.{name}"] = api
    return table


DEPRECATED = _deprecated_apis()
# Qualified names an imported name must equal or prefix to reach a deprecated API.
DEPRECATED_PREFIXES = frozenset(
    ".".join(parts[:i])
    for parts in (q.split(".") for q in DEPRECATED)
    for i in range(1, len(parts) + 1)
)

# Every spelling of a deprecated API has one of these in its source: `torch.cuda.amp.autocast`,
# `import torch.cuda.amp as amp`, `from torch.cuda import amp`.
DEPRECATED_API_VOCABULARY = (b"cuda.amp", b"cpu.amp", b"cuda import amp", b"cpu import amp")


@dataclass(frozen=True)
class ApiUse:
    node: cst.BaseExpression  # the Call, or the bare Name/Attribute
    target: cst.BaseExpression  # the Name/Attribute naming the API
    api: DeprecatedApi
    # "call", "decorator" (a bare `@custom_fwd`), "autocast-decorator" (a bare `@autocast`,
    # a bug) or "reference"
    kind: str


# Finding the uses


class UseScan:
    """Walks every expression of the module once, collecting the uses of deprecated APIs and
    counting the quote style of its strings. Binding positions (assignment and loop targets,
    parameter, function and class names, keywords, attribute names, imports) are skipped."""

    def __init__(self, names: ModuleNames) -> None:
        self.names = names
        self.uses: list[ApiUse] = []
        self.single_quoted = 0
        self.double_quoted = 0

    def api_of(self, node: cst.CSTNode) -> DeprecatedApi | None:
        if not isinstance(node, (cst.Name, cst.Attribute)):
            return None
        qualified = self.names.qualified_name(node)
        return DEPRECATED.get(qualified) if qualified else None

    def run(self, module: cst.Module) -> None:
        stack: list[cst.CSTNode] = [module]
        push = stack.append
        while stack:
            node = stack.pop()
            if isinstance(node, (cst.Name, cst.Attribute)):
                api = self.api_of(node)
                if api is not None:
                    self.uses.append(ApiUse(node, node, api, "reference"))
                elif isinstance(node, cst.Attribute):
                    push(node.value)
            elif isinstance(node, cst.Call):
                api = self.api_of(node.func)
                if api is not None:
                    self.uses.append(ApiUse(node, node.func, api, "call"))
                else:
                    push(node.func)
                stack.extend(arg.value for arg in node.args)
            elif isinstance(node, cst.SimpleString):
                self._count_quote(node)
            elif isinstance(node, cst.Decorator):
                api = self.api_of(node.decorator)
                if api is not None:
                    kind = "decorator" if api.device_is_keyword else "reference"
                    if api.name == "autocast":
                        kind = "autocast-decorator"
                    self.uses.append(ApiUse(node.decorator, node.decorator, api, kind))
                else:
                    push(node.decorator)
            elif isinstance(node, _SKIPPED):
                continue
            elif isinstance(node, (cst.AssignTarget, cst.Del)):
                self._push_target(stack, node.target)
            elif isinstance(node, _TARGET_AND_MORE):
                self._push_target(stack, node.target)
                stack.extend(child for child in child_nodes(node) if child is not node.target)
            elif isinstance(node, cst.FunctionDef):
                stack.extend(node.decorators)
                push(node.params)
                if node.returns is not None:
                    push(node.returns)
                push(node.body)
            elif isinstance(node, cst.ClassDef):
                stack.extend(node.decorators)
                stack.extend(arg.value for arg in (*node.bases, *node.keywords))
                push(node.body)
            elif isinstance(node, cst.Param):
                if node.annotation is not None:
                    push(node.annotation)
                if node.default is not None:
                    push(node.default)
            elif isinstance(node, cst.Arg):
                push(node.value)
            else:
                stack.extend(child_nodes(node))

    def _push_target(self, stack: list[cst.CSTNode], target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            return
        if isinstance(target, cst.Attribute):
            stack.append(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._push_target(stack, element.value)
        elif isinstance(target, cst.StarredElement):
            self._push_target(stack, target.value)
        else:
            stack.append(target)

    def _count_quote(self, node: cst.SimpleString) -> None:
        body = node.value.lstrip("rRbBuUfF")
        if body.startswith(("'''", '"""')):
            return  # docstrings are triple double-quoted whatever the code style
        if body.startswith("'"):
            self.single_quoted += 1
        else:
            self.double_quoted += 1


# Nodes with nothing to report inside: imports bind names, `global`/`nonlocal` and `as`
# targets only name things.
# Type annotations (`scaler: Optional[GradScaler]`) never construct anything, so they never
# warn: seen 3 times in espnet alone, all noise.
_SKIPPED = (cst.Import, cst.ImportFrom, cst.Global, cst.Nonlocal, cst.AsName, cst.Annotation)
# Nodes with a binding `target` besides expressions that are read.
_TARGET_AND_MORE = (cst.AnnAssign, cst.AugAssign, cst.NamedExpr, cst.For, cst.CompFor)


# The imports that bring them in

# The deprecated namespaces themselves: `import torch.cuda.amp as amp`, `from torch.cuda
# import amp` bind every API of the module at once.
DEPRECATED_NAMESPACES = frozenset(["torch.cuda.amp", "torch.cpu.amp"])


@dataclass(frozen=True)
class DeprecatedImport:
    """One import statement that binds deprecated APIs or namespaces."""

    statement: cst.Import | cst.ImportFrom
    # What removing each binding would name: (module, name, alias) as Fix.unused_imports
    # writes it, by the local name it binds.
    bindings: dict[str, tuple[str, str | None, str | None]]
    # The deprecated APIs it imports by name (empty for a namespace import).
    apis: tuple[DeprecatedApi, ...]
    # Inside a function, `if` or `try`: removing it could leave its block empty.
    nested: bool


def deprecated_imports(module: cst.Module) -> list[DeprecatedImport]:
    """The module's imports of deprecated AMP APIs (`from torch.cuda.amp import autocast`)
    and namespaces (`import torch.cuda.amp as amp`, `from torch.cuda import amp`), at any
    depth. `import torch.cuda.amp` binds `torch` and is left alone, as is `import *`."""
    top_level = {id(statement) for statement in module.body}
    found = []
    for statement in walk_statements(module):
        for small in own_small_statements(statement):
            if isinstance(small, cst.ImportFrom):
                entry = _from_import(small, id(statement) not in top_level)
            elif isinstance(small, cst.Import):
                entry = _module_import(small, id(statement) not in top_level)
            else:
                continue
            if entry is not None:
                found.append(entry)
    return found


def _from_import(statement: cst.ImportFrom, nested: bool) -> DeprecatedImport | None:
    if statement.relative or statement.module is None:
        return None
    if isinstance(statement.names, cst.ImportStar):
        return None
    module = cst.Module([]).code_for_node(statement.module)
    bindings: dict[str, tuple[str, str | None, str | None]] = {}
    apis = []
    for alias in statement.names:
        name = alias.evaluated_name
        qualified = f"{module}.{name}"
        if qualified not in DEPRECATED and qualified not in DEPRECATED_NAMESPACES:
            continue
        local = alias.evaluated_alias or name
        bindings[local] = (module, name, alias.evaluated_alias)
        if qualified in DEPRECATED:
            apis.append(DEPRECATED[qualified])
    if not bindings:
        return None
    return DeprecatedImport(statement, bindings, tuple(apis), nested)


def _module_import(statement: cst.Import, nested: bool) -> DeprecatedImport | None:
    bindings: dict[str, tuple[str, str | None, str | None]] = {}
    for alias in statement.names:
        asname = alias.evaluated_alias
        if asname is not None and alias.evaluated_name in DEPRECATED_NAMESPACES:
            bindings[asname] = (alias.evaluated_name, None, asname)
    if not bindings:
        return None
    return DeprecatedImport(statement, bindings, (), nested)
