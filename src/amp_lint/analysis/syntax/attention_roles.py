"""What says a kᵀv-shaped contraction is linear attention's: its operands are named as keys
and values, and its result is not attention scores going through a softmax.

A sum over the sequence axis is read from the shape of the code (sequence_sums.py); these
readings rule out the same shapes computing something else.
"""

from __future__ import annotations

import libcst as cst

from amp_lint.analysis.interpreter.frames import ExecutionContext
from amp_lint.analysis.syntax.outline import subtree_nodes, walk_function_statements

# How linear-attention code names its keys and values. A transposed product or an einsum of
# kᵀv's shape is also every Gram matrix, normal equation and covariance (`A.mT @ A` over
# three coordinates in geometry code), whose contracted axis is short: the names are what
# says the contracted axis is a sequence of keys.
_KEY_NAMES = frozenset(["k", "key", "keys", "k_prime", "kprime", "k_feat", "k_features"])
_VALUE_NAMES = frozenset(["v", "value", "values", "ones_like"])
# Functions whose first argument is the tensor (feature maps, ones of its shape), and
# methods that keep their subject's name (layout, dtype and feature-map methods).
_FEATURE_MAPS = frozenset(["softmax", "elu", "relu", "exp", "sigmoid", "ones_like"])
_MODULES = frozenset(["torch", "F", "nn", "functional"])
_LAYOUT_METHODS = frozenset(
    [
        *("transpose", "permute", "contiguous", "unsqueeze", "view", "reshape", "flatten"),
        *("float", "type_as", "to", "softmax", "exp", "relu", "sigmoid"),
    ]
)


def keys_and_values(keys: cst.BaseExpression, values: cst.BaseExpression) -> bool:
    """The operands of a kᵀv-shaped contraction are named as keys and values."""
    key, value = _operand_name(keys), _operand_name(values)
    return (
        key is not None
        and value is not None
        and (key.lower() in _KEY_NAMES or key.lower().startswith("k_"))
        and (value.lower() in _VALUE_NAMES or value.lower().startswith("v_"))
    )


def _operand_name(node: cst.BaseExpression) -> str | None:
    """The name a contraction operand is written with: `k` for `k`, `self.k`, `k[:, 0]`,
    `k.transpose(-2, -1)`, `F.elu(k) + 1`, `torch.softmax(k, dim=-1)`; `ones_like` for
    `torch.ones_like(v)`."""
    for _ in range(8):
        if isinstance(node, cst.Name):
            return node.value
        if isinstance(node, cst.Attribute) and node.attr.value in ("mT", "T", "H", "mH"):
            node = node.value
        elif isinstance(node, cst.Attribute):
            return node.attr.value
        elif isinstance(node, cst.Subscript):
            node = node.value
        elif isinstance(node, cst.BinaryOperation):
            node = node.left
        elif isinstance(node, cst.Call):
            inner = _named_through_call(node)
            if inner is None or isinstance(inner, str):
                return inner
            node = inner
        else:
            return None
    return None


def _named_through_call(call: cst.Call) -> cst.BaseExpression | str | None:
    """What names a call's result: its subject (`k.transpose(...)`), its first argument
    (`F.elu(k)`, `torch.ones_like(v)` gives "ones_like"), or nothing (any other call)."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "ones_like":
        return "ones_like"
    if isinstance(func, cst.Name):
        return call.args[0].value if func.value in _FEATURE_MAPS and call.args else None
    if not isinstance(func, cst.Attribute):
        return None
    if isinstance(func.value, cst.Name) and func.value.value in _MODULES:
        return call.args[0].value if func.attr.value in _FEATURE_MAPS and call.args else None
    return func.value if func.attr.value in _LAYOUT_METHODS else None


def softmaxed_scores(ctx: ExecutionContext) -> bool:
    """The statement computes attention scores, not kᵀv: its result goes through a softmax
    in the same statement (`(q.transpose(-2, -1) @ k).softmax(dim=-1)`) or the name it
    assigns does later in the function (`attn = ...; attn = attn.softmax(dim=-1)`). A
    channels-first layout (…, d, n) makes `q.transpose(-2, -1) @ k` sum the features."""
    statement = ctx.statement
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    if _mentions_softmax(statement):
        return True
    names = {
        target.target.value
        for small in statement.body
        if isinstance(small, cst.Assign)
        for target in small.targets
        if isinstance(target.target, cst.Name)
    }
    function = ctx.frame.function
    if not names or function is None:
        return False
    return any(
        _mentions_softmax(later, names)
        for later in walk_function_statements(function)
        if later is not statement
    )


def _mentions_softmax(node: cst.CSTNode, of: set[str] | None = None) -> bool:
    """A softmax call in `node` (applied to one of the names `of`, when given)."""
    for call in subtree_nodes(node):
        if not isinstance(call, cst.Call):
            continue
        func = call.func
        name = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", "")
        if name not in ("softmax", "log_softmax"):
            continue
        if of is None:
            return True
        subjects = [func.value] if isinstance(func, cst.Attribute) else []
        subjects += [arg.value for arg in call.args[:1]]
        if any(isinstance(subject, cst.Name) and subject.value in of for subject in subjects):
            return True
    return False
