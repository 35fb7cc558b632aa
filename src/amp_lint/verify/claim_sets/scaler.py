"""Claims about GradScaler across functions and objects."""

from __future__ import annotations

from amp_lint.verify.claim_types import Claim

CLAIMS: tuple[Claim, ...] = ()
