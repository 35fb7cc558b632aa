"""Where analysis starts under autocast without a caller in sight: decorated functions, the
`forward` of nn.Modules in files that use fp16 autocast, and configured functions."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from amp_lint.analysis.regions.finder import (
    AccelerateSettings,
    AutocastRegion,
    casting_decorator_region,
    grad_scaler_device,
    region_from_call,
)
from amp_lint.analysis.syntax.calls import ClassInfo, ModuleIndex
from amp_lint.analysis.syntax.module import ModuleFacts
from amp_lint.analysis.syntax.names import ModuleNames
from amp_lint.analysis.syntax.naming import LIBRARY_METHODS
from amp_lint.analysis.syntax.outline import calls_in, walk_statements
from amp_lint.analysis.values.dtypes import BFLOAT16, FLOAT16
from amp_lint.settings.config import Config


def decorator_regions(
    function: cst.FunctionDef, names: ModuleNames, accelerate: AccelerateSettings
) -> tuple[AutocastRegion, ...]:
    """`@torch.autocast("cuda")` and friends on a function: its body runs under them; under
    `@custom_fwd(cast_inputs=...)` with autocast off (alphafold3's and neosr's fixes)."""
    regions = []
    for decorator in function.decorators:
        if isinstance(decorator.decorator, cst.Call):
            region = region_from_call(
                decorator.decorator, names, accelerate
            ) or casting_decorator_region(decorator.decorator, names)
            if region is not None:
                regions.append(region)
    return tuple(regions)


@dataclass(frozen=True)
class AssumedRoot:
    """A function analysed as running under autocast without a caller in sight."""

    function: cst.FunctionDef
    region: AutocastRegion
    why: str
    # For a method a class inherits: the subclass it runs for, so that `self._forward()` in
    # the base runs the subclass's override (None: the class defining it).
    self_class: ClassInfo | None = None


def assumed_entry_points(
    facts: ModuleFacts, index: ModuleIndex, accelerate: AccelerateSettings
) -> Iterator[AssumedRoot]:
    """The functions assumed to run under autocast: library mode's, the `forward`s of a file
    that uses autocast, the configured ones."""
    config = facts.config
    library = library_region(config)
    if library is not None:
        yield from _library_entry_points(index, library)
    elif config.forward_under_autocast:
        region = file_autocast(facts, accelerate)
        if region is not None:
            for info in index.classes.values():
                forward = info.methods.get("forward")
                if info.is_nn_module and forward is not None:
                    why = (
                        f"`{info.name}.forward` assumed to run under this file's "
                        f"{region.describe()}"
                    )
                    yield AssumedRoot(forward, region, why)
    configured = library or AutocastRegion(None, FLOAT16, True, "configured")
    for name in config.autocast_functions:
        function = _function_named(index, name)
        if function is not None:
            yield AssumedRoot(function, configured, f"`{name}` configured to run under autocast")


LIBRARY_SPELLING = "--assume-autocast"


def library_region(config: Config) -> AutocastRegion | None:
    """Library mode's region (`--assume-autocast float16 --device cuda`), if on."""
    if config.assume_autocast is None:
        return None
    return AutocastRegion(config.assume_device, config.assume_autocast, True, LIBRARY_SPELLING)


def _library_entry_points(index: ModuleIndex, region: AutocastRegion) -> Iterator[AssumedRoot]:
    """What a library's callers may run under autocast:

    * the `forward` (and framework steps: `training_step`, `compute_loss`...) of every class
      with a base class (nn.Module subclasses whose base is imported from another file
      count, since the class itself cannot be seen here to be a Module; a class without
      bases is not a Module or a Function). A class that inherits such a method from a base
      in this file and overrides others runs it too: `self._forward()` in the base's
      `forward` then runs the override;
    * the public methods of plain classes and the public functions of the module."""
    for info in index.classes.values():
        if info.is_autograd_function:
            continue
        if not info.base_names:
            for name, public in info.methods.items():
                if not name.startswith("_"):
                    yield AssumedRoot(public, region, _library_why(f"{info.name}.{name}", region))
            continue
        overrides = any(name != "__init__" for name in info.methods)
        for name in LIBRARY_METHODS:
            method = info.methods.get(name)
            if method is not None:
                yield AssumedRoot(method, region, _library_why(f"{info.name}.{name}", region))
            elif overrides:
                inherited = _inherited(index, info, name)
                if inherited is not None:
                    why = _library_why(f"{info.name}.{name}", region)
                    yield AssumedRoot(inherited, region, why, self_class=info)
    for name, function in index.functions.items():
        if not name.startswith("_") and _has_parameters(function):
            yield AssumedRoot(function, region, _library_why(name, region))


def _library_why(name: str, region: AutocastRegion) -> str:
    return f"`{name}` analysed under {region.describe()} (library mode)"


def _inherited(index: ModuleIndex, info: ClassInfo, name: str) -> cst.FunctionDef | None:
    """`name` from the nearest base class defined in this module that has it."""
    seen = {info.name}
    pending = [index.classes[b] for b in info.base_names if b in index.classes]
    while pending:
        base = pending.pop(0)
        if base.name in seen:
            continue
        seen.add(base.name)
        if name in base.methods:
            return base.methods[name]
        pending.extend(index.classes[b] for b in base.base_names if b in index.classes)
    return None


def _has_parameters(function: cst.FunctionDef) -> bool:
    params = function.params
    return bool(params.params or params.posonly_params or params.kwonly_params)


def file_autocast(facts: ModuleFacts, accelerate: AccelerateSettings) -> AutocastRegion | None:
    """The autocast this file uses (regions, or a GradScaler for float16), if any: float16
    when anything says so, bfloat16 when every region is bfloat16."""
    regions, scaler_devices = _regions_and_scalers(facts, accelerate)
    fp16 = [r for r in regions if r.may_be_float16]
    if fp16 or scaler_devices:
        devices = {r.device for r in fp16} | scaler_devices
        device = devices.pop() if len(devices) == 1 else None
        explicit = scaler_devices or any(r.dtype == FLOAT16 for r in fp16)
        return AutocastRegion(device, FLOAT16 if explicit else None, True, "assumed")
    bf16 = [r for r in regions if r.is_active and r.dtype == BFLOAT16]
    if not bf16:
        return None
    devices = {r.device for r in bf16}
    return AutocastRegion(devices.pop() if len(devices) == 1 else None, BFLOAT16, True, "assumed")


def _function_named(index: ModuleIndex, name: str) -> cst.FunctionDef | None:
    class_name, _, method = name.rpartition(".")
    if not class_name:
        return index.functions.get(name)
    info = index.classes.get(class_name.rsplit(".", 1)[-1])
    return info.methods.get(method) if info else None


def _regions_and_scalers(
    facts: ModuleFacts, accelerate: AccelerateSettings
) -> tuple[list[AutocastRegion], set[str | None]]:
    """Autocast regions opened anywhere in the module (as `with` items, decorators, or
    context objects assigned to names) and the devices of GradScalers it creates."""
    regions: list[AutocastRegion] = []
    scaler_devices: set[str | None] = set()
    for call in _context_and_assignment_calls(facts.module):
        region = region_from_call(call, facts.names, accelerate)
        if region is not None:
            regions.append(region)
            continue
        is_scaler, device = grad_scaler_device(call, facts.names)
        if is_scaler:
            scaler_devices.add(device)
    return regions, scaler_devices


def _context_and_assignment_calls(module: cst.Module) -> Iterator[cst.Call]:
    for statement in walk_statements(module):
        if isinstance(statement, cst.With):
            for item in statement.items:
                yield from calls_in(item.item)
        elif isinstance(statement, cst.FunctionDef):
            for decorator in statement.decorators:
                yield from calls_in(decorator.decorator)
        elif isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, (cst.Assign, cst.AnnAssign)) and small.value is not None:
                    yield from calls_in(small.value)
