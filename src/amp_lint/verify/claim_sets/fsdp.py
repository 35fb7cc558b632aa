"""Claims about FSDP mixed precision and gradient scaling."""

from __future__ import annotations

from amp_lint.verify.claim_types import Claim

CLAIMS: tuple[Claim, ...] = ()
