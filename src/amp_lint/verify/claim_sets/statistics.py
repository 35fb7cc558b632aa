"""Claims about statistics computed in half precision (variance, SSIM)."""

from __future__ import annotations

from amp_lint.verify.claim_types import Claim

CLAIMS: tuple[Claim, ...] = ()
