"""Session-wide settings for the tests that run the real `amp-lint` command.

The suite runs in parallel (pytest-xdist, `-n auto` in pyproject.toml): each worker is its own
process with its own session, so what is set up here is set up once per worker. The rules that
keep a test safe beside the others are in tests/README.md.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest

NETWORK_OPT_IN = "AMP_LINT_TEST_NETWORK"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked `network` (declared in pyproject.toml) are skipped unless asked for: the
    default run must pass on a machine without a package index, and must not spend minutes
    building virtualenvs."""
    if os.environ.get(NETWORK_OPT_IN) == "1":
        return
    skip = pytest.mark.skip(reason=f"needs the network; set {NETWORK_OPT_IN}=1 to run it")
    for item in items:
        if item.get_closest_marker("network") is not None:
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def _cache_outside_the_repository() -> Iterator[None]:
    """`amp-lint check` caches results beside the configuration; the tests lint files inside
    this repository, so their cache goes to a temporary folder instead: one per test process,
    so that parallel workers never share (or race on) a cache."""
    with tempfile.TemporaryDirectory(prefix="amp-lint-test-cache-") as directory:
        previous = os.environ.get("AMP_LINT_CACHE_DIR")
        os.environ["AMP_LINT_CACHE_DIR"] = directory
        yield
        if previous is None:
            del os.environ["AMP_LINT_CACHE_DIR"]
        else:
            os.environ["AMP_LINT_CACHE_DIR"] = previous
