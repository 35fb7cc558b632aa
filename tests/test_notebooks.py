"""Jupyter notebooks through the real `amp-lint` command: linted as the module of their code
cells, reported at `cell N:line:column`, fixed cell by cell with every other byte kept."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

from runners import AMP_LINT, amp_lint

METADATA = {
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python", "version": "3.11.4"},
}


def code(source: str, count: int | None = None, outputs: list[Any] | None = None) -> Any:
    return {
        "cell_type": "code",
        "execution_count": count,
        "id": f"code-{count}",
        "metadata": {"tags": ["train"]},
        "outputs": outputs or [],
        "source": source.splitlines(keepends=True),
    }


def markdown(source: str) -> Any:
    return {"cell_type": "markdown", "id": "notes", "metadata": {}, "source": source}


def notebook(*cells: Any) -> dict[str, Any]:
    """A fresh document: the tests change their copies."""
    return copy.deepcopy(
        {"cells": list(cells), "metadata": METADATA, "nbformat": 4, "nbformat_minor": 5}
    )


def nbformat_bytes(document: dict[str, Any]) -> bytes:
    """As Jupyter writes a notebook (nbformat.writes): indent 1, no ASCII escapes, a final
    newline; the keys in the document's own order."""
    return (json.dumps(document, indent=1, ensure_ascii=False) + "\n").encode()


def write(directory: Path, name: str, document: dict[str, Any]) -> Path:
    path = directory / name
    path.write_bytes(nbformat_bytes(document))
    return path


def position(cells: list[Any], cell_index: int, needle: str) -> str:
    """`cell N:line:column` of the first `needle` in a cell, counted as Jupyter shows it."""
    lines = "".join(cells[cell_index]["source"]).splitlines()
    for number, text in enumerate(lines, start=1):
        if needle in text:
            return f"cell {cell_index + 1}:{number}:{text.index(needle) + 1}"
    raise AssertionError(f"{needle!r} not in cell {cell_index + 1}")


ATTENTION_CELLS = [
    markdown("# Attention under autocast\nDoes the mask overflow?"),
    code(
        "%matplotlib inline\n"
        "!pip install torch\n"
        "import torch\n"
        "\n"
        "def attend(scores, mask):\n"
        '    """Masked scores. What does -1e9 do in half?\n'
        "    %notamagic inside a docstring\n"
        '    """\n'
        "    return scores.masked_fill(mask, -1e9)",
        1,
        [{"name": "stdout", "output_type": "stream", "text": ["réussi ✓\n"]}],
    ),
    code(
        "%%time\n"
        "files = !ls\n"
        "torch.randn?\n"
        "x = torch.randn(8, 8, device='cuda')\n"
        "with torch.autocast('cuda', dtype=torch.float16):\n"
        "    y = attend(x @ x, x > 0)\n",
        2,
    ),
]


def test_hazard_defined_in_one_cell_is_found_under_the_autocast_region_of_another(
    tmp_path: Path,
) -> None:
    write(tmp_path, "attention.ipynb", notebook(*ATTENTION_CELLS))
    result = amp_lint(tmp_path, "check", "--no-cache", "attention.ipynb")
    where = position(ATTENTION_CELLS, 1, "scores.masked_fill")
    assert result.returncode == 1, result.stderr
    assert result.stdout.startswith(f"attention.ipynb:{where}: AMP101 "), result.stdout
    assert "error" not in result.stderr  # the magics and the `?` lines parse


def test_clip_before_unscale_across_cells(tmp_path: Path) -> None:
    cells = [
        code("import torch\nscaler = torch.amp.GradScaler('cuda')\n", 1),
        markdown("One step"),
        code(
            "optimizer.zero_grad()\n"
            "with torch.autocast('cuda', dtype=torch.float16):\n"
            "    loss = model(x).sum()\n"
            "scaler.scale(loss).backward()",
            2,
        ),
        code("torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\nscaler.step(optimizer)", 3),
    ]
    write(tmp_path, "train.ipynb", notebook(*cells))
    result = amp_lint(tmp_path, "check", "--no-cache", "train.ipynb")
    assert result.returncode == 1, result.stderr
    (line,) = result.stdout.splitlines()
    assert line.startswith(f"train.ipynb:{position(cells, 3, 'torch.nn')}: AMP301 ")
    # The backward call the message names is given in the notebook's terms too.
    detailed = amp_lint(tmp_path, "check", "--no-cache", "--output-format", "json", "train.ipynb")
    (finding,) = json.loads(detailed.stdout)
    assert "(cell 3, line 4)" in finding["message"]


HAZARD = (
    "import torch\n"
    "q = torch.randn(4, 4, device='cuda')\n"
    "with torch.autocast('cuda'):\n"
    "    s = (q @ q).masked_fill(q > 0, -1e9)\n"
)


def test_cells_in_other_languages_are_not_python(tmp_path: Path) -> None:
    shell = code("%%bash\nfor f in *.py; do echo $f; done\n", 1)
    other = code("SELECT * FROM t?", 2)
    other["metadata"] = {"vscode": {"languageId": "sql"}}
    hazard = code(HAZARD, 3)
    write(tmp_path, "mixed.ipynb", notebook(shell, other, hazard))
    result = amp_lint(tmp_path, "check", "--no-cache", "mixed.ipynb")
    assert result.returncode == 1, result.stderr
    assert result.stdout.startswith("mixed.ipynb:cell 3:4:9: AMP101"), result.stdout


DEPRECATED_CELLS = [
    code("%load_ext autoreload\nimport torch\nfrom torch.cuda.amp import autocast\n", 1),
    markdown("Forward pass"),
    code(
        "%time warmup()\nwith autocast():\n    out = model(x)\nout",
        2,
        [
            {
                "data": {"text/plain": ["tensor([1., 2.], dtype=torch.float16)"]},
                "execution_count": 2,
                "metadata": {},
                "output_type": "execute_result",
            }
        ],
    ),
    code("print(out.dtype)", 3, [{"name": "stdout", "output_type": "stream", "text": ["é\n"]}]),
]


def deprecated_notebook() -> dict[str, Any]:
    document = notebook(*DEPRECATED_CELLS)
    # Key order as some other editor wrote it: kept as it is.
    return {key: document[key] for key in ("nbformat", "metadata", "cells", "nbformat_minor")}


def test_fix_rewrites_only_the_sources_of_the_changed_cells(tmp_path: Path) -> None:
    path = write(tmp_path, "deprecated.ipynb", deprecated_notebook())
    before = path.read_bytes()
    result = amp_lint(tmp_path, "check", "--no-cache", "--fix", "deprecated.ipynb")
    assert result.returncode == 0, result.stdout + result.stderr
    after = path.read_bytes()
    fixed = json.loads(after)
    expected = deprecated_notebook()
    expected["cells"][0]["source"] = ["%load_ext autoreload\n", "import torch\n"]
    expected["cells"][2]["source"][1] = 'with torch.amp.autocast("cuda"):\n'
    assert fixed == expected  # outputs, counts, metadata and the magics untouched
    # Every byte outside the two sources is as it was: indent, key order, escapes, newline.
    assert after == nbformat_bytes(expected)
    assert after != before
    again = amp_lint(tmp_path, "check", "--no-cache", "--fix", "deprecated.ipynb")
    assert again.returncode == 0, again.stderr
    assert path.read_bytes() == after


def test_fix_keeps_a_notebook_written_with_ascii_escapes_and_crlf(tmp_path: Path) -> None:
    text = json.dumps(deprecated_notebook(), indent=2, ensure_ascii=True).replace("\n", "\r\n")
    path = tmp_path / "escaped.ipynb"
    path.write_bytes(text.encode())
    result = amp_lint(tmp_path, "check", "--no-cache", "--fix", "escaped.ipynb")
    assert result.returncode == 0, result.stdout + result.stderr
    expected = deprecated_notebook()
    expected["cells"][0]["source"] = ["%load_ext autoreload\n", "import torch\n"]
    expected["cells"][2]["source"][1] = 'with torch.amp.autocast("cuda"):\n'
    assert path.read_bytes() == json.dumps(expected, indent=2).replace("\n", "\r\n").encode()


def test_diff_shows_changed_cells_and_writes_nothing(tmp_path: Path) -> None:
    path = write(tmp_path, "deprecated.ipynb", deprecated_notebook())
    before = path.read_bytes()
    result = amp_lint(tmp_path, "check", "--no-cache", "--diff", "deprecated.ipynb")
    assert result.returncode == 1, result.stderr
    assert path.read_bytes() == before
    assert "--- deprecated.ipynb:cell 1\n+++ deprecated.ipynb:cell 1\n" in result.stdout
    assert '-with autocast():\n+with torch.amp.autocast("cuda"):\n' in result.stdout
    assert "cell 4" not in result.stdout  # unchanged cells are not shown


def test_json_output_carries_the_cell(tmp_path: Path) -> None:
    write(tmp_path, "attention.ipynb", notebook(*ATTENTION_CELLS))
    (tmp_path / "plain.py").write_text(HAZARD)
    result = amp_lint(
        tmp_path, "check", "--no-cache", "--output-format", "json", "attention.ipynb", "plain.py"
    )
    found = {(item["path"], item["cell"], item["line"]) for item in json.loads(result.stdout)}
    assert found == {("attention.ipynb", 2, 9), ("plain.py", None, 4)}


def test_broken_notebooks_are_one_line_each_and_the_rest_is_linted(tmp_path: Path) -> None:
    (tmp_path / "truncated.ipynb").write_text('{"cells": [')
    write(tmp_path, "old.ipynb", {"nbformat": 3, "worksheets": []})
    bad_source = notebook(code("x = 1"))
    bad_source["cells"][0]["source"] = 42
    write(tmp_path, "source.ipynb", bad_source)
    write(tmp_path, "attention.ipynb", notebook(*ATTENTION_CELLS))
    result = amp_lint(tmp_path, "check", "--no-cache", ".")
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert len(errors) == 3, result.stderr
    for name in ("truncated.ipynb", "old.ipynb", "source.ipynb"):
        assert sum(line.startswith(f"amp-lint: error: {name}: ") for line in errors) == 1
    assert "Traceback" not in result.stderr
    assert "attention.ipynb:cell 2:9:12: AMP101" in result.stdout


def test_directories_are_walked_for_notebooks_but_not_checkpoints(tmp_path: Path) -> None:
    (tmp_path / "notebooks" / ".ipynb_checkpoints").mkdir(parents=True)
    write(tmp_path / "notebooks", "attention.ipynb", notebook(*ATTENTION_CELLS))
    write(
        tmp_path / "notebooks" / ".ipynb_checkpoints",
        "attention-checkpoint.ipynb",
        notebook(*ATTENTION_CELLS),
    )
    result = amp_lint(tmp_path, "check", "--no-cache", ".")
    assert result.returncode == 1, result.stderr
    assert [line.split(":")[0] for line in result.stdout.splitlines()] == [
        str(Path("notebooks") / "attention.ipynb")
    ]


def test_a_notebook_uses_functions_of_project_modules(tmp_path: Path) -> None:
    (tmp_path / "layers.py").write_text(
        "def attend(scores, mask):\n    return scores.masked_fill(mask, -1e9)\n"
    )
    cells = [
        code("import torch\nfrom layers import attend\n", 1),
        code("q = torch.randn(4, 4, device='cuda')\n", 2),
        code(
            "with torch.autocast('cuda', dtype=torch.float16):\n    y = attend(q @ q, q > 0)\n", 3
        ),
    ]
    write(tmp_path, "run.ipynb", notebook(*cells))
    result = amp_lint(tmp_path, "check", "--no-cache", "run.ipynb", "layers.py")
    assert result.returncode == 1, result.stderr
    assert result.stdout.startswith("layers.py:2:12: AMP101"), result.stdout


def test_standard_input_with_a_notebook_name(tmp_path: Path) -> None:
    source = nbformat_bytes(deprecated_notebook())
    checked = subprocess.run(
        [str(AMP_LINT), "check", "--no-cache", "--stdin-filename", "nb.ipynb", "-"],
        cwd=tmp_path,
        input=source,
        capture_output=True,
        timeout=120,
    )
    assert checked.returncode == 1, checked.stderr
    # The import in cell 1 that the call comes through, then the call.
    first, second = checked.stdout.decode().splitlines()
    assert first.startswith("nb.ipynb:cell 1:3:1: AMP401")
    assert second.startswith("nb.ipynb:cell 3:2:6: AMP401")
    fixed = subprocess.run(
        [str(AMP_LINT), "check", "--fix", "--stdin-filename", "nb.ipynb", "-"],
        cwd=tmp_path,
        input=source,
        capture_output=True,
        timeout=120,
    )
    assert fixed.returncode == 0, fixed.stderr
    assert json.loads(fixed.stdout)["cells"][2]["source"][1] == 'with torch.amp.autocast("cuda"):\n'


def test_an_import_a_fix_adds_stays_in_a_cell_and_magics_come_back(tmp_path: Path) -> None:
    cells = [
        markdown("Setup"),
        code("%pip install numpy\nimport numpy as np", 1),
        code("def attend(scores, mask):\n    return scores.masked_fill(mask, -1e9)\n", 2),
        code(
            "from torch import autocast, randn\n"
            "q = randn(4, 4, device='cuda')\n"
            "with autocast('cuda'):\n"
            "    y = attend(q @ q, q > 0)",
            3,
        ),
    ]
    path = write(tmp_path, "imports.ipynb", notebook(*cells))
    result = amp_lint(tmp_path, "check", "--no-cache", "--fix", "--unsafe-fixes", "imports.ipynb")
    assert result.returncode == 0, result.stdout + result.stderr
    fixed = json.loads(path.read_bytes())
    sources = ["".join(cell["source"]) for cell in fixed["cells"]]
    assert len(sources) == len(cells)
    assert sources[0] == "Setup" and sources[3] == "".join(cells[3]["source"])
    assert sources[1].startswith("%pip install numpy\nimport numpy as np\n")
    assert "import torch" in sources[1].splitlines()
    assert "torch.finfo(scores.dtype).min" in sources[2]
    for source in sources[1:]:  # each cell is Python on its own once its magic is set aside
        compile(source.replace("%pip install numpy", ""), "cell", "exec")


def test_noqa_on_the_line_in_the_cell(tmp_path: Path) -> None:
    cells = [code(HAZARD.replace("-1e9)", "-1e9)  # noqa: AMP101"), 1)]
    write(tmp_path, "quiet.ipynb", notebook(*cells))
    result = amp_lint(tmp_path, "check", "--no-cache", "quiet.ipynb")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""


def test_json_fix_edits_name_their_cell(tmp_path: Path) -> None:
    """A fix may edit another cell than its finding's (the import it leaves unused): each
    edit names its cell, its rows count in that cell, and an edit removing a cell's last
    line ends at that cell's end, not in the next cell."""
    write(tmp_path, "deprecated.ipynb", deprecated_notebook())
    result = amp_lint(
        tmp_path, "check", "--no-cache", "--output-format", "json", "deprecated.ipynb"
    )
    imported, finding = json.loads(result.stdout)
    assert (imported["cell"], imported["line"]) == (1, 3)  # the import the call comes through
    assert (finding["cell"], finding["line"]) == (3, 2)
    removal, call = finding["fix"]["edits"]
    assert removal == {
        "content": "",
        "location": {"row": 3, "column": 1},
        "end_location": {"row": 4, "column": 1},
        "cell": 1,
    }
    assert call["cell"] == 3 and call["location"] == {"row": 2, "column": 6}


def test_fix_keeps_a_changed_line_in_its_cell_when_the_cell_before_loses_one(
    tmp_path: Path,
) -> None:
    """The import the fix removes ends cell 1 and the call it changes starts cell 3: in the
    module the two lines are adjacent and diff as one block, but each change stays in its
    own cell (the call beside its body, not moved up into the import's cell)."""
    document = notebook(
        code("import torch\nfrom torch.cuda.amp import autocast\n", 1),
        markdown("Forward pass"),
        code("with autocast():\n    y = 1\n", 2),
    )
    path = write(tmp_path, "adjacent.ipynb", document)
    result = amp_lint(tmp_path, "check", "--no-cache", "--fix", "adjacent.ipynb")
    assert result.returncode == 0, result.stdout + result.stderr
    cells = ["".join(cell["source"]) for cell in json.loads(path.read_bytes())["cells"]]
    assert cells == [
        "import torch\n",
        "Forward pass",
        'with torch.amp.autocast("cuda"):\n    y = 1\n',
    ]
