"""``amp-lint verify`` (also ``python -m amp_lint.verify``): run the runtime suite on this
machine's torch and devices, print a table, write a JSON report.

Exit status: 0 when every bad example did what its rule says and every fixed example ran
clean, 1 when an expectation failed, 2 on usage errors, a missing torch or a broken case.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from amp_lint.verify.cases import CASES_DIR, DEVICES, DTYPES, CaseError, load_cases

EXIT_OK = 0
EXIT_UNEXPECTED = 1
EXIT_ERROR = 2
DEFAULT_REPORT = "amp-lint-verify.json"

_COLUMNS = (("rule", 7), ("case", 24), ("device", 6), ("dtype", 9), ("bad example", 52))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--device",
        choices=(*DEVICES, "all"),
        default="all",
        help="where to run (default: every device present; cuda needs a GPU)",
    )
    parser.add_argument("--dtype", choices=(*DTYPES, "all"), default="all")
    parser.add_argument(
        "--select", type=_codes, default=[], metavar="CODES", help="only these rules (AMP001,...)"
    )
    parser.add_argument(
        "--report",
        default=DEFAULT_REPORT,
        metavar="PATH",
        help=f"where to write the JSON report (default: ./{DEFAULT_REPORT}); a directory gets "
        "a file named by device, GPU and torch version",
    )
    parser.add_argument(
        "--claims",
        action="store_true",
        help="also run the common AMP claims of docs/claims.md (one builds a C++/CUDA "
        "extension when a compiler and ninja are present)",
    )
    parser.add_argument(
        "--cases",
        type=Path,
        default=CASES_DIR,
        metavar="DIR",
        help="run the cases in DIR instead of the bundled ones (for rule authors)",
    )


def run(args: argparse.Namespace) -> int:
    try:
        with warnings.catch_warnings():
            # torch warns on import when numpy is missing; verify needs no numpy.
            warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
            import torch
    except ImportError:
        print(
            "amp-lint verify: needs PyTorch, which is not installed here "
            "(install torch for your platform, or the `verify` extra from the clone: "
            "pip install './amp-lint[verify]')",
            file=sys.stderr,
        )
        return EXIT_ERROR
    from amp_lint.verify.suite import (
        available_devices,
        environment,
        report,
        report_name,
        run_suite,
        write_report,
    )

    try:
        cases = load_cases(args.cases)
    except CaseError as error:
        print(f"amp-lint verify: {error}", file=sys.stderr)
        return EXIT_ERROR
    if args.select:
        cases = [case for case in cases if case.rule in args.select]
    devices = available_devices(torch) if args.device == "all" else [args.device]
    if "cuda" in devices and not torch.cuda.is_available():
        print("amp-lint verify: --device cuda, but torch sees no CUDA device", file=sys.stderr)
        return EXIT_ERROR
    dtypes = list(DTYPES) if args.dtype == "all" else [args.dtype]
    _print_header()
    rows = run_suite(cases, devices, dtypes, progress=_print_row)
    failed = [row for row in rows if not row.ok]
    extra = {"claims": _run_claims(devices, dtypes)} if args.claims else None
    env = environment(torch, devices[-1])
    env["devices"] = ",".join(devices)
    path = Path(args.report)
    if args.report.endswith(("/", os.sep)) or path.is_dir():
        path = path / report_name(env)
    write_report(path, report(rows, env, extra))
    print(
        f"\n{len(rows) - len(failed)} of {len(rows)} rows as expected on torch "
        f"{torch.__version__} ({_where(env)}); report written to {path}"
    )
    for row in failed:
        print(
            f"UNEXPECTED {row.case.rule} {row.case.name} {row.device}/{row.dtype}: "
            f"expected bad example {row.expected}, got {row.bad.describe()}; "
            f"fixed example {row.fixed.describe()}",
            file=sys.stderr,
        )
    return EXIT_UNEXPECTED if failed else EXIT_OK


def _run_claims(devices: list[str], dtypes: list[str]) -> dict[str, Any]:
    from amp_lint.verify.claims import CLAIMS, run_claims

    print("\nclaims (docs/claims.md):")
    rows = run_claims(devices, dtypes)
    for row in rows:
        outcome = row["outcome"]
        text = outcome["kind"] + (f": {outcome['detail']}" if outcome["detail"] else "")
        where = f"{row['device']}/{row['dtype']}"
        print(f"  {row['claim']:<26} {row['experiment']:<36} {where:<14} {text[:70]}")
    return {"definitions": [claim.as_json() for claim in CLAIMS], "rows": rows}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m amp_lint.verify",
        description="Run amp-lint's bad and fixed examples under torch.autocast on this machine.",
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


def _codes(text: str) -> list[str]:
    return [code.strip().upper() for code in text.split(",") if code.strip()]


def _where(env: dict[str, str]) -> str:
    return env.get("gpu", env["processor"]) if env["device"] == "cuda" else env["processor"]


def _print_header() -> None:
    cells = [name.ljust(width) for name, width in _COLUMNS]
    print(" ".join([*cells, "fixed example", "as expected"]))


def _print_row(row: Any) -> None:
    bad = row.bad.describe()
    if len(bad) > 52:
        bad = bad[:51] + "…"
    cells = [row.case.rule, row.case.name, row.device, row.dtype, bad]
    text = " ".join(cell.ljust(width) for cell, (_, width) in zip(cells, _COLUMNS))
    print(f"{text} {row.fixed.kind.ljust(13)} {'yes' if row.ok else 'NO'}", flush=True)
