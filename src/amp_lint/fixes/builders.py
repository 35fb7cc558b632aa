"""Shared fix shapes: `.float()` / `.to(dtype)` on an operand, `torch.finfo(dtype).min`,
`.clone()`, and the fp32 island (`with torch.autocast(device, enabled=False):`)."""

from __future__ import annotations

import libcst as cst

from amp_lint.analysis.syntax.names import ModuleNames, dotted_name
from amp_lint.analysis.values.dtypes import DType
from amp_lint.fixes.upcasts import DTypeOf, method_call, upcast

__all__ = ["method_call"]  # the fix shapes' helpers are imported from here too

_CONVERSIONS = ("float", "half", "bfloat16", "double")


def to_dtype_of(value: cst.BaseExpression, reference: cst.BaseExpression) -> cst.BaseExpression:
    """`value.to(reference.dtype)`; `y.float()` becomes `y.to(reference.dtype)` rather than
    `y.float().to(reference.dtype)`."""
    code = cst.Module([]).code_for_node(reference)
    if (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value in _CONVERSIONS
        and not value.args
    ):
        return value.with_changes(
            func=value.func.with_changes(attr=cst.Name("to")),
            args=[cst.Arg(cst.parse_expression(f"{code}.dtype"))],
        )
    return method_call(value, "to", f"{code}.dtype")


def torch_name(names: ModuleNames) -> tuple[str, bool]:
    """How to spell `torch` here, and whether `import torch` must be added."""
    spellings = names.local_names_for("torch")
    if "torch" in spellings:
        return "torch", False
    if spellings:
        return sorted(spellings)[0], False
    return "torch", True


def finfo_limit(
    reference: cst.BaseExpression, negative: bool, names: ModuleNames
) -> tuple[cst.BaseExpression, bool]:
    """`torch.finfo(x.dtype).min` (or `.max`), and whether `import torch` is needed."""
    torch, needs_import = torch_name(names)
    code = cst.Module([]).code_for_node(reference)
    limit = "min" if negative else "max"
    return cst.parse_expression(f"{torch}.finfo({code}.dtype).{limit}"), needs_import


def fp32_island(
    line: cst.SimpleStatementLine, device_code: str, torch: str, *, scripted: bool = False
) -> cst.With | cst.If:
    """Wrap one statement line in `with torch.autocast(device, enabled=False):`.

    Comments above the statement stay above the `with`; its trailing comment stays on it.
    In code TorchScript may compile (`scripted`), a device that is not a literal
    (`x.device.type`) fails to script ("Autocast device argument must be a constant"): the
    island then runs only in eager mode, behind `torch.jit.is_scripting()` as timm writes it,
    and the scripted branch keeps the statement as it was (no constant device is known here;
    TorchScript's own autocast is left as the code had it).
    """
    header = cst.parse_statement(
        f"with {torch}.autocast({device_code}, enabled=False):\n    pass\n"
    )
    assert isinstance(header, cst.With)
    inner = line.with_changes(leading_lines=[])
    island = header.with_changes(body=cst.IndentedBlock(body=[inner]))
    if not scripted or _is_string_literal(device_code):
        return island.with_changes(leading_lines=line.leading_lines)
    guard = cst.parse_statement(f"if {torch}.jit.is_scripting():\n    pass\nelse:\n    pass\n")
    assert isinstance(guard, cst.If) and guard.orelse is not None
    return guard.with_changes(
        leading_lines=line.leading_lines,
        body=cst.IndentedBlock(body=[inner.with_changes(trailing_whitespace=_NEWLINE)]),
        orelse=guard.orelse.with_changes(body=cst.IndentedBlock(body=[island])),
    )


_NEWLINE = cst.TrailingWhitespace()


def _is_string_literal(code: str) -> bool:
    try:
        return isinstance(cst.parse_expression(code), cst.SimpleString)
    except cst.ParserSyntaxError:
        return False


def device_code_for_island(
    region_device: str | None,
    device_expr: cst.BaseExpression | None,
    tensor_argument: cst.BaseExpression | None,
) -> str | None:
    """The device argument of the island: the region's literal device, else the device of a
    tensor argument (`pred.device.type`), which is right wherever the code runs."""
    if region_device is not None:
        return repr(region_device).replace("'", '"')
    if tensor_argument is not None:
        name = dotted_name(tensor_argument)
        if name is not None:
            return f"{name}.device.type"
    if device_expr is not None and dotted_name(device_expr) is not None:
        return cst.Module([]).code_for_node(device_expr)
    return None


def call_in_fp32_island(
    line: cst.SimpleStatementLine,
    call: cst.Call,
    tensors: list[tuple[cst.BaseExpression, DType]],
    region_device: str | None,
    device_expr: cst.BaseExpression | None,
    names: ModuleNames,
    dtype_of: DTypeOf,
    *,
    scripted: bool = False,
    shared: bool = False,
) -> tuple[cst.With | cst.If, bool] | None:
    """`line` rewritten as an fp32 island around itself, with an upcast (`upcast`) on each of
    `tensors` (some of `call`'s arguments, with their dtypes); and whether `import torch` must
    be added. None without a device, or when a tensor has no right upcast. `scripted`: the
    code may be compiled by TorchScript (fp32_island)."""
    first = tensors[0][0] if tensors else None
    device = device_code_for_island(region_device, device_expr, first)
    if device is None:
        return None
    torch, needs_import = torch_name(names)
    upcasts: dict[int, cst.BaseExpression] = {}
    for tensor, dtype in tensors:
        upcasted = upcast(tensor, dtype, names, dtype_of, tensor=True, shared=shared)
        if upcasted is None:
            return None
        upcasts[id(tensor)] = upcasted
    new_call = call.with_changes(
        args=[
            arg.with_changes(value=upcasts[id(arg.value)]) if id(arg.value) in upcasts else arg
            for arg in call.args
        ]
    )
    new_line = line.deep_replace(call, new_call)
    assert isinstance(new_line, cst.SimpleStatementLine)
    return fp32_island(new_line, device, torch, scripted=scripted), needs_import
