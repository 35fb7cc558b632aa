"""The fuzz test's harness: batches of programs through the real `amp-lint` command, each
failure narrowed down to a file, shrunk and saved (see tests/test_fuzz.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from runners import AMP_LINT

# The suite's share: one batch of each kind (a long run is AMP_LINT_FUZZ_EXAMPLES=N).
DEFAULT_EXAMPLES = 300
EXAMPLES = int(os.environ.get("AMP_LINT_FUZZ_EXAMPLES", DEFAULT_EXAMPLES))
SEED_OVERRIDE = os.environ.get("AMP_LINT_FUZZ_SEED")
SEED = int(SEED_OVERRIDE) if SEED_OVERRIDE else 0
GENERATED = EXAMPLES // 3
MUTANTS = EXAMPLES - GENERATED
LONG_RUN = EXAMPLES > DEFAULT_EXAMPLES
BATCH_SIZE = 200
# The fix step (the slowest) runs on every batch.
FIX_EVERY = 1
# Seconds a run of amp-lint may take: a batch of small files takes a few seconds.
TIMEOUT_S = 240
# Seconds spent narrowing down and shrinking each distinct failure, and in all.
SHRINK_S = float(os.environ.get("AMP_LINT_FUZZ_SHRINK_S", 60 if LONG_RUN else 20))
SHRINK_TOTAL_S = 900 if LONG_RUN else 60

# Per-file errors a fuzzed file may legitimately get (engine.SourceError and its kin): code
# that does not parse or decode, or that is too deep or too large for the analysis.
ACCEPTED_ERROR = re.compile(
    r": cannot (parse|decode|read)\b|too deeply nested|nested too deeply|too (large|long|deep)"
    r"|not analysed"
)
# An error that means a fix broke the file (engine.fix_source).
FIX_ERROR = re.compile(r"fix produced")
PREFIX = "amp-lint: "
FILE_NAME = re.compile(r"\b[gm]\d{5}\.py\b")


# Programs


@dataclass
class Program:
    name: str  # file name in the batch folder: g00012.py (generated) or m00012.py (mutant)
    source: bytes
    origin: str  # how it was made


@dataclass
class Failure:
    kind: str  # internal-error, traceback, crash, timeout, bad-fix, unparsable-fix, ...
    detail: str  # the error line or what went wrong
    step: str  # which run: check, library, fix
    names: list[str] = field(default_factory=list)  # the files it names, if any

    def signature(self) -> str:
        """What makes two failures the same bug, roughly: the kind and the exception."""
        exception = re.search(r"internal error, please report it: (\w+)", self.detail)
        if exception:
            return f"{self.kind}:{self.step}:{exception.group(1)}"
        detail = self.detail.strip()
        if self.kind in ("crash", "timeout"):
            detail = detail.split(" from amp-lint")[0]  # "signal 11", "exit 3"
        elif self.kind == "traceback" and detail:
            detail = detail.splitlines()[-1]  # the exception
        detail = re.sub(r"[0-9]+", "N", FILE_NAME.sub("F", detail))[:80]
        return f"{self.kind}:{self.step}:{detail}"


# Running amp-lint


@dataclass
class Run:
    argv: list[str]
    returncode: int | None  # None: timed out
    stdout: str
    stderr: str


def run_amp_lint(args: Sequence[str], cwd: Path, timeout: float = TIMEOUT_S) -> Run:
    """The real command in its own process group, so that a timeout also stops its workers."""
    argv = [str(AMP_LINT), *args]
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="backslashreplace",
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        return Run(argv, None, stdout, stderr)
    return Run(argv, process.returncode, stdout, stderr)


def run_problems(run: Run, step: str) -> list[Failure]:
    """Everything wrong with one run: its exit status and stderr lines."""
    failures: list[Failure] = []
    command = " ".join(run.argv[1:])
    if run.returncode is None:
        return [Failure("timeout", f"no result after {TIMEOUT_S} s from amp-lint {command}", step)]
    if "Traceback (most recent call last)" in run.stderr:
        tail = "\n".join(run.stderr.strip().splitlines()[-12:])
        failures.append(Failure("traceback", tail, step, FILE_NAME.findall(run.stderr)))
    elif run.returncode < 0 or run.returncode > 2:
        kind = f"signal {-run.returncode}" if run.returncode < 0 else f"exit {run.returncode}"
        tail = "\n".join(run.stderr.strip().splitlines()[-5:])
        failures.append(Failure("crash", f"{kind} from amp-lint {command}\n{tail}", step))
    errors = 0
    for line in run.stderr.splitlines():
        if not line.strip() or "Traceback" in run.stderr:
            continue
        names = FILE_NAME.findall(line)
        if line.startswith(PREFIX + "warning: "):
            if "internal error" in line:
                failures.append(Failure("internal-error", line, step, names))
        elif line.startswith(PREFIX + "error: "):
            errors += 1
            if "internal error" in line:
                failures.append(Failure("internal-error", line, step, names))
            elif FIX_ERROR.search(line):
                failures.append(Failure("bad-fix", line, step, names))
            elif not ACCEPTED_ERROR.search(line):
                failures.append(Failure("unexpected-error", line, step, names))
        elif run.returncode is not None and run.returncode >= 0:
            failures.append(Failure("unexpected-stderr", line, step, names))
    if run.returncode == 2 and not errors and not failures:
        failures.append(Failure("bad-exit", f"exit 2 without an error line: {command}", step))
    if run.returncode in (0, 1) and errors:
        failures.append(Failure("bad-exit", f"{errors} error lines but exit 0/1: {command}", step))
    return failures


_COMPILE_SCRIPT = """
import json, sys
result = {}
for path in sys.stdin.read().splitlines():
    try:
        with open(path, "rb") as file:
            compile(file.read(), path, "exec", dont_inherit=True)
        result[path] = True
    except Exception:
        result[path] = False
print(json.dumps(result))
"""


def compiles(paths: Sequence[Path]) -> dict[Path, bool]:
    """Which files Python compiles; in a child process, since deep code can crash compile()."""
    if not paths:
        return {}
    done = subprocess.run(
        [sys.executable, "-c", _COMPILE_SCRIPT],
        input="\n".join(str(path) for path in paths),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    if done.returncode == 0:
        result = json.loads(done.stdout)
        return {path: bool(result[str(path)]) for path in paths}
    if len(paths) == 1:
        return {paths[0]: False}  # compile() itself crashed: the file does not count as valid
    return {path: ok for one in paths for path, ok in compiles([one]).items()}


def write_programs(folder: Path, programs: Sequence[Program]) -> None:
    folder.mkdir(parents=True)
    for program in programs:
        (folder / program.name).write_bytes(program.source)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.glob("*.py"))}


LIBRARY_CONFIG = """\
[tool.amp-lint]
assume-autocast = "float16"
assume-device = "cuda"
autocast-functions = ["_fuzz_0", "_Fuzz.step", "train_step"]
fp32-only-callables = ["torch.fft.rfft", "mypkg.losses.PerceptualLoss"]
"""

STEPS = ("check", "library", "fix")


def run_step(step: str, programs: Sequence[Program], work: Path, variant: int) -> list[Failure]:
    """Run one step over the programs in a fresh folder under `work`; what went wrong.

    check: default mode, every file with AMP vocabulary parsed (--no-first-pass).
    library: library mode (float16 or bfloat16), JSON output, cold and then warm from the cache.
    fix: --fix --unsafe-fixes twice on the files (default mode, or library mode through
    --config); fixed files must compile if the originals did, the second run must change nothing.
    """
    work.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=f"{step}-", dir=work))
    batch = folder / "batch"
    write_programs(batch, programs)
    try:
        if step == "check":
            run = run_amp_lint(["check", "-q", "--no-cache", "--no-first-pass", "batch"], folder)
            return run_problems(run, step)
        if step == "library":
            return _library_step(folder, variant)
        return _fix_step(folder, programs, variant)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _library_step(folder: Path, variant: int) -> list[Failure]:
    dtype = ("float16", "bfloat16")[variant % 2]
    args = ["check", "-q", "--format", "json", "--assume-autocast", dtype]
    args += ["--cache-dir", str(folder / "cache"), "batch"]
    cold = run_amp_lint(args, folder)
    failures = run_problems(cold, "library")
    if failures:
        return failures
    try:
        cold_findings = json.loads(cold.stdout)
    except ValueError as error:
        return [Failure("bad-json", f"{error}: {cold.stdout[:300]!r}", "library")]
    warm = run_amp_lint(args, folder)
    failures = run_problems(warm, "library")
    if not failures and json.loads(warm.stdout) != cold_findings:
        failures.append(
            Failure("warm-differs", "the warm run's findings differ from the cold run's", "library")
        )
    return failures


def _fix_step(folder: Path, programs: Sequence[Program], variant: int) -> list[Failure]:
    batch = folder / "batch"
    args = ["check", "-q", "--no-cache", "--fix", "--unsafe-fixes", "batch"]
    if variant % 2:
        (folder / "amp-lint.toml").write_text(LIBRARY_CONFIG)
        args[1:1] = ["--config", "amp-lint.toml"]
    originals = {program.name: program.source for program in programs}
    first = run_amp_lint(args, folder)
    failures = run_problems(first, "fix")
    if first.returncode is None or first.returncode < 0:
        return failures
    fixed = snapshot(batch)
    changed = [name for name, data in fixed.items() if data != originals[name]]
    if changed:
        before = folder / "before"
        before.mkdir()
        for name in changed:
            (before / name).write_bytes(originals[name])
        valid_before = compiles([before / name for name in changed])
        valid_after = compiles([batch / name for name in changed])
        for name in changed:
            if valid_before[before / name] and not valid_after[batch / name]:
                failures.append(
                    Failure(
                        "unparsable-fix",
                        f"{name}: compiles, but not after --fix --unsafe-fixes",
                        "fix",
                        [name],
                    )
                )
    second = run_amp_lint(args, folder)
    failures += [f for f in run_problems(second, "fix") if f.kind not in ("bad-fix",)]
    again = snapshot(batch)
    for name, data in again.items():
        if data != fixed[name]:
            failures.append(
                Failure(
                    "non-idempotent-fix",
                    f"{name}: a second --fix --unsafe-fixes changed it again",
                    "fix",
                    [name],
                )
            )
    return failures


# Narrowing down and reporting failures


def _reproduces(failure: Failure, programs: Sequence[Program], work: Path, variant: int) -> bool:
    found = run_step(failure.step, programs, work, variant)
    return any(f.signature() == failure.signature() for f in found)


def narrow(
    failure: Failure, batch: Sequence[Program], work: Path, variant: int, deadline: float
) -> list[Program]:
    """The fewest programs of the batch that still fail the same way (within the time)."""
    named = [p for p in batch if p.name in failure.names]
    reproduced = bool(named) and _reproduces(failure, named, work, variant)
    candidates = named if reproduced else list(batch)
    while len(candidates) > 1 and time.monotonic() < deadline:
        half = len(candidates) // 2
        for part in (candidates[:half], candidates[half:]):
            if _reproduces(failure, part, work, variant):
                candidates = part
                break
        else:
            break  # it takes files from both halves (or is flaky): keep them all
    return candidates


def shrink(failure: Failure, program: Program, work: Path, variant: int, deadline: float) -> bytes:
    """Delete lines while the program fails the same way (delta debugging, chunks halving)."""
    lines = program.source.splitlines(keepends=True)

    def fails(candidate: list[bytes]) -> bool:
        attempt = Program(program.name, b"".join(candidate), program.origin)
        return bool(candidate) and _reproduces(failure, [attempt], work, variant)

    chunk = max(1, len(lines) // 2)
    while time.monotonic() < deadline:
        start, progressed = 0, False
        while start < len(lines) and time.monotonic() < deadline:
            candidate = lines[:start] + lines[start + chunk :]
            if fails(candidate):
                lines, progressed = candidate, True
            else:
                start += chunk
        if chunk == 1 and not progressed:
            break
        if not progressed:
            chunk = max(1, chunk // 2)
    return b"".join(lines)


@dataclass
class Found:
    failure: Failure
    programs: list[Program]
    shrunk: bytes | None = None
    folder: Path | None = None


def failures_folder() -> Path:
    configured = os.environ.get("AMP_LINT_FUZZ_FAILURES")
    if configured:
        Path(configured).mkdir(parents=True, exist_ok=True)
        return Path(configured)
    return Path(tempfile.mkdtemp(prefix="amp-lint-fuzz-failures-"))


def save(found: list[Found], label: str) -> Path:
    root = failures_folder()
    for index, item in enumerate(found):
        folder = root / f"{label}-{index:03d}-{item.failure.kind}"
        folder.mkdir(parents=True, exist_ok=True)
        for program in item.programs:
            (folder / program.name).write_bytes(program.source)
        if item.shrunk is not None:
            (folder / "minimal.py").write_bytes(item.shrunk)
        origins = "\n".join(f"{p.name}: {p.origin}" for p in item.programs)
        (folder / "README.txt").write_text(
            f"step: {item.failure.step} (see tests/test_fuzz.py run_step)\n"
            f"kind: {item.failure.kind}\nsignature: {item.failure.signature()}\n\n"
            f"{item.failure.detail}\n\nfiles:\n{origins}\n",
            errors="backslashreplace",
        )
        item.folder = folder
    return root


def _show(data: bytes, limit: int = 1500) -> str:
    text = data.decode("utf-8", errors="backslashreplace")
    if len(text) > limit:
        text = text[:limit] + f"\n... ({len(text) - limit} more characters)"
    return text


def fuzz(programs: list[Program], work: Path, label: str) -> None:
    """Run every step over every batch; fail with a report of each distinct failure."""
    started = time.monotonic()
    shrink_until = started + SHRINK_TOTAL_S  # set when the first failure is found
    found: list[Found] = []
    seen: dict[str, int] = {}
    step_seconds: dict[str, float] = {}
    batches = [programs[i : i + BATCH_SIZE] for i in range(0, len(programs), BATCH_SIZE)]
    for number, batch in enumerate(batches):
        steps = STEPS if number % FIX_EVERY == 0 else STEPS[:-1]
        for step in steps:
            variant = number // FIX_EVERY if step == "fix" else number
            step_started = time.monotonic()
            failures = run_step(step, batch, work / f"b{number}", variant)
            step_seconds[step] = step_seconds.get(step, 0.0) + time.monotonic() - step_started
            for failure in failures:
                signature = failure.signature()
                seen[signature] = seen.get(signature, 0) + 1
                if seen[signature] > 3:
                    continue  # three examples of one bug are enough
                item = Found(failure, [p for p in batch if p.name in failure.names])
                found.append(item)
                if len(found) == 1:
                    shrink_until = time.monotonic() + SHRINK_TOTAL_S
                if seen[signature] == 1 and time.monotonic() < shrink_until:
                    deadline = min(time.monotonic() + SHRINK_S, shrink_until)
                    item.programs = narrow(failure, batch, work / "narrow", variant, deadline)
                    if len(item.programs) == 1:
                        item.shrunk = shrink(
                            failure, item.programs[0], work / "narrow", variant, deadline
                        )
                elif not item.programs:
                    item.programs = list(batch)
    elapsed = time.monotonic() - started
    spent = ", ".join(f"{step} {seconds:.1f} s" for step, seconds in step_seconds.items())
    print(f"{label}: {len(programs)} programs, {len(batches)} batches, {elapsed:.1f} s ({spent})")
    if not found:
        return
    root = save(found, label)
    report = [
        f"{sum(seen.values())} failures ({len(seen)} distinct) in {len(programs)} {label} "
        f"programs; inputs written to {root}"
    ]
    for signature, count in sorted(seen.items(), key=lambda item: -item[1]):
        report.append(f"  {count:5d}  {signature}")
    for item in found:
        report.append(f"\n--- {item.failure.kind} ({item.failure.step}): {item.folder}")
        report.append(item.failure.detail)
        for program in item.programs[:3]:
            report.append(f"{program.name}: {program.origin}")
        if item.shrunk is not None:
            report.append("shrunk to:\n" + _show(item.shrunk))
        elif len(item.programs) == 1:
            report.append(_show(item.programs[0].source))
    pytest.fail("\n".join(report), pytrace=False)


def indented(text: str, prefix: str) -> str:
    return "".join(
        prefix + line if line.strip() else line for line in text.splitlines(keepends=True)
    )
