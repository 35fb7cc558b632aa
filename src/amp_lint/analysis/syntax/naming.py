"""What names say about the values they hold: a loss or a metric is no activation, a
tokenizer or an embedding lookup returns none, `model` or `self.encoder` holds a model.
Read from the words of a name (`loss_dict`, `self.text_encoder`, `LayerNorm`)."""

from __future__ import annotations

import re

import libcst as cst

# Words in a name that say the value it holds is no activation: a loss or a metric.
_RESULTS = frozenset(
    [
        "loss",
        "losses",
        "criterion",
        "criterions",
        "crit",
        "metric",
        "metrics",
        "evaluator",
        "evaluate",
        "accuracy",
        "acc",
        "scaler",
        "optimizer",
        "scheduler",
        "logger",
        "writer",
    ]
)
# Words in a callee's name that say what it returns is no activation: tokens, data, float32
# embeddings looked up by index.
_NOT_LAYERS = _RESULTS | frozenset(
    [
        "tokenizer",
        "tokenize",
        "processor",
        "embed",
        "embeds",
        "embedding",
        "embeddings",
        "sampler",
        "loader",
        "dataset",
        "collate",
        "collator",
        "transform",
        "transforms",
        "augment",
    ]
)
# Layers whose output CUDA autocast makes float32 (layer_norm, group_norm, softmax): not
# half under autocast, though they are in a model cast to half.
_FLOAT32_UNDER_AUTOCAST = frozenset(["norm", "layernorm", "groupnorm", "rmsnorm", "ln", "softmax"])
_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")


_MODEL_WORDS = frozenset(
    [
        "model",
        "models",
        "net",
        "network",
        "module",
        "generator",
        "discriminator",
        "encoder",
        "decoder",
        "backbone",
        "transformer",
        "unet",
        "vae",
        "classifier",
        "teacher",
        "student",
        "lm",
    ]
)


# Methods frameworks call on a model or loss, which library mode analyses beside `forward`.
LIBRARY_METHODS = (
    "forward",
    "training_step",
    "validation_step",
    "test_step",
    "predict_step",
    "compute_loss",
    "forward_loss",
)


def is_model_name(name: str) -> bool:
    """`model`, `self.net`, `text_encoder`, `unet`: a name that holds a model."""
    return bool(name_words(name) & _MODEL_WORDS)


# Words in a name that say it holds a loss: its methods (`criterion.loss(out, y)`) may be
# one of the project's losses.
_LOSS_WORDS = frozenset(["loss", "losses", "criterion", "criterions", "crit"])


def is_loss_name(name: str) -> bool:
    """`criterion`, `self.loss_fn`, `losses`: a name that holds a loss object."""
    return bool(name_words(name) & _LOSS_WORDS)


def name_words(name: str) -> set[str]:
    """The lower-case words of a dotted name's last part: `self.loss_fn` -> {"loss", "fn"},
    `replaceMaskedValues` -> {"replace", "masked", "values"}."""
    return {word.lower() for word in _WORDS.findall(name.rsplit(".", 1)[-1])}


def is_activation_name(name: str) -> bool:
    """False for a variable or key that holds a loss or metric (`loss`, `loss_dict`,
    `outputs["loss"]`, `metrics`)."""
    return not name_words(name) & _RESULTS


def is_layer_name(name: str, *, autocast: bool = True) -> bool:
    """False for a callee that returns no activation: `criterion`, `self.loss_fn`,
    `tokenizer`, `self.embed`; under autocast also `self.norm1` and `softmax`, which
    autocast runs in float32."""
    words = name_words(name)
    if words & _NOT_LAYERS:
        return False
    return not (autocast and words & _FLOAT32_UNDER_AUTOCAST)


# Names of tensors cast to float to be multiplied at all, not for precision: masks and
# one-hot codes hold 0 and 1, token counts small integers, which float16 holds exactly.
_COUNT_OR_MASK_WORDS = ("mask", "one_hot", "onehot", "count", "ntokens", "n_tokens")


def is_count_or_mask_name(name: str) -> bool:
    """`attn_mask`, `one_hot_labels`, `ntokens`, `token_counts`: a mask or a count (the words
    may sit anywhere in the name)."""
    return any(word in name.lower() for word in _COUNT_OR_MASK_WORDS)


def subject_name(node: cst.BaseExpression) -> str:
    """`masks` for `masks`, `self.masks`, `masks[:, 0]` and `masks.reshape(n, -1)`; "" for
    anything else."""
    if isinstance(node, cst.Subscript):
        return subject_name(node.value)
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        return subject_name(node.func.value)
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return node.value if isinstance(node, cst.Name) else ""
