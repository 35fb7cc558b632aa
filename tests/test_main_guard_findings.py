"""A hazard in `train()` of a script ending in `if __name__ == "__main__": train()` is reached
twice: analysing `train` itself, and through the module-level call. The finding is the
direct one: no `(via ...)` chain, and its fix (only a direct finding can be fixed)."""

from __future__ import annotations

import json
from pathlib import Path

from runners import amp_lint

SCALER_SCRIPT = """\
import torch


def train():
    model = torch.nn.Linear(4, 4).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda")
    for _ in range(10):
        with torch.autocast("cuda"):
            loss = model(torch.randn(2, 4).cuda()).sum()
        scaler.scale(loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()


def train_bypassing():
    model = torch.nn.Linear(4, 4).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda")
    for _ in range(10):
        with torch.autocast("cuda"):
            loss = model(torch.randn(2, 4).cuda()).sum()
        scaler.scale(loss).backward()
        optimizer.step()
        scaler.update()
        optimizer.zero_grad()


if __name__ == "__main__":
    train()
    train_bypassing()
"""

DTYPE_SCRIPT = """\
import torch


def train(q, k, pad, head, x, y, labels, backbone, images, proj):
    counts = torch.zeros(2, 2)
    with torch.autocast("cuda"):
        scores = q @ k.transpose(-2, -1)
        scores = scores.masked_fill(pad, -1e9)
        p = torch.sigmoid(head(x))
        loss = -(y * torch.log(p + 1e-10))
        feats = backbone(images) @ proj
        counts.index_add_(0, labels, feats)
    return scores, loss


if __name__ == "__main__":
    train(*[torch.randn(2, 2)] * 6, torch.zeros(2), None, None, None)
"""

# A helper reached only through a call keeps its chain: it is float16 only there.
CHAIN_ONLY = """\
import torch


def fill_padding(scores, pad_mask):
    scores[pad_mask] = -1e9
    return scores


def train_step(x, w, pad_mask):
    with torch.autocast("cuda"):
        scores = x @ w
        return fill_padding(scores, pad_mask)


if __name__ == "__main__":
    train_step(torch.randn(2, 2), torch.randn(2, 2), None)
"""


def findings(project: Path, name: str) -> dict[str, dict[str, object]]:
    result = amp_lint(project, "check", "--no-cache", "--format", "json", name)
    assert result.returncode == 1, result.stderr
    return {f"{f['code']}:{f['line']}": f for f in json.loads(result.stdout)}


def reached_directly(finding: dict[str, object]) -> bool:
    return "(via" not in str(finding["message"]) and not finding.get("via")


def test_scaler_hazards_in_a_guarded_script_are_direct_and_fixable(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(SCALER_SCRIPT)
    found = findings(tmp_path, "train.py")
    clip, bypass = found["AMP301:12"], found["AMP302:26"]
    for finding in (clip, bypass):
        assert reached_directly(finding), finding["message"]
        assert finding["fix"] is not None, finding["message"]
    # The message names the function's own optimizer, not a guess.
    assert "`scaler.unscale_(opt)`" in str(clip["message"])

    fixed = amp_lint(tmp_path, "check", "--no-cache", "--fix", "--unsafe-fixes", "train.py")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    text = (tmp_path / "train.py").read_text()
    assert "scaler.unscale_(opt)\n        torch.nn.utils.clip_grad_norm_" in text
    assert "        scaler.step(optimizer)\n        scaler.update()\n" in text
    assert "optimizer.step()" not in text


def test_dtype_hazards_reached_from_the_guard_keep_no_chain(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(DTYPE_SCRIPT)
    found = findings(tmp_path, "train.py")
    assert {"AMP101:8", "AMP102:10", "AMP103:12"} <= set(found), sorted(found)
    for key in ("AMP101:8", "AMP102:10", "AMP103:12"):
        assert reached_directly(found[key]), found[key]["message"]
        assert found[key]["fix"] is not None

    fixed = amp_lint(tmp_path, "check", "--no-cache", "--fix", "--unsafe-fixes", "train.py")
    text = (tmp_path / "train.py").read_text()
    assert "torch.finfo(scores.dtype).min" in text, fixed.stdout + fixed.stderr
    assert "feats.to(counts.dtype)" in text


def test_a_finding_only_a_chain_reaches_keeps_it(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(CHAIN_ONLY)
    finding = findings(tmp_path, "train.py")["AMP001:5"]
    assert "(via train.py:12)" in str(finding["message"])
