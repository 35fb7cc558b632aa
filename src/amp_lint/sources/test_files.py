"""Which linted files are tests, by the layout pytest and unittest projects use: a file under
a `tests`/`test` folder, `test_*.py`, `*_test.py`, `conftest.py`.

Tests use half precision on purpose and run a few steps: a hazard that needs a long training
run to show (updates lost to rounding in half parameters, gradients underflowing without a
GradScaler) says nothing about them, while an error at run time fails the test as it would
fail training. Rules of the first kind set `reported_in_tests = False` (rules/base.py).
"""

from __future__ import annotations

import posixpath

_TEST_FOLDERS = frozenset(["tests", "test"])


def is_test_file(path: str) -> bool:
    """`path` (relative to the project root, or as given) is a test by its layout."""
    parts = path.replace("\\", "/").split("/")
    name = parts[-1]
    if name == "conftest.py" or name.startswith("test_") or name.endswith("_test.py"):
        return True
    return any(part in _TEST_FOLDERS for part in parts[:-1]) and posixpath.splitext(name)[1] in (
        ".py",
        ".pyi",
        ".ipynb",
    )
