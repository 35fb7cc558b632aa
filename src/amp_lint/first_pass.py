"""The first pass: a standard-library `ast` scan deciding whether a file's own code can have
findings, before the libcst parse, which costs about ten times more.

The byte prefilter (files.py) admits every file that mentions `float16`, including the many
that only do so in docstrings (`torch_dtype=torch.float16` in usage examples) or in dtype
checks (`if x.dtype == torch.float16:`). Neither can make a value half precision nor open an
autocast region, so such files are analysed only when another file's calls reach them.

Every rule needs, in the file's own code, one of: an autocast region or a GradScaler or an
AMP decorator or a deprecated AMP namespace or a framework trainer (ENTRY_WORDS), a
half-precision dtype or conversion used as a value (HALF_WORDS outside a comparison), a
GradScaler recognised by its use (`x.scale(loss).backward()`, `unscale_`, a name containing
"scaler"), a configured function or callable, or, in library mode, a `forward`, a framework
step, or a layer or op that autocast runs in half (LIBRARY_WORDS).
The findings are the same with and without this pass (`--no-first-pass` turns it off to
check that; docs/performance.md reports the comparison on real packages).
"""

from __future__ import annotations

import ast
import warnings
from types import CodeType

from amp_lint.analysis.naming import LIBRARY_METHODS
from amp_lint.config import Config

ENTRY_WORDS = frozenset(
    {
        "autocast",
        "GradScaler",
        "ShardedGradScaler",
        "custom_fwd",
        "custom_bwd",
        "amp",
        "Accelerator",
        "Trainer",
        "TrainingArguments",
        "Seq2SeqTrainingArguments",
        "unscale_",
    }
)
HALF_WORDS = frozenset({"half", "float16", "bfloat16", "HalfTensor", "BFloat16Tensor"})
# Library mode runs a module's forwards, framework steps, public functions and plain
# classes' methods under autocast; a half value then comes from a layer or op autocast
# runs in half, so a file needs one of these (or a forward, or a step a framework calls).
LIBRARY_WORDS = frozenset(LIBRARY_METHODS) | frozenset(
    {
        "matmul",
        "bmm",
        "mm",
        "addmm",
        "baddbmm",
        "einsum",
        "linear",
        "Linear",
        "conv1d",
        "conv2d",
        "conv3d",
        "Conv1d",
        "Conv2d",
        "Conv3d",
    }
)
# Configured framework settings make methods of these classes run under autocast.
_FRAMEWORK_CLASSES = {
    "lightning": ("LightningModule",),
    "transformers": ("Trainer", "Seq2SeqTrainer", "PreTrainedModel"),
}


def own_code_may_have_findings(source: bytes, config: Config) -> bool:
    """False only when no rule can report anything in this file's own code."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes and the like are not ours to report
            code = compile(source, "<amp-lint>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return True  # the libcst parse reports the error, naming the file
    # Every identifier the code uses (attributes, globals, locals), strings and comments
    # excluded, without walking a tree in Python: this decides most files.
    names = _code_names(code, set())
    words = ENTRY_WORDS | _configured_words(config)
    if names & words or any("scaler" in name.lower() for name in names):
        return True
    if config.assume_autocast is not None and (names & LIBRARY_WORDS or b" @ " in source):
        return True  # `a @ w` is a matmul, which autocast runs in half
    if not names & HALF_WORDS:
        return False
    return _half_outside_comparisons(ast.parse(source))


def _code_names(code: CodeType, found: set[str]) -> set[str]:
    found.update(code.co_names, code.co_varnames, code.co_cellvars, code.co_freevars)
    for constant in code.co_consts:
        if isinstance(constant, CodeType):
            _code_names(constant, found)
    return found


def _half_outside_comparisons(tree: ast.AST) -> bool:
    """`x.to(torch.float16)` makes a half value; `x.dtype == torch.float16` only asks."""
    half_uses = [node for node in ast.walk(tree) if _identifier(node) in HALF_WORDS]
    if not half_uses:
        return False
    in_comparisons = _comparison_operands(tree)
    return any(id(node) not in in_comparisons for node in half_uses)


def _identifier(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def _configured_words(config: Config) -> set[str]:
    words = {
        name.rsplit(".", 1)[-1]
        for name in (*config.autocast_functions, *config.fp32_only_callables)
    }
    if config.lightning_precision is not None:
        words.update(_FRAMEWORK_CLASSES["lightning"])
    if config.transformers_trainer_precision is not None:
        words.update(_FRAMEWORK_CLASSES["transformers"])
    return words


def _comparison_operands(tree: ast.AST) -> set[int]:
    """Nodes inside comparisons: `x.dtype == torch.float16` asks, it makes nothing half."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            inside.update(id(child) for child in ast.walk(node))
    return inside
