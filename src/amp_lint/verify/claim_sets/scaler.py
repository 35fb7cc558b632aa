"""Claims about GradScaler across functions and objects: what `scaler.step` does to the
gradients and the update, and what a scaler does without autocast (AMP302, AMP310, AMP311).

Every program trains a small linear layer with SGD on the CPU's or the GPU's GradScaler. The
float32 reference (dtype None) is the intended float32 training: the scaler disabled, any
clip made before the step. A low dtype turns the scaler on; where a float16 backward would
overflow, the overflow is simulated by writing inf into one gradient (a CPU float16 backward
of a small layer does not overflow on its own), and only then, so the reference stays finite.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from amp_lint.verify.claim_types import Claim, Experiment

if TYPE_CHECKING:
    import torch

_AMP_DOCS = "https://docs.pytorch.org/docs/stable/notes/amp_examples.html"


def _setup(device: str) -> tuple[Any, Any, Any, Any]:
    import torch

    generator = torch.Generator().manual_seed(0)
    layer = torch.nn.Linear(8, 4)
    with torch.no_grad():
        layer.weight.copy_(torch.randn(4, 8, generator=generator) * 0.1)
        layer.bias.zero_()
    layer = layer.to(device)
    x = torch.randn(32, 8, generator=generator).to(device)
    y = torch.randn(32, 4, generator=generator).to(device)
    return layer, torch.optim.SGD(layer.parameters(), lr=0.1), x, y


def _scaled_backward(layer: Any, x: Any, y: Any, device: str, dtype: Any) -> Any:
    import torch

    scaler = torch.amp.GradScaler(device, enabled=dtype is not None)
    with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
        loss = torch.nn.functional.mse_loss(layer(x).float(), y)
    scaled: Any = scaler.scale(loss)  # Tensor.backward is untyped
    scaled.backward()
    return scaler


def step_again(
    device: str, dtype: torch.dtype | None, overflow: bool = False
) -> dict[str, torch.Tensor]:
    """`scaler.step(optimizer)` then `optimizer.step()` (the reference steps once)."""
    layer, optimizer, x, y = _setup(device)
    start = layer.weight.detach().clone()
    scaler = _scaled_backward(layer, x, y, device, dtype)
    if dtype is None:
        optimizer.step()
        return {"weight_update": layer.weight.detach() - start}
    if overflow:
        layer.weight.grad[0, 0] = float("inf")
    scaler.step(optimizer)
    scaler.update()
    optimizer.step()
    return {"weight_update": layer.weight.detach() - start}


def step_again_after_overflow(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    return step_again(device, dtype, overflow=True)


def clip_after_step(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    """Clip to norm 0.05 after `scaler.step` (the reference clips before the step)."""
    import torch

    layer, optimizer, x, y = _setup(device)
    start = layer.weight.detach().clone()
    scaler = _scaled_backward(layer, x, y, device, dtype)
    if dtype is None:
        torch.nn.utils.clip_grad_norm_(layer.parameters(), 0.05)
        optimizer.step()
        return {"weight_update": layer.weight.detach() - start}
    scaler.step(optimizer)
    scaler.update()
    torch.nn.utils.clip_grad_norm_(layer.parameters(), 0.05)
    return {"weight_update": layer.weight.detach() - start}


def scaler_alone(device: str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    """Five steps with a GradScaler enabled for `dtype` and no autocast region."""
    import torch

    layer, optimizer, x, y = _setup(device)
    scaler = torch.amp.GradScaler(device, enabled=dtype is not None)
    for _ in range(5):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(layer(x), y)
        scaled: Any = scaler.scale(loss)  # Tensor.backward is untyped
        scaled.backward()
        scaler.step(optimizer)
        scaler.update()
    return {"weight": layer.weight.detach()}


CLAIMS: tuple[Claim, ...] = (
    Claim(
        "scaler-step-skips-overflow",
        "`scaler.step(optimizer)` skips the update when the gradients contain inf or NaN, so "
        "an overflowing float16 step cannot damage the weights",
        _AMP_DOCS,
        (
            Experiment(
                "optimizer-step-after-scaler-step",
                "scaler.step(optimizer), scaler.update(), then optimizer.step() on the same "
                "gradients; the reference steps once without a scaler",
                step_again,
            ),
            Experiment(
                "optimizer-step-after-skipped-scaler-step",
                "the same with one gradient entry set to inf before scaler.step (a float16 "
                "overflow); the reference steps once on finite gradients",
                step_again_after_overflow,
            ),
        ),
        verdict=(
            "True of `scaler.step` alone, and undone by an `optimizer.step()` left after it "
            "(AMP302): on finite gradients the weights moved twice as far as the float32 "
            "step (a relative error of 1.0), and after an overflow, which `scaler.step` "
            "skipped, the extra step wrote -inf into the weight, in both dtypes."
        ),
    ),
    Claim(
        "clip-after-scaler-step",
        "Clipping after `scaler.step(optimizer)` keeps the clip away from the scaled gradients",
        "",
        (
            Experiment(
                "clip-after-scaler-step",
                "clip_grad_norm_(params, 0.05), below the gradients' norm, after "
                "scaler.step(optimizer); the reference clips before an unscaled step",
                clip_after_step,
            ),
        ),
        verdict=(
            "It does, and so it clips nothing that matters: the step has already used the "
            "unclipped gradients, and the update was about 14 times the clipped one (a "
            "relative error of 13.1) in both dtypes (AMP311). Clip between "
            "`scaler.unscale_(optimizer)` and `scaler.step`."
        ),
    ),
    Claim(
        "grad-scaler-alone",
        "Creating a `GradScaler` and scaling the loss turns on mixed-precision training",
        _AMP_DOCS,
        (
            Experiment(
                "grad-scaler-without-autocast",
                "five SGD steps with a GradScaler enabled and the forward and loss outside "
                "any autocast region; the reference trains with the scaler disabled",
                scaler_alone,
            ),
        ),
        verdict=(
            "False: without autocast the weights after training were identical to float32 "
            "training (a relative error of exactly 0) in both dtypes: nothing ran in half "
            "precision, and the scaler only multiplied and divided by a power of two "
            "(AMP310)."
        ),
    ),
)
