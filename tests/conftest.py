"""Session-wide settings for the tests that run the real `amp-lint` command."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True, scope="session")
def _cache_outside_the_repository() -> Iterator[None]:
    """`amp-lint check` caches results beside the configuration; the tests lint files inside
    this repository, so their cache goes to a temporary folder instead."""
    with tempfile.TemporaryDirectory(prefix="amp-lint-test-cache-") as directory:
        previous = os.environ.get("AMP_LINT_CACHE_DIR")
        os.environ["AMP_LINT_CACHE_DIR"] = directory
        yield
        if previous is None:
            del os.environ["AMP_LINT_CACHE_DIR"]
        else:
            os.environ["AMP_LINT_CACHE_DIR"] = previous
