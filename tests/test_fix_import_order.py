"""An import a fix adds (`import torch`) goes where isort would keep it: `ruff check --select I`
passes on the fixed file when it passed before, and a second `--fix` changes nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from runners import amp_lint

RUFF = Path(sys.executable).parent / "ruff"

# AMP401's fix turns `GradScaler()` from `torch.cuda.amp` into `torch.amp.GradScaler("cuda")`,
# which needs `import torch`; the `from` import goes if nothing else uses it.
USES = """
scaler = GradScaler()
"""

LAYOUTS = {
    "all_sections": (
        '"""A training script."""\n'
        "\n"
        "from __future__ import annotations\n"
        "\n"
        "import os\n"
        "import sys\n"
        "\n"
        "import numpy as np\n"
        "from torch import nn\n"
        "from torch.cuda.amp import GradScaler\n"
        "from torch.utils.data import DataLoader\n"
        "\n"
        "from mypkg import helpers\n"
        "\n"
        "from . import sibling\n"
        "\n"
        "print(os, sys, np, nn, DataLoader, helpers, sibling)\n" + USES,
        "import numpy as np\nimport torch\nfrom torch import nn\n",
    ),
    "sorted_after_other_plain_imports": (
        "import os\n"
        "\n"
        "import numpy as np\n"
        "import tqdm\n"
        "from torch.cuda.amp import GradScaler\n"
        "from torch.utils.data import DataLoader\n"
        "\n"
        "print(os, np, tqdm, DataLoader)\n" + USES,
        "import numpy as np\nimport torch\nimport tqdm\nfrom torch.utils.data import DataLoader\n",
    ),
    "only_import_removed": (
        "from torch.cuda.amp import GradScaler\n" + USES,
        "import torch\n\nscaler",
    ),
    "new_section_between_stdlib_and_first_party": (
        "import os\n"
        "\n"
        "from torch.cuda.amp import GradScaler\n"
        "\n"
        "from mypkg import helpers\n"
        "\n"
        "print(os, helpers)\n" + USES,
        "import os\n\nimport torch\n\nfrom mypkg import helpers\n",
    ),
    "new_section_before_first_party": (
        '"""Doc."""\n'
        "\n"
        "from torch.cuda.amp import GradScaler\n"
        "\n"
        "from mypkg import helpers\n"
        "\n"
        "print(helpers)\n" + USES,
        '"""Doc."""\n\nimport torch\n\nfrom mypkg import helpers\n',
    ),
    "type_checking_and_try_blocks": (
        "from typing import TYPE_CHECKING\n"
        "\n"
        "from torch.cuda.amp import GradScaler\n"
        "from torch.utils.data import DataLoader\n"
        "\n"
        "if TYPE_CHECKING:\n"
        "    import numpy\n"
        "try:\n"
        "    import apex\n"
        "except ImportError:\n"
        "    apex = None\n"
        "\n"
        "print(DataLoader, apex)\n" + USES,
        "from typing import TYPE_CHECKING\n\nimport torch\n"
        "from torch.utils.data import DataLoader\n",
    ),
    "comment_inside_section": (
        "import os\n"
        "\n"
        "import numpy as np\n"
        "\n"
        "# Progress bars.\n"
        "import tqdm\n"
        "from torch.cuda.amp import GradScaler\n"
        "\n"
        "print(os, np, tqdm)\n" + USES,
        "import numpy as np\nimport torch\n\n# Progress bars.\nimport tqdm\n",
    ),
    "comment_above_section": (
        "import os\n"
        "\n"
        "# Third-party, pinned in requirements.txt.\n"
        "from torch.cuda.amp import GradScaler\n"
        "from torch.utils.data import DataLoader\n"
        "\n"
        "print(os, DataLoader)\n" + USES,
        # The comment belonged to the removed line: the next line gets it, and isort's blank
        # line above a comment inside a section.
        "import os\n\nimport torch\n\n# Third-party, pinned in requirements.txt.\n"
        "from torch.utils.data import DataLoader\n",
    ),
}


def ruff_import_diff(project: Path, *config: str) -> str:
    done = subprocess.run(
        [str(RUFF), "check", "--isolated", "--select", "I", *config, "--diff", "train.py"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.stdout


def make_project(tmp_path: Path, source: str) -> Path:
    project = tmp_path / "project"
    (project / "mypkg").mkdir(parents=True)
    (project / "mypkg" / "__init__.py").write_text("helpers = 1\n")
    (project / "pyproject.toml").write_text("[tool.amp-lint]\n")
    (project / "train.py").write_text(source)
    return project


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_added_import_keeps_isort_order(tmp_path: Path, layout: str) -> None:
    source, expected = LAYOUTS[layout]
    project = make_project(tmp_path, source)
    assert ruff_import_diff(project) == "", "the layout must be isort-clean to start with"

    fixed = amp_lint(project, "check", "--fix", "--no-cache", "--select", "AMP401", "train.py")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    text = (project / "train.py").read_text()
    assert 'torch.amp.GradScaler("cuda")' in text
    assert expected in text
    assert text.count("import torch\n") == 1
    assert ruff_import_diff(project) == ""

    again = amp_lint(project, "check", "--fix", "--no-cache", "train.py")
    assert (project / "train.py").read_text() == text, again.stdout + again.stderr


def test_force_sort_within_sections_is_read_from_the_layout(tmp_path: Path) -> None:
    """`from x` and `import x` sorted together by module: `import torch` goes after
    `from numpy ...`, before `from torch ...`."""
    force_sort = ("--config", "lint.isort.force-sort-within-sections = true")
    source = (
        "from numpy import ndarray\n"
        "from torch.cuda.amp import GradScaler\n"
        "from torch.utils.data import DataLoader\n"
        "import zstandard\n"
        "\n"
        "print(ndarray, DataLoader, zstandard)\n" + USES
    )
    project = make_project(tmp_path, source)
    assert ruff_import_diff(project, *force_sort) == ""

    fixed = amp_lint(project, "check", "--fix", "--no-cache", "--select", "AMP401", "train.py")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    text = (project / "train.py").read_text()
    assert (
        "from numpy import ndarray\nimport torch\nfrom torch.utils.data import DataLoader\n" in text
    )
    assert ruff_import_diff(project, *force_sort) == ""
