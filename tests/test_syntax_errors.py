"""Syntax errors are reported in every Python file, as ruff reports them: in files with AMP
code (parsed by libcst for the analysis) and in files without AMP vocabulary (never analysed;
CPython's parser checks them, libcst decides what CPython refuses: parse/syntax_check.py)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from runners import amp_lint_bytes

from amp_lint.run import runner

AMP_LINT = Path(sys.executable).parent / "amp-lint"
DEPRECATED = b"import torch\n\nwith torch.cuda.amp.autocast():\n    pass\n"
NOT_PYTHON = b"def f(:\n    pass\n"


def cpython_error(source: bytes) -> str:
    """`LINE:COLUMN: cannot parse: MESSAGE` as this Python words it (3.9 words some errors
    otherwise than 3.10 and later)."""
    try:
        compile(source, "<test>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as error:
        return f"{error.lineno}:{error.offset}: cannot parse: {error.msg}"
    raise AssertionError("the source parses")


def errors(result: subprocess.CompletedProcess[bytes]) -> list[str]:
    return [line for line in result.stderr.decode().splitlines() if "error:" in line]


def test_a_file_without_amp_vocabulary_that_is_not_python_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_bytes(NOT_PYTHON)
    (tmp_path / "deprecated.py").write_bytes(DEPRECATED)
    result = amp_lint_bytes(tmp_path, "check", ".")
    assert result.returncode == 2
    assert errors(result) == [f"amp-lint: error: broken.py:{cpython_error(NOT_PYTHON)}"]
    assert b"deprecated.py:3:6: AMP401" in result.stdout  # the other files are still linted


def test_a_file_the_first_pass_skips_is_checked_too(tmp_path: Path) -> None:
    """AMP vocabulary in a comment only: the quick first pass (first_pass.py) finds nothing
    to analyse, so libcst never parses it; its syntax is checked all the same."""
    source = b"import torch\n# see autocast\ndef h(:\n"
    (tmp_path / "mentions.py").write_bytes(source)
    result = amp_lint_bytes(tmp_path, "check", ".")
    assert result.returncode == 2
    assert errors(result) == [f"amp-lint: error: mentions.py:{cpython_error(source)}"]


def test_python_2_code_is_reported_with_cpythons_words(tmp_path: Path) -> None:
    source = b'x = 1\nprint "x"\n'
    (tmp_path / "old.py").write_bytes(source)
    result = amp_lint_bytes(tmp_path, "check", ".")
    assert result.returncode == 2
    assert errors(result) == [f"amp-lint: error: old.py:{cpython_error(source)}"]
    assert "Missing parentheses in call to 'print'" in errors(result)[0]


def test_an_error_in_amp_code_is_placed_where_cpython_places_it(tmp_path: Path) -> None:
    source = b"import torch\nwith torch.autocast(:\n    pass\n"
    (tmp_path / "amp.py").write_bytes(source)
    result = amp_lint_bytes(tmp_path, "check", ".")
    assert result.returncode == 2
    assert errors(result) == [f"amp-lint: error: amp.py:{cpython_error(source)}"]


@pytest.mark.parametrize(
    "source",
    [
        b"type Vector = list[float]\n",  # Python 3.12: libcst reads it on any Python
        b"def first[T](items: list[T]) -> T:\n    return items[0]\n",
        b"x = f'{1:{2}}'\ny = b'\\d'  # an invalid escape warns, it does not fail\n",
    ],
)
def test_code_that_libcst_reads_is_not_an_error(tmp_path: Path, source: bytes) -> None:
    (tmp_path / "modern.py").write_bytes(source)
    result = amp_lint_bytes(tmp_path, "check", ".")
    assert (result.returncode, errors(result)) == (0, [])


def test_standard_input_without_amp_vocabulary_is_checked(tmp_path: Path) -> None:
    result = amp_lint_bytes(tmp_path, "check", "-", stdin=NOT_PYTHON)
    assert result.returncode == 2
    assert errors(result) == [f"amp-lint: error: -:{cpython_error(NOT_PYTHON)}"]
    fixed = amp_lint_bytes(tmp_path, "check", "--fix", "-", stdin=NOT_PYTHON)
    assert (fixed.returncode, fixed.stdout) == (2, NOT_PYTHON)  # the input, unchanged


def test_the_error_is_in_json_output_runs_too(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_bytes(NOT_PYTHON)
    result = amp_lint_bytes(tmp_path, "check", "--output-format", "json", ".")
    assert result.returncode == 2
    assert json.loads(result.stdout) == []
    assert errors(result) == [f"amp-lint: error: broken.py:{cpython_error(NOT_PYTHON)}"]


def test_only_changed_files_are_checked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for number in range(5):
        (tmp_path / f"module_{number}.py").write_bytes(f"x = {number}\n".encode())
    (tmp_path / "broken.py").write_bytes(NOT_PYTHON)
    checked: list[str] = []
    refusal = runner.cpython_refusal

    def counting(source: bytes, path: str) -> str | None:
        checked.append(Path(path).name)
        return refusal(source, path)

    monkeypatch.setattr(runner, "cpython_refusal", counting)
    assert amp_lint_bytes(tmp_path, "check", ".").returncode == 2
    assert sorted(checked) == ["broken.py", *(f"module_{n}.py" for n in range(5))]
    checked.clear()
    (tmp_path / "module_3.py").write_bytes(b"x = 33\n")
    second = amp_lint_bytes(tmp_path, "check", ".")
    # The file that failed is checked each run, as a file with AMP code is.
    assert sorted(checked) == ["broken.py", "module_3.py"]
    assert errors(second) == [f"amp-lint: error: broken.py:{cpython_error(NOT_PYTHON)}"]
    checked.clear()
    (tmp_path / "broken.py").write_bytes(b"def f():\n    pass\n")
    third = amp_lint_bytes(tmp_path, "check", ".")
    assert (third.returncode, errors(third), checked) == (0, [], ["broken.py"])


def test_the_console_script_checks_many_files_in_its_workers(tmp_path: Path) -> None:
    """Enough files for the process pool (runner.PARALLEL_THRESHOLD), as users run it."""
    for number in range(3 * runner.PARALLEL_THRESHOLD):
        (tmp_path / f"module_{number}.py").write_bytes(f"x = {number}\n".encode())
    (tmp_path / "module_7.py").write_bytes(b"x = (1,\n")
    result = subprocess.run(
        [str(AMP_LINT), "check", "--jobs", "2", "--no-cache", "."],
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
    )
    assert result.returncode == 2
    expected = cpython_error(b"x = (1,\n")
    assert errors(result) == [f"amp-lint: error: module_7.py:{expected}"]
