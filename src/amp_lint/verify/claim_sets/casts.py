"""Claims about float32 casts under autocast and contractions."""

from __future__ import annotations

from amp_lint.verify.claim_types import Claim

CLAIMS: tuple[Claim, ...] = ()
