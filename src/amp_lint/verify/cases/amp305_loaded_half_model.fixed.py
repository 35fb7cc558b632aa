"""AMP305: a model loaded in float16 (`from_pretrained(..., torch_dtype=torch.float16)`) and
trained with a GradScaler, the most reported form of "Attempting to unscale FP16 gradients."

`TinyLM.from_pretrained` stands in for a transformers or diffusers loader (neither is
installed where the cases run): it builds the model and converts it to `torch_dtype`, which
leaves float16 parameters exactly as loading float16 weights does. The Hugging Face `Trainer`
with `fp16=True`, accelerate with `mixed_precision="fp16"` and Lightning with
`precision="16-mixed"` all step through a GradScaler, so the first `scaler.step` raises for
them as it does here. The bfloat16 rows load the model in bfloat16 instead, which GradScaler's
CPU kernel accepts (its CUDA kernel does not: that case is AMP306's). The fixed copy is the
documented fix, written by hand: load in float32 and let autocast produce float16
activations.
"""

from __future__ import annotations

import torch

RULE = "AMP305"
TITLE = "GradScaler on a model loaded in float16"
HAND_FIXED = True
TOLERANCE = 0.2  # one SGD step on bfloat16 parameters rounds the weights to 8 bits
EXPECTED = {
    "cpu/float16": "raised: ValueError: Attempting to unscale FP16 gradients.",
    "cpu/bfloat16": "clean",
    "cuda/float16": "raised: ValueError: Attempting to unscale FP16 gradients.",
    "cuda/bfloat16": "raised: NotImplementedError",
}


class TinyLM(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Linear(8, 16)
        self.head = torch.nn.Linear(16, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.embed(x)))

    @classmethod
    def from_pretrained(cls, name: str, torch_dtype: torch.dtype = torch.float32) -> TinyLM:
        return cls().to(torch_dtype)


def train_half(x: torch.Tensor) -> torch.Tensor:
    model = TinyLM.from_pretrained("tiny-lm").to(x.device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(x.device.type)
    with torch.autocast(x.device.type, dtype=torch.float16):
        loss = model(x).float().pow(2).mean()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    return model.head.weight.detach().float()


def train(x: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    model = TinyLM.from_pretrained("tiny-lm", torch_dtype=dtype or torch.float32).to(x.device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(x.device.type, enabled=dtype is not None)
    loss = model(x.to(dtype or torch.float32)).float().pow(2).mean()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    return model.head.weight.detach().float()


def run(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    x = torch.randn(16, 8).to(device)
    if dtype is torch.float16:
        return {"weight": train_half(x)}
    return {"weight": train(x, dtype)}
