"""Claims about half or bfloat16 parameters, loaders and optimizers."""

from __future__ import annotations

from amp_lint.verify.claim_types import Claim

CLAIMS: tuple[Claim, ...] = ()
