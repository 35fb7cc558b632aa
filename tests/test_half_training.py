"""AMP305 and AMP308 together: one model with half parameters being trained is one bug, reported
by exactly one of them, and each message gives the fix its setup expects. Run through the
real `amp-lint check`."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from runners import amp_lint

# (setup code after `model = ...`, the code expected to report it, or None for no report)
SETUPS = {
    "float16-sgd-scaler": (
        "model = net.half()\n"
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        'scaler = torch.amp.GradScaler("cuda")\n'
        "scaler.scale(model(x).sum()).backward()\n"
        "scaler.step(optimizer)\n"
        "scaler.update()\n",
        "AMP305",
    ),
    "float16-adam-default-eps": (
        "model = net.half()\n"
        "optimizer = torch.optim.Adam(model.parameters())\n"
        "model(x).sum().backward()\n"
        "optimizer.step()\n",
        "AMP305",
    ),
    "float16-sgd-alone": (
        "model = net.half()\n"
        "optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)\n"
        "model(x).sum().backward()\n"
        "optimizer.step()\n",
        "AMP308",
    ),
    "float16-adam-safe-eps": (
        "model = net.half()\n"
        "optimizer = torch.optim.Adam(model.parameters(), eps=1e-4)\n"
        "model(x).sum().backward()\n"
        "optimizer.step()\n",
        "AMP308",
    ),
    "bfloat16-adamw": (
        "model = net.to(torch.bfloat16)\n"
        "optimizer = torch.optim.AdamW(model.parameters())\n"
        "model(x).sum().backward()\n"
        "optimizer.step()\n",
        "AMP308",
    ),
    "bfloat16-inference": (
        "model = net.to(torch.bfloat16).eval()\nwith torch.no_grad():\n    model(x)\n",
        None,
    ),
    "bfloat16-peft": (
        "model = get_peft_model(net.to(torch.bfloat16), config)\n"
        "optimizer = torch.optim.AdamW(model.parameters())\n"
        "model(x).sum().backward()\n"
        "optimizer.step()\n",
        None,
    ),
    "float16-upcast-trainable": (
        "model = net.half()\n"
        "for p in model.parameters():\n"
        "    if p.requires_grad:\n"
        "        p.data = p.data.float()\n"
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        'scaler = torch.amp.GradScaler("cuda")\n'
        "scaler.scale(model(x).sum()).backward()\n"
        "scaler.step(optimizer)\n",
        None,
    ),
}


def findings(tmp_path: Path, body: str) -> list[dict[str, object]]:
    source = "import torch\nfrom peft import get_peft_model\n\n\ndef train(net, x, config):\n"
    (tmp_path / "train.py").write_text(source + textwrap.indent(body, "    "))
    result = amp_lint(
        tmp_path, "check", "--no-cache", "--select", "AMP305,AMP308", "--output-format", "json", "."
    )
    assert result.returncode in (0, 1), result.stderr
    found: list[dict[str, object]] = json.loads(result.stdout)
    return found


@pytest.mark.parametrize("name", sorted(SETUPS))
def test_one_bug_gets_one_finding_from_the_right_rule(tmp_path: Path, name: str) -> None:
    body, expected = SETUPS[name]
    codes = [f["code"] for f in findings(tmp_path, body)]
    assert codes == ([expected] if expected else []), codes


def test_trainer_message_gives_the_transformers_fixes(tmp_path: Path) -> None:
    body = (
        "from transformers import AutoModel, Trainer, TrainingArguments\n"
        'model = AutoModel.from_pretrained("m", torch_dtype=torch.float16)\n'
        'Trainer(model=model, args=TrainingArguments(output_dir="o", fp16=True)).train()\n'
    )
    (found,) = findings(tmp_path, body)
    message = str(found["message"])
    assert "loads the parameters of `model` float16" in message
    assert "ValueError: Attempting to unscale FP16 gradients." in message
    assert "load the model in float32" in message and "`bf16=True` with float32" in message
    assert "PEFT 0.11" in message


def test_bfloat16_message_says_updates_are_lost(tmp_path: Path) -> None:
    (found,) = findings(tmp_path, SETUPS["bfloat16-adamw"][0])
    message = str(found["message"])
    assert "silently lost" in message and "torch.autocast(..., dtype=torch.bfloat16)" in message
    assert "master weights" in message
