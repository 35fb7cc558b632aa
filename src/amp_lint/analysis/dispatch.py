"""Calls amp-lint cannot see into, and the dispatch they lead to.

A call of a model received as a parameter, built by a registry or a config (`model(x)`,
`self.model.forward_loss(batch)`), made under an enabled float16/bfloat16 region returns the
region's dtype as an assumption: that is what autocast makes of a model whose last layer is a
Linear, convolution or matmul. Results that are clearly not activations (losses, metrics,
tokenizers, embeddings; under autocast also norms and softmax) do not get it. A model cast
to half (`self.model = self.model.half()`) is recorded the same way.

Each becomes a ClassAssumption (dispatch): the project's modules in the program around this
file may be what was called, so their methods run under that region, or with half
parameters. What dispatch itself analyses does not dispatch again, and a program too large
to guess in (a model zoo) is not dispatched to at all (MAX_DISPATCH_TARGETS).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from amp_lint.analysis.arguments import Arguments
from amp_lint.analysis.autocast_region import AutocastRegion
from amp_lint.analysis.dtypes import BFLOAT16, FLOAT16, DType
from amp_lint.analysis.frames import Frame
from amp_lint.analysis.naming import is_layer_name
from amp_lint.analysis.outline import source_text
from amp_lint.analysis.project import ClassAssumption, dispatch_key, portable_region
from amp_lint.analysis.values import UNKNOWN_VALUE, Value


@dataclass(frozen=True)
class OpaqueCall:
    """A call made under an enabled region that amp-lint could not see into."""

    region: AutocastRegion
    text: str
    method: str = "forward"  # `model.forward_loss(batch)` runs forward_loss


@dataclass(frozen=True)
class ModelCast:
    """`model.half()` (or `.to(torch.bfloat16)`) of a model amp-lint cannot resolve."""

    dtype: DType
    text: str


class Dispatch:
    """What one module's analysis records of calls it cannot see into."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.opaque_calls: list[OpaqueCall] = []
        self.model_casts: list[ModelCast] = []

    def opaque(
        self,
        site: cst.Call,
        callee_name: str | None,
        args: Arguments,
        frame: Frame,
        *,
        method: str = "forward",
    ) -> Value:
        """What a call of something amp-lint cannot see into returns: under an enabled
        float16/bfloat16 region (or in a model cast to half), with tensor arguments, the
        half dtype as an assumption, unless its name says it returns no activation."""
        region = frame.active_region
        if region is None and frame.half_params is not None and args.carries_tensor_data():
            if callee_name is not None and not is_layer_name(callee_name, autocast=False):
                return UNKNOWN_VALUE
            return Value(frame.half_params)  # a layer of the model cast to half
        if region is None or region.dtype not in (FLOAT16, BFLOAT16, None):
            return UNKNOWN_VALUE
        if not args.carries_tensor_data():
            return UNKNOWN_VALUE
        text = source_text(site)
        if not frame.dispatched:
            # The code it runs may be one of the project's modules, a loss among them.
            self.opaque_calls.append(OpaqueCall(region, text, method))
        if callee_name is not None and not is_layer_name(callee_name):
            return UNKNOWN_VALUE
        dtype = region.lower_precision
        why = (
            f"`{text}` returns {dtype.describe()} under autocast, as a model ending in a "
            "Linear, convolution or matmul does"
        )
        return Value(dtype.assuming(why))

    def cast_model(self, dtype: DType, site: cst.Call, frame: Frame) -> None:
        """Record `model.half()` of a model amp-lint cannot resolve."""
        if not frame.dispatched:
            self.model_casts.append(ModelCast(dtype, source_text(site)))

    def assumptions(self) -> list[ClassAssumption]:
        """One assumption per region (or half dtype) and method: the modules near this file
        run under it. Messages name the file, not the line: a line needs positions, which
        cost as much as a parse."""
        found: dict[object, ClassAssumption] = {}
        for call in self.opaque_calls:
            region = portable_region(call.region)
            why = (
                f"assumed to run under the {region.describe()} in {self.path}, where "
                f"`{call.text}` calls a model amp-lint cannot resolve"
            )
            assumption = ClassAssumption((), (call.method,), region, why, near=self.path)
            found.setdefault(dispatch_key(assumption), assumption)
        for cast in self.model_casts:
            why = (
                f"assumed to run with {cast.dtype.describe()} parameters: `{cast.text}` in "
                f"{self.path} casts a model amp-lint cannot resolve"
            )
            dtype = cast.dtype.assuming(
                f"the model's parameters are {cast.dtype.describe()} ({why})"
            )
            assumption = ClassAssumption(
                (), ("forward",), None, why, near=self.path, half_params=dtype
            )
            found.setdefault(dispatch_key(assumption), assumption)
        return list(found.values())
