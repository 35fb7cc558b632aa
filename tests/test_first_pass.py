"""The first pass reads identifiers with one text scan and finds half words' nodes by their
position. Each case is a file the pass must keep (a rule may report in it) or may drop
(nothing in its code can be half or open a region), including the cases a text scan could
get wrong: words in strings, comments and f-strings, decorators above their `def`,
attributes split over lines, columns after non-ASCII text, and comparisons."""

from __future__ import annotations

import pytest

from amp_lint.parse.first_pass import own_code_may_have_findings
from amp_lint.settings.config import Config

KEEP = {
    "conversion": "y = x.half()\n",
    "dtype argument": "y = x.to(torch.float16)\n",
    "region": "with torch.autocast('cuda'):\n    pass\n",
    "f-string field": "print(f'{x.half()}')\n",
    "decorator": "@torch.autocast('cuda', dtype=torch.float16)\ndef f(x):\n    return x\n",
    "split attribute": "y = (x\n     .to(torch\n         .float16))\n",
    "after non-ASCII": "é = 1; y = x.to(torch.float16)  # ü\n",
    "comparison and use": "if x.dtype == torch.float16:\n    y = x.half()\n",
    "conditional expression": "y = x.half() if a == b else x\n",
    "scaler by use": "grad_scaler.step(optimizer)\n",
    "undecodable": b"y = x.half()  # \xff\n",
}
DROP = {
    "docstring": '"""Load with torch_dtype=torch.float16."""\nimport torch\n',
    "comment": "import torch  # use .half() on GPUs, torch.autocast too\n",
    "plain string": "DTYPES = {'fp16': 'float16', 'amp': 'autocast'}\n",
    "f-string text": "raise ValueError(f'cannot use half precision with {name}')\n",
    "comparison": "if x.dtype == torch.float16:\n    pass\n",
    "membership": "assert x.dtype in (torch.float16, torch.bfloat16)\n",
    "keyword name": "build(half=True)\n",
}


@pytest.mark.parametrize("name", list(KEEP))
def test_kept(name: str) -> None:
    source = KEEP[name]
    data = source if isinstance(source, bytes) else source.encode()
    assert own_code_may_have_findings(data, Config())


@pytest.mark.parametrize("name", list(DROP))
def test_dropped(name: str) -> None:
    assert not own_code_may_have_findings(DROP[name].encode(), Config())
