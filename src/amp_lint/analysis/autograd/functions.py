"""What the methods of a custom `torch.autograd.Function` do, read from their code: whether
backward combines saved tensors where dtypes must match, whether forward calls code other
than torch's (an extension kernel), and which of forward's inputs it casts itself to a
common dtype (`weight = weight.type_as(input)`), or upcasts them, or hands them to a Triton
kernel or a custom op that takes them as they come. AMP203 decides from these whether the
Function can meet mismatched dtypes under autocast."""

from __future__ import annotations

import builtins
import re
from collections.abc import Iterator

import libcst as cst

from amp_lint.analysis.syntax.calls import ModuleIndex
from amp_lint.analysis.syntax.names import ModuleNames, dotted_name
from amp_lint.analysis.syntax.outline import (
    calls_in,
    child_nodes,
    positional_arguments,
    statement_expressions,
    subtree_nodes,
    walk_function_statements,
)

_SAVED = frozenset(["saved_tensors", "saved_variables"])
_BUILTINS = frozenset(dir(builtins))
# Casts that give a tensor a chosen dtype: `x.type_as(y)`, `x.to(y.dtype)`, `x.float()`.
_CASTS = frozenset(["type_as", "to", "type", "float", "half", "double", "bfloat16"])


def reads_saved_tensors(backward: cst.FunctionDef) -> bool:
    """`ctx.saved_tensors` (or the older `saved_variables`) anywhere in backward."""
    for statement in statements(backward):
        for node in statement_expressions(statement):
            for call_or_attr in _attributes(node):
                if call_or_attr.attr.value in _SAVED:
                    return True
    return False


# Ops whose tensor operands must share a dtype outside autocast (elementwise ops promote).
_DTYPE_STRICT_OPS = frozenset(
    [
        "matmul", "mm", "bmm", "addmm", "addbmm", "baddbmm", "addmv", "mv", "dot", "linear",
        "bilinear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
        "conv_transpose3d", "einsum", "tensordot", "scatter", "scatter_", "scatter_add",
        "scatter_add_", "scatter_reduce", "scatter_reduce_", "index_add", "index_add_",
        "index_copy", "index_copy_", "index_put", "index_put_", "masked_scatter",
        "masked_scatter_",
    ]
)  # fmt: skip


def needs_matching_dtypes(
    function: cst.FunctionDef, names: ModuleNames, index: ModuleIndex, depth: int = 0
) -> bool:
    """A dtype-strict op in the function, or in a module function it calls (one level),
    or a call to code that is not torch's and not this module's (an extension kernel)."""
    for statement in statements(function):
        for node in statement_expressions(statement):
            if any(
                isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.MatrixMultiply)
                for n in subtree_nodes(node)
            ):
                return True
            for call in calls_in(node):
                func = call.func
                if _callee_name(func) in _DTYPE_STRICT_OPS:
                    return True  # `grad.mm(w)`, `F.linear(...)`, `x.t().matmul(g)`
                helper = index.functions.get(func.value) if isinstance(func, cst.Name) else None
                if helper is not None:
                    if depth == 0 and needs_matching_dtypes(helper, names, index, depth + 1):
                        return True
                elif _outside_torch(func, names, index):
                    return True
    return False


def _callee_name(func: cst.BaseExpression) -> str:
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return func.value if isinstance(func, cst.Name) else ""


def calls_outside_torch(
    function: cst.FunctionDef,
    names: ModuleNames,
    index: ModuleIndex,
    depth: int = 0,
    passed: frozenset[str] = frozenset(),
) -> bool:
    """A call to something that is not a torch function or a tensor method: an extension
    module, a kernel launch (`kernel[grid](...)`). A function of this module is looked into,
    one level deep (`bloom_gelu_forward(x)` is torch arithmetic, not a kernel). Calls of the
    names in `passed` are not counted, nor calls that pass no tensor (`get_rank()`,
    `logger.info("...")`): a kernel takes its inputs as arguments."""
    for statement in statements(function):
        for node in statement_expressions(statement):
            for call in calls_in(node):
                func = call.func
                if isinstance(func, cst.Name) and func.value in passed:
                    continue
                if not isinstance(func, cst.Subscript) and not any(
                    _may_be_tensor(arg.value) for arg in call.args
                ):
                    continue
                helper = index.functions.get(func.value) if isinstance(func, cst.Name) else None
                if helper is not None:
                    if depth > 0 or calls_outside_torch(helper, names, index, depth + 1):
                        return True
                elif _outside_torch(func, names, index):
                    return True
    return False


_LITERALS = (
    cst.SimpleString, cst.ConcatenatedString, cst.FormattedString, cst.Integer, cst.Float,
)  # fmt: skip


def _may_be_tensor(argument: cst.BaseExpression) -> bool:
    if isinstance(argument, _LITERALS):
        return False
    return not (isinstance(argument, cst.Name) and argument.value in ("None", "True", "False"))


def calls_kernel(forward: cst.FunctionDef, names: ModuleNames, index: ModuleIndex) -> bool:
    """calls_outside_torch, not counting calls of what the caller hands forward (a layer, a
    callable, each layer of a list: `for layer in layers: x = layer(x)`): those run the
    caller's torch code under forward's autocast state, not a kernel of fixed dtype."""
    parameters = {
        p.name.value for p in parameters_after_ctx(forward) if isinstance(p.name, cst.Name)
    }
    passed = set(parameters)
    for node in subtree_nodes(forward.body):
        if (
            isinstance(node, cst.For)
            and isinstance(node.target, cst.Name)
            and isinstance(node.iter, cst.Name)
            and node.iter.value in parameters
        ):
            passed.add(node.target.value)
    return calls_outside_torch(forward, names, index, passed=frozenset(passed))


def _outside_torch(func: cst.BaseExpression, names: ModuleNames, index: ModuleIndex) -> bool:
    qualified = names.qualified_name(func)
    if qualified is not None:
        return not (qualified == "torch" or qualified.startswith("torch."))
    if isinstance(func, cst.Name):
        return func.value not in _BUILTINS and func.value not in index.classes
    if _loaded_extension(func, names, index):
        return True
    # Attributes are methods of tensors and of ctx (a static method has no `self`); anything
    # else is `kernel[grid](...)`, `fns[i](...)`, `(a or b)(...)`.
    return not isinstance(func, cst.Attribute)


def _loaded_extension(func: cst.BaseExpression, names: ModuleNames, index: ModuleIndex) -> bool:
    """`ext_module.deform_conv_forward(...)` where the module did `ext_module =
    ext_loader.load_ext(...)` (or `load(...)`): a compiled extension loaded at import time."""
    if not isinstance(func, cst.Attribute) or not isinstance(func.value, cst.Name):
        return False
    assigned = index.module_assignments.get(func.value.value)
    if not isinstance(assigned, cst.Call):
        return False
    loader = names.qualified_name(assigned.func) or dotted_name(assigned.func) or ""
    return not (loader == "torch" or loader.startswith("torch.")) or loader.startswith(
        "torch.utils.cpp_extension"
    )


def statements(function: cst.FunctionDef) -> Iterator[cst.BaseStatement]:
    """The function's statements, nested blocks included, functions and classes in it not."""
    for statement in walk_function_statements(function):
        if not isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            yield statement


def _attributes(node: cst.CSTNode) -> Iterator[cst.Attribute]:
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Attribute):
            yield current
        stack.extend(child_nodes(current))


def cast_parameters(forward: cst.FunctionDef) -> frozenset[str]:
    """Parameters forward re-binds to a chosen dtype before using them: `weight =
    weight.type_as(input)`, `mask = mask.to(input.dtype)`, `x = x.float()`."""
    found: set[str] = set()
    for statement in statements(forward):
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if not isinstance(small, cst.Assign) or len(small.targets) != 1:
                continue
            target = small.targets[0].target
            value = small.value
            if (
                isinstance(target, cst.Name)
                and isinstance(value, cst.Call)
                and isinstance(value.func, cst.Attribute)
                and value.func.attr.value in _CASTS
                and dotted_name(value.func.value) == target.value
                and (value.func.attr.value not in ("to", "type") or value.args)
            ):
                found.add(target.value)
    return frozenset(found)


def bound_arguments(
    forward: cst.FunctionDef, call: cst.Call
) -> list[tuple[str, cst.BaseExpression]]:
    """(forward's parameter, the argument of `Cls.apply(...)` bound to it), `ctx` skipped;
    nothing when the call unpacks `*args` or `**kwargs`."""
    if any(arg.star for arg in call.args):
        return []
    params = [p.name.value for p in parameters_after_ctx(forward)]
    bound = list(zip(params, positional_arguments(call)))
    bound += [(a.keyword.value, a.value) for a in call.args if a.keyword is not None]
    return bound


def takes_only_tensors(forward: cst.FunctionDef, call: cst.Call) -> bool:
    """Nothing shows that forward takes other than tensors: no `*args`/`**kwargs`, no
    parameter annotated with a type that is not a Tensor, no container, lambda or string
    passed. `custom_fwd(cast_inputs=...)` rebuilds every argument (lists are copied, other
    iterables become generators, and a cast copy has no grad), which breaks Functions that take
    layers, callables or lists (reformer's reversible layers, a loss's `function` argument)."""
    params = forward.params
    if isinstance(params.star_arg, cst.Param) or params.star_kwarg is not None:
        return False
    module = cst.Module([])
    for param in parameters_after_ctx(forward):
        if param.annotation is not None:
            annotation = module.code_for_node(param.annotation.annotation)
            if not _TENSOR_ANNOTATION.match(annotation):
                return False
    if _used_as_objects(forward):
        return False
    return not any(
        isinstance(argument, _NOT_TENSORS) for _, argument in bound_arguments(forward, call)
    )


# Methods of lists and dicts that no tensor has.
_CONTAINER_METHODS = frozenset(
    ["append", "extend", "insert", "pop", "update", "items", "keys", "values", "setdefault"]
)


def _used_as_objects(forward: cst.FunctionDef) -> bool:
    """Forward uses a parameter as something other than a tensor: calls it (a layer, a
    callable), loops over it (`for layer in layers`) or calls a list or dict method on it."""
    parameters = {
        p.name.value for p in parameters_after_ctx(forward) if isinstance(p.name, cst.Name)
    }
    for node in subtree_nodes(forward.body):
        if isinstance(node, cst.For) and isinstance(node.iter, cst.Name):
            if node.iter.value in parameters:
                return True
        elif isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Name) and func.value in parameters:
                return True
            if (
                isinstance(func, cst.Attribute)
                and isinstance(func.value, cst.Name)
                and func.value.value in parameters
                and func.attr.value in _CONTAINER_METHODS
            ):
                return True
    return False


# `Tensor`, `torch.Tensor`, optionally `Optional[...]` or `... | None`.
_TENSOR_ANNOTATION = re.compile(
    r"^(?:(?:typing\.)?Optional\[(?:torch\.)?Tensor\]|(?:torch\.)?Tensor(?:\s*\|\s*None)?)$"
)
_NOT_TENSORS = (
    cst.List, cst.Dict, cst.Set, cst.Tuple, cst.Lambda, cst.SimpleString,
    cst.ConcatenatedString, cst.FormattedString, cst.ListComp, cst.DictComp,
)  # fmt: skip


def too_few_arguments(forward: cst.FunctionDef, call: cst.Call) -> bool:
    """`Cls.apply(a, b)` for a forward(ctx, a, b, c) without defaults: a TypeError in any
    precision."""
    if any(arg.star for arg in call.args):
        return False
    required = [p.name.value for p in parameters_after_ctx(forward) if p.default is None]
    given = len([a for a in call.args if a.keyword is None])
    keywords = {a.keyword.value for a in call.args if a.keyword is not None}
    return any(name not in keywords for name in required[given:])


def converts_dtypes(function: cst.FunctionDef) -> bool:
    """The method converts tensors itself (`grad.to(weight.dtype)`, `w.float()`): in a
    backward, its author dealt with the dtypes forward under autocast leaves it."""
    for statement in statements(function):
        for node in statement_expressions(statement):
            for call in calls_in(node):
                func = call.func
                if isinstance(func, cst.Attribute) and func.attr.value in _CASTS:
                    return True
    return False


def computes_indices(forward: cst.FunctionDef, backward: cst.FunctionDef | None) -> bool:
    """The Function computes indices: forward declares its outputs non-differentiable
    (`ctx.mark_non_differentiable(idx)`) and every `return` of backward gives None for every
    input (`return None, None`), as mmcv's `ball_query` and `furthest_point_sample` do."""
    if backward is None or not _marks_non_differentiable(forward):
        return False
    returns = [
        small
        for statement in statements(backward)
        if isinstance(statement, cst.SimpleStatementLine)
        for small in statement.body
        if isinstance(small, cst.Return)
    ]
    return bool(returns) and all(_all_none(r.value) for r in returns)


def _marks_non_differentiable(forward: cst.FunctionDef) -> bool:
    for statement in statements(forward):
        for node in statement_expressions(statement):
            for call in calls_in(node):
                func = call.func
                if isinstance(func, cst.Attribute) and func.attr.value == "mark_non_differentiable":
                    return True
    return False


def _all_none(value: cst.BaseExpression | None) -> bool:
    if value is None:
        return True
    if isinstance(value, (cst.Tuple, cst.List)):
        return all(_all_none(element.value) for element in value.elements)
    return isinstance(value, cst.Name) and value.value == "None"


def parameters_after_ctx(forward: cst.FunctionDef) -> list[cst.Param]:
    return [*forward.params.posonly_params, *forward.params.params][1:]
