"""A claim about mixed precision and the experiments that check it (see claims.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from amp_lint.verify.claim_programs import Program


def _runnable(device: str) -> str:
    return ""


@dataclass(frozen=True)
class Experiment:
    name: str
    #: One sentence: what the program does.
    ran: str
    program: Program
    devices: tuple[str, ...] = ("cpu", "cuda")
    #: What the experiment needs beyond torch; it is reported as not run without it.
    needs: str = ""
    #: Why it cannot run on a device ("" when it can). May prepare what the program uses
    #: (the compiled extension), so that a build failure is reported, not classified.
    missing: Callable[[str], str] = _runnable


@dataclass(frozen=True)
class Claim:
    key: str
    #: The advice as it is commonly stated.
    claim: str
    #: A public page where the advice, or the report it grew from, can be read ("" if none).
    source: str
    experiments: tuple[Experiment, ...]
    #: What the runs showed, in a few sentences; written from the committed reports
    #: (docs/evidence/) and kept honest by tests/test_claims.py's assertions.
    verdict: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "claim": self.claim,
            "source": self.source,
            "verdict": self.verdict,
            "experiments": [
                {"name": e.name, "ran": e.ran, "needs": e.needs, "devices": list(e.devices)}
                for e in self.experiments
            ],
        }
