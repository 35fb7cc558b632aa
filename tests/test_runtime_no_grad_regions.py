"""Runtime evidence for AMP304's exception: a float16 autocast region under
`torch.no_grad()` (a frozen encoder whose features train a float32 probe) records no float16
backward, so the probe's small gradients survive without a GradScaler, while the same loss
backpropagated through a recording float16 region loses them.

Needs torch and pytest only (no libcst), like tests/test_runtime.py; CUDA rows skip where
torch sees no GPU.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="the runtime evidence needs torch")

DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
    ),
]


def probe_gradient(device: str, *, encoder_records: bool) -> torch.Tensor:
    """The encoder's weight gradient when it records under float16 autocast, else the
    probe's: both from a loss whose gradient is 1e-8 per output (below float16's 6e-8)."""
    torch.manual_seed(0)
    encoder = torch.nn.Linear(16, 16).to(device)
    probe = torch.nn.Linear(16, 16).to(device)
    x = torch.randn(64, 16, device=device)
    with torch.set_grad_enabled(encoder_records), torch.autocast(device, dtype=torch.float16):
        feats = encoder(x)
    loss = probe(feats.float()).sum() * 1e-8
    loss.backward()
    layer = encoder if encoder_records else probe
    assert layer.weight.grad is not None
    return layer.weight.grad


@pytest.mark.parametrize("device", DEVICES)
def test_frozen_float16_encoder_keeps_the_probe_gradients(device: str) -> None:
    gradient = probe_gradient(device, encoder_records=False)
    assert gradient.dtype == torch.float32
    assert bool((gradient != 0).all())


@pytest.mark.parametrize("device", DEVICES)
def test_recording_float16_region_flushes_the_same_gradients(device: str) -> None:
    gradient = probe_gradient(device, encoder_records=True)
    assert bool((gradient == 0).all())
