"""Where analysis starts under autocast without a caller in sight: decorated functions, the
`forward` of nn.Modules in files that use fp16 autocast, and configured functions."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from amp_lint.analysis.calls import ModuleIndex
from amp_lint.analysis.dtypes import FLOAT16
from amp_lint.analysis.module import ModuleFacts
from amp_lint.analysis.names import ModuleNames
from amp_lint.analysis.outline import calls_in, walk_statements
from amp_lint.analysis.regions import (
    AccelerateSettings,
    AutocastRegion,
    grad_scaler_device,
    region_from_call,
)
from amp_lint.config import Config


def decorator_regions(
    function: cst.FunctionDef, names: ModuleNames, accelerate: AccelerateSettings
) -> tuple[AutocastRegion, ...]:
    """`@torch.autocast("cuda")` and friends on a function: its body runs under them."""
    regions = []
    for decorator in function.decorators:
        if isinstance(decorator.decorator, cst.Call):
            region = region_from_call(decorator.decorator, names, accelerate)
            if region is not None:
                regions.append(region)
    return tuple(regions)


def assumed_entry_points(
    facts: ModuleFacts, index: ModuleIndex, accelerate: AccelerateSettings
) -> Iterator[tuple[cst.FunctionDef, AutocastRegion, str]]:
    """(function, region, why) for functions assumed to run under autocast."""
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
                    yield forward, region, why
    configured = library or AutocastRegion(None, FLOAT16, True, "configured")
    for name in config.autocast_functions:
        function = _function_named(index, name)
        if function is not None:
            yield function, configured, f"`{name}` configured to run under autocast"


LIBRARY_SPELLING = "--assume-autocast"


def library_region(config: Config) -> AutocastRegion | None:
    """Library mode's region (`--assume-autocast float16 --device cuda`), if on."""
    if config.assume_autocast is None:
        return None
    return AutocastRegion(config.assume_device, config.assume_autocast, True, LIBRARY_SPELLING)


def _library_entry_points(
    index: ModuleIndex, region: AutocastRegion
) -> Iterator[tuple[cst.FunctionDef, AutocastRegion, str]]:
    """Every `forward` defined in a class: nn.Module subclasses whose base is imported from
    another file count too, since the class itself cannot be seen here to be a Module."""
    for info in index.classes.values():
        forward = info.methods.get("forward")
        # A class without bases is not a Module or a Function, whatever its methods are.
        if forward is not None and info.base_names:
            why = f"`{info.name}.forward` analysed under {region.describe()} (library mode)"
            yield forward, region, why


def file_autocast(facts: ModuleFacts, accelerate: AccelerateSettings) -> AutocastRegion | None:
    """The fp16 autocast this file uses (regions or a GradScaler), if any."""
    regions, scaler_devices = _regions_and_scalers(facts, accelerate)
    fp16 = [r for r in regions if r.may_be_float16]
    if not fp16 and not scaler_devices:
        return None
    devices = {r.device for r in fp16} | scaler_devices
    device = devices.pop() if len(devices) == 1 else None
    explicit = scaler_devices or any(r.dtype == FLOAT16 for r in fp16)
    return AutocastRegion(device, FLOAT16 if explicit else None, True, "assumed")


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
