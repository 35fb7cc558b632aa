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

from amp_lint.analysis.interpreter.arguments import Arguments
from amp_lint.analysis.interpreter.frames import Frame
from amp_lint.analysis.project.index import ClassAssumption, dispatch_key
from amp_lint.analysis.regions.region import AutocastRegion
from amp_lint.analysis.syntax.naming import is_layer_name, is_loss_name
from amp_lint.analysis.syntax.outline import source_text
from amp_lint.analysis.values.dtypes import BFLOAT16, FLOAT16, DType
from amp_lint.analysis.values.value import UNKNOWN_VALUE, Value
from amp_lint.sources.test_files import is_test_file

# Calls of the same method under the same region with different known arguments each run
# the methods again; past this many, one more set of arguments is not worth the time.
MAX_ARGUMENT_VARIANTS = 3


@dataclass(frozen=True)
class OpaqueCall:
    """A call made under an enabled region that amp-lint could not see into."""

    region: AutocastRegion
    text: str
    method: str = "forward"  # `model.forward_loss(batch)` runs forward_loss
    noun: str = "a model"  # what the callee's name says it is: "a model", "a loss"
    # The call's positional arguments whose dtypes are known, portable; () for none.
    positional: tuple[Value, ...] = ()


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
        # Every call site amp-lint could not see into (ids of the Call nodes), a fact rules
        # may read (ExecutionContext.is_opaque_call).
        self.opaque_sites: set[int] = set()
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
        self.opaque_sites.add(id(site))
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
            noun = "a loss" if callee_name is not None and is_loss_name(callee_name) else "a model"
            self.opaque_calls.append(OpaqueCall(region, text, method, noun, _known_arguments(args)))
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
        cost as much as a parse.

        None from a test file: a test builds the modules it runs in half precision on
        purpose (a local module, a float16 input under bfloat16 autocast), and taking every
        module of its program to run so reported the library's float32 feature code
        (speechbrain's autocast test, prime-rl's; issue 41's repository triage)."""
        if is_test_file(self.path):
            return []
        found: dict[object, ClassAssumption] = {}
        variants: dict[tuple[object, str], int] = {}
        for call in self.opaque_calls:
            region = call.region.portable()
            why = (
                f"assumed to run under the {region.describe()} in {self.path}, where "
                f"`{call.text}` calls {call.noun} amp-lint cannot resolve"
            )
            assumption = ClassAssumption(
                (),
                (call.method,),
                region,
                why,
                near=self.path,
                positional=call.positional,
                models_only=call.noun == "a model",
            )
            key = dispatch_key(assumption)
            if key in found:
                continue
            same_method = (region.key, call.method)
            variants[same_method] = variants.get(same_method, 0) + 1
            if variants[same_method] <= MAX_ARGUMENT_VARIANTS:
                found[key] = assumption
        for cast in self.model_casts:
            why = (
                f"assumed to run with {cast.dtype.describe()} parameters: `{cast.text}` in "
                f"{self.path} casts a model amp-lint cannot resolve"
            )
            dtype = cast.dtype.assuming(
                f"the model's parameters are {cast.dtype.describe()}: `{cast.text}` in "
                f"{self.path} casts a model amp-lint cannot resolve"
            )
            assumption = ClassAssumption(
                (), ("forward",), None, why, near=self.path, half_params=dtype, models_only=True
            )
            found.setdefault(dispatch_key(assumption), assumption)
        return list(found.values())


def _known_arguments(args: Arguments) -> tuple[Value, ...]:
    """The positional arguments of a dispatched call whose dtypes are known (`outputs` of
    a model assumed half), for the parameters of the methods it may run; () where none is
    or where a starred argument hides which parameter gets which."""
    if args.starred:
        return ()
    known = [
        value.portable() if value.dtype.is_known_tensor or value.elements else UNKNOWN_VALUE
        for value in args.positional
    ]
    while known and known[-1] == UNKNOWN_VALUE:
        known.pop()
    return tuple(known)
