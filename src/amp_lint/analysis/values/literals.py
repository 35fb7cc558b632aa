"""The values of literals, read without trusting them.

libcst accepts literals CPython refuses (`"\\N{NO SUCH NAME}"`, an integer of 5,000 digits), and
Python's integers are unbounded (`((10**1000)**1000)**1000` takes hours to compute). Every read of
a literal's value goes through here: a literal that cannot be read has no value (None), and
integers beyond 2**53 are kept as the floats they round to.
"""

from __future__ import annotations

import math

import libcst as cst

# Exact integers matter only as indices, sizes and keys; past float's exact range a number is
# only compared with dtype limits, for which its float is enough.
EXACT_INTEGER_LIMIT = 2**53


def bounded(number: float) -> float:
    """`number`, or for an integer beyond 2**53 the float it rounds to (±inf past float's
    range)."""
    if isinstance(number, int) and abs(number) > EXACT_INTEGER_LIMIT:
        try:
            return float(number)
        except OverflowError:
            return math.copysign(math.inf, number)
    return number


def number_literal(node: cst.BaseExpression | None) -> float | None:
    """The value of an integer or float literal, bounded; None for anything else."""
    if not isinstance(node, (cst.Integer, cst.Float)):
        return None
    try:
        value = node.evaluated_value
    except (ValueError, SyntaxError, OverflowError):  # CPython's 4,300-digit limit
        return None
    return bounded(value) if isinstance(value, (int, float)) else None


def string_literal(node: cst.BaseExpression | None) -> str | None:
    """The text of a plain string literal (not bytes, not an f-string); None when it is not one
    or its escapes are not valid Python."""
    if not isinstance(node, cst.SimpleString):
        return None
    try:
        value = node.evaluated_value
    except (ValueError, SyntaxError, UnicodeError):
        return None
    return value if isinstance(value, str) else None
