"""The first pass: a standard-library `ast` scan deciding whether a file's own code can have
findings, before the libcst parse, which costs about ten times more.

The byte prefilter (files.py) admits every file that mentions `float16`, including the many
that only do so in docstrings (`torch_dtype=torch.float16` in usage examples) or in dtype
checks (`if x.dtype == torch.float16:`). Neither can make a value half precision nor open an
autocast region, so such files are analysed only when another file's calls reach them.

Every rule needs, in the file's own code, one of: an autocast region or a GradScaler or an
AMP decorator or a deprecated AMP namespace or a framework trainer (ENTRY_WORDS), a backward
call (BACKWARD_CALL: the loss may come from a float16 region in another file), a
half-precision dtype or conversion used as a value (HALF_WORDS outside a comparison), a
GradScaler recognised by its use (`x.scale(loss).backward()`, `unscale_`, a name containing
"scaler"), a configured function or callable, or, in library mode, a `forward`, a framework
step, or a layer or op that autocast runs in half (LIBRARY_WORDS).
The findings are the same with and without this pass (`--no-first-pass` turns it off to
check that; docs/performance.md reports the comparison on real packages).
"""

from __future__ import annotations

import ast
import bisect
import re
import warnings

from amp_lint.analysis.syntax.naming import LIBRARY_METHODS
from amp_lint.settings.config import Config

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
# A backward call (`loss.backward()`, `torch.autograd.grad(...)`) may differentiate a loss
# that another linted file computed under float16 autocast (AMP304). Calls only: the many
# `def backward(ctx, ...)` of autograd Functions are not.
BACKWARD_CALL = re.compile(rb"\.backward\s*\(|autograd\s*\.\s*(?:grad|backward)\s*\(")
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


# One scan of the text: comments and string literals are skipped, identifiers captured; an
# f-string's replacement fields are code, so their identifiers count. Three times faster
# than compiling the file to read its code's names.
_TOKENS = re.compile(
    r"""\#[^\n]*
    | (?P<prefix>[rRbBuUfF]{1,2})?
      (?P<string>\"\"\"(?:[^\\]|\\.)*?\"\"\"|'''(?:[^\\]|\\.)*?'''
               |"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
    | (?P<identifier>[^\W\d]\w*)""",
    re.VERBOSE | re.DOTALL,
)
_IDENTIFIER = re.compile(r"[^\W\d]\w*")
# Every token outside string literals and comments, for `code_token_count`.
_CODE_TOKENS = re.compile(
    rb"""\"\"\"(?:[^\\]|\\.)*?\"\"\"|'''(?:[^\\]|\\.)*?'''
    |"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|\#[^\n]*|(\w+|[^\w\s])""",
    re.VERBOSE | re.DOTALL,
)
_LINE_BREAK = re.compile(r"\n")
_REPLACEMENT_FIELD = re.compile(r"(?<!\{)\{(?!\{)([^{}]*)\}")


def own_code_may_have_findings(source: bytes, config: Config) -> bool:
    """False only when no rule can report anything in this file's own code."""
    try:
        text = source.decode("utf-8")
    except UnicodeDecodeError:
        return True  # the libcst parse reports the error, naming the file
    # Every identifier the code uses, strings and comments excluded, without parsing: this
    # decides most files. It may hold a few more words than the code's names (keywords,
    # keyword-argument names, an f-string's words), which only makes the pass keep more.
    names = code_identifiers(text)
    words = ENTRY_WORDS | _configured_words(config)
    if names & words or any("scaler" in name.lower() for name in names):
        return True
    if names & {"backward", "autograd"} and BACKWARD_CALL.search(source):
        return True
    if config.assume_autocast is not None and (names & LIBRARY_WORDS or b" @ " in source):
        return True  # `a @ w` is a matmul, which autocast runs in half
    if not names & HALF_WORDS:
        return False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes and the like are not ours to report
            tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return True  # the libcst parse reports the error, naming the file
    positions = _half_word_positions(text)
    if positions is None:
        return _half_outside_comparisons(tree)
    return any(_in_comparison(tree, *position) is False for position in positions)


def code_token_count(source: bytes) -> int:
    """Tokens outside string literals and comments: what a syntax tree's size follows."""
    return sum(1 for token in _CODE_TOKENS.findall(source) if token)


def code_identifiers(text: str) -> set[str]:
    """The identifiers outside comments and plain string literals."""
    found = set()
    for match in _TOKENS.finditer(text):
        identifier = match.group("identifier")
        if identifier is not None:
            found.add(identifier)
        else:
            found.update(_fstring_field_identifiers(match))
    return found


def _fstring_field_identifiers(match: re.Match[str]) -> set[str]:
    """The identifiers in an f-string's replacement fields (none for other tokens)."""
    prefix = match.group("prefix")
    if not prefix or "f" not in prefix.lower():
        return set()
    fields = _REPLACEMENT_FIELD.findall(match.group("string"))
    return {name for field in fields for name in _IDENTIFIER.findall(field)}


def _half_word_positions(text: str) -> list[tuple[str, int, int]] | None:
    """(word, line, UTF-8 column) of each HALF_WORDS identifier in the code; None where the
    text cannot say (a half word in an f-string's field, a carriage return, which ast
    counts as a line break)."""
    if "\r" in text:
        return None
    line_starts = [0] + [match.end() for match in _LINE_BREAK.finditer(text)]
    positions = []
    for match in _TOKENS.finditer(text):
        word = match.group("identifier")
        if word in HALF_WORDS:
            offset = match.start("identifier")
            line = bisect.bisect_right(line_starts, offset)
            column = len(text[line_starts[line - 1] : offset].encode("utf-8"))
            positions.append((word, line, column))
        elif word is None and _fstring_field_identifiers(match) & HALF_WORDS:
            return None
    return positions


def _in_comparison(tree: ast.AST, word: str, line: int, column: int) -> bool | None:
    """Whether the Name or Attribute `word` written at (line, column) is inside a
    comparison; None when no such node is there (a keyword argument, a `def` name). Only
    the nodes whose span covers the position are visited, not the whole tree."""
    pending: list[tuple[ast.AST, bool]] = [(tree, False)]
    while pending:
        node, inside = pending.pop()
        inside = inside or isinstance(node, ast.Compare)
        if _identifier(node) == word and _identifier_position(node) == (line, column):
            return inside
        for child in ast.iter_child_nodes(node):
            if _covers(child, line, column):
                pending.append((child, inside))
    return None


def _identifier_position(node: ast.AST) -> tuple[int, int]:
    if isinstance(node, ast.Attribute):
        assert node.end_lineno is not None and node.end_col_offset is not None
        return node.end_lineno, node.end_col_offset - len(node.attr)
    return node.lineno, node.col_offset  # type: ignore[attr-defined]


def _covers(node: ast.AST, line: int, column: int) -> bool:
    """Whether the node's source span holds the position; nodes without one (arguments,
    comprehensions, operators) might, and so do decorated definitions' decorators, which
    come before the node's own line."""
    end_line = getattr(node, "end_lineno", None)
    if end_line is None:
        return True
    start = (node.lineno, node.col_offset)  # type: ignore[attr-defined]
    for decorator in getattr(node, "decorator_list", ()):
        start = min(start, (decorator.lineno, decorator.col_offset))
    return start <= (line, column) < (end_line, node.end_col_offset)  # type: ignore[attr-defined]


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
