"""FSDP's own mixed precision: the policies a module hands to FSDP, their dtypes, and the
loss scalers and backward calls beside them.

FSDP1 (`FullyShardedDataParallel(module, mixed_precision=MixedPrecision(...))`) and FSDP2
(`fully_shard(module, mp_policy=MixedPrecisionPolicy(...))`) cast the float32 parameter shards
to `param_dtype` for forward and backward, and reduce the gradients across ranks in
`reduce_dtype` (`param_dtype` when unset). Syntactic facts, module-wide, for AMP309: a policy
counts when a wrap call in the module receives it, directly, through a name assigned in the
same function or at module level (`mp = MixedPrecision(...)`, either branch of a
conditional), an attribute assigned anywhere in the module (`self.mp_policy`), or through
`**kwargs` built there (`kwargs["mp_policy"] = ...`, `{"mixed_precision": ...}`, `dict(...)`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import libcst as cst

from amp_lint.analysis.regions.finder import GRAD_SCALERS, call_argument
from amp_lint.analysis.scaler.names import is_disabled
from amp_lint.analysis.syntax.names import ModuleNames, dotted_name
from amp_lint.analysis.syntax.outline import subtree_nodes
from amp_lint.analysis.training.scope_assignments import ScopeAssignments, attribute_assignments
from amp_lint.analysis.training.training_setup import backpropagated_tensor, scopes
from amp_lint.analysis.values.dtypes import dtype_from_torch_name

FSDP1 = "FSDP1"
FSDP2 = "FSDP2"
_FSDP1_WRAPPERS = frozenset(
    [
        "torch.distributed.fsdp.FullyShardedDataParallel",
        "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
    ]
)
_FSDP2_WRAPPERS = frozenset(
    [
        "torch.distributed.fsdp.fully_shard",
        "torch.distributed.fsdp._fully_shard.fully_shard",
        "torch.distributed.fsdp._fully_shard._fully_shard.fully_shard",
        "torch.distributed._composable.fsdp.fully_shard",
        "torch.distributed._composable.fsdp.fully_shard.fully_shard",
    ]
)
_FSDP1_POLICIES = frozenset(
    [
        "torch.distributed.fsdp.MixedPrecision",
        "torch.distributed.fsdp.api.MixedPrecision",
        "torch.distributed.fsdp.fully_sharded_data_parallel.MixedPrecision",
    ]
)
_FSDP2_POLICIES = frozenset(
    [
        "torch.distributed.fsdp.MixedPrecisionPolicy",
        "torch.distributed.fsdp._fully_shard.MixedPrecisionPolicy",
        "torch.distributed.fsdp._fully_shard._fsdp_api.MixedPrecisionPolicy",
        "torch.distributed._composable.fsdp.MixedPrecisionPolicy",
        "torch.distributed._composable.fsdp.fully_shard.MixedPrecisionPolicy",
    ]
)
SHARDED_GRAD_SCALERS = frozenset(
    [
        "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler",
        "torch.distributed.fsdp.ShardedGradScaler",
    ]
)
# The wrap's keyword for its policy, and its position: FSDP1's `mixed_precision` is its 7th
# parameter (module, process_group, sharding_strategy, cpu_offload, auto_wrap_policy,
# backward_prefetch, mixed_precision); `fully_shard`'s `mp_policy` is keyword-only.
_POLICY_ARGUMENT = {FSDP1: ("mixed_precision", 6), FSDP2: ("mp_policy", None)}
# A dtype argument that is neither a torch dtype nor None.
UNKNOWN = "unknown"
# How many names deep a policy or dtype is followed (`mp = fp16_policy`, ...).
_DEPTH = 4


@dataclass(frozen=True)
class Policy:
    """A `MixedPrecision(...)` (FSDP1) or `MixedPrecisionPolicy(...)` (FSDP2) call."""

    call: cst.Call
    api: str  # FSDP1 or FSDP2
    # "float16", "bfloat16", "float32", ... for a literal torch dtype; None when not given
    # (or None); UNKNOWN for anything else.
    param_dtype: str | None
    reduce_dtype: str | None
    keep_low_precision_grads: bool
    # For a policy defined in another linted file (`from policies import fpSixteen`): where
    # ("policies.py:7"), and the name this module gives it, where findings go.
    origin: str | None = None
    reference: cst.BaseExpression | None = None

    @property
    def float16_params(self) -> bool:
        return self.param_dtype == "float16"

    @property
    def effective_reduce_dtype(self) -> str | None:
        """FSDP reduces in `param_dtype` when `reduce_dtype` is unset."""
        return self.reduce_dtype if self.reduce_dtype is not None else self.param_dtype

    @property
    def float16_reduce(self) -> bool:
        return self.effective_reduce_dtype == "float16"


@dataclass(frozen=True)
class Wrap:
    """A call of FSDP1's `FullyShardedDataParallel` or FSDP2's `fully_shard`, with the
    policies its mixed-precision argument may hold."""

    call: cst.Call
    api: str
    policies: tuple[Policy, ...]
    # `sharding_strategy=ShardingStrategy.NO_SHARD`: every rank holds whole gradients.
    no_shard: bool


@dataclass(frozen=True)
class ScalerMade:
    call: cst.Call
    sharded: bool  # ShardedGradScaler rather than a plain GradScaler
    enabled: bool  # False only for a literal `enabled=False`


@dataclass(frozen=True)
class FsdpPrecision:
    wraps: tuple[Wrap, ...]
    scalers: tuple[ScalerMade, ...]
    # A tensor backward call (`loss.backward()`, `torch.autograd.grad`) in the module.
    trains: bool
    # A name containing "scaler" anywhere in the module (a scaler made elsewhere, passed in).
    mentions_scaler: bool


# Policies an imported name (`fpSixteen` from `from policies import fpSixteen`) stands for.
ImportedPolicies = Callable[[cst.Name], list[Policy]]


def fsdp_precision(
    module: cst.Module, names: ModuleNames, imported: ImportedPolicies | None = None
) -> FsdpPrecision:
    attributes = attribute_assignments(module)
    module_scope, *function_scopes = scopes(module)
    module_values = ScopeAssignments(module_scope.nodes(), attributes)
    wraps: list[Wrap] = []
    scalers: list[ScalerMade] = []
    trains = False
    for scope in (module_scope, *function_scopes):
        values = (
            module_values
            if scope is module_scope
            else ScopeAssignments(scope.nodes(), attributes, module_values)
        )
        for call in scope.calls():
            qualified = names.qualified_name(call.func)
            api = _wrap_api(qualified)
            if api is not None:
                wraps.append(_wrap(call, api, names, values, imported))
            elif qualified in SHARDED_GRAD_SCALERS or qualified in GRAD_SCALERS:
                sharded = qualified in SHARDED_GRAD_SCALERS
                scalers.append(ScalerMade(call, sharded, not is_disabled(call)))
            elif not trains and backpropagated_tensor(call, names) is not None:
                trains = True
    mentions_scaler = any(
        isinstance(node, cst.Name) and "scaler" in node.value.lower()
        for node in subtree_nodes(module)
    )
    return FsdpPrecision(tuple(wraps), tuple(scalers), trains, mentions_scaler)


def _wrap_api(qualified: str | None) -> str | None:
    if qualified in _FSDP1_WRAPPERS:
        return FSDP1
    if qualified in _FSDP2_WRAPPERS:
        return FSDP2
    return None


def _wrap(
    call: cst.Call,
    api: str,
    names: ModuleNames,
    values: ScopeAssignments,
    imported: ImportedPolicies | None = None,
) -> Wrap:
    keyword, position = _POLICY_ARGUMENT[api]
    argument = call_argument(call, position if position is not None else 99, keyword)
    expressions = [argument] if argument is not None else []
    for arg in call.args:
        if arg.star == "**":
            expressions += values.keyword_values(arg.value, keyword)
    policies: dict[int, Policy] = {}
    for expression in expressions:
        for policy_call in values.resolve(expression, _DEPTH):
            policy = _policy(policy_call, names, values)
            if policy is not None:
                policies.setdefault(id(policy_call), policy)
        if imported is not None:
            for name in values.unassigned_names(expression, _DEPTH):
                for policy in imported(name):
                    policies.setdefault(id(policy.call), replace(policy, reference=name))
    strategy = call_argument(call, 2, "sharding_strategy")
    no_shard = strategy is not None and (dotted_name(strategy) or "").endswith(".NO_SHARD")
    return Wrap(call, api, tuple(policies.values()), no_shard)


def module_policies(module: cst.Module, names: ModuleNames, name: str) -> list[Policy]:
    """The policies a top-level name of the module is assigned (`fpSixteen = MixedPrecision(
    ...)`), for a module that imports it."""
    module_scope = scopes(module)[0]
    values = ScopeAssignments(module_scope.nodes(), {})
    policies = (_policy(call, names, values) for call in values.resolve(cst.Name(name), _DEPTH))
    return [policy for policy in policies if policy is not None]


def _policy(call: cst.Call, names: ModuleNames, values: ScopeAssignments) -> Policy | None:
    qualified = names.qualified_name(call.func)
    if qualified in _FSDP1_POLICIES:
        api = FSDP1
    elif qualified in _FSDP2_POLICIES:
        api = FSDP2
    else:
        return None
    param = _dtype_argument(call, 0, "param_dtype", names, values)
    reduce = _dtype_argument(call, 1, "reduce_dtype", names, values)
    keep = _argument_or_splat(call, 3, "keep_low_precision_grads", values) if api == FSDP1 else None
    keep_low = isinstance(keep, cst.Name) and keep.value == "True"
    return Policy(call, api, param, reduce, keep_low)


def _dtype_argument(
    call: cst.Call, position: int, keyword: str, names: ModuleNames, values: ScopeAssignments
) -> str | None:
    expression = _argument_or_splat(call, position, keyword, values)
    if expression is None:
        return None
    return _dtype_of(expression, names, values, _DEPTH)


def _argument_or_splat(
    call: cst.Call, position: int, keyword: str, values: ScopeAssignments
) -> cst.BaseExpression | None:
    """The argument, also from a `**settings` dict built in the module; with a `*args` or a
    `**` that cannot be read, None only when nothing could be passed (else a sentinel that
    reads as unknown)."""
    found = call_argument(call, position, keyword)
    if found is not None:
        return found
    for arg in call.args:
        if arg.star == "**":
            candidates = values.keyword_values(arg.value, keyword)
            if len(candidates) == 1:
                return candidates[0]
            if candidates or not values.is_readable_dict(arg.value):
                return _OPAQUE
        elif arg.star == "*":
            return _OPAQUE
    return None


# Stands for an argument that may be passed but cannot be read: its dtype is unknown.
_OPAQUE = cst.Ellipsis()


def _dtype_of(
    expression: cst.BaseExpression, names: ModuleNames, values: ScopeAssignments, depth: int
) -> str | None:
    if isinstance(expression, cst.Name) and expression.value == "None":
        return None
    dtype = dtype_from_torch_name(names.qualified_name(expression))
    if dtype is not None:
        return dtype.describe()
    assigned = values.of(expression)
    if depth > 0 and len(assigned) == 1:  # `dtype = torch.float16` once, nothing else
        return _dtype_of(assigned[0], names, values, depth - 1)
    return UNKNOWN
