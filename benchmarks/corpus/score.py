"""Join the new findings of a corpus run (diff.py's JSON) with the hand triage in triage.toml:
true / plausible / false per rule, and the findings still to triage.

    python benchmarks/corpus/score.py new-library.json library
"""

from __future__ import annotations

import collections
import json
import os
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

CORPUS = os.environ.get("CORPUS", "/work/corpus").rstrip("/") + "/"
TRIAGE = Path(__file__).with_name("triage.toml")


def main() -> int:
    new = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    mode = sys.argv[2]
    entries = [e for e in tomllib.loads(TRIAGE.read_text("utf-8"))["triage"] if e["mode"] == mode]
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    untriaged = []
    for row in new:
        path = row["path"].removeprefix(CORPUS)
        # The same statement may have moved by a line or two between runs.
        found = [
            e
            for e in entries
            if (e["pkg"], e["path"], e["code"]) == (row["pkg"], path, row["code"])
            and abs(e["line"] - row["line"]) <= 2
        ]
        if found:
            counts[row["code"]][found[0]["verdict"]] += 1
        else:
            untriaged.append(row)
    total: collections.Counter[str] = collections.Counter()
    print("| rule | true | plausible | false |\n|---|---|---|---|")
    for code in sorted(counts):
        total += counts[code]
        c = counts[code]
        print(f"| {code} | {c['true']} | {c['plausible']} | {c['false']} |")
    judged = sum(total.values())
    right = total["true"] + total["plausible"]
    print(f"| all | {total['true']} | {total['plausible']} | {total['false']} |")
    print(f"\ntrue or plausible: {right} / {judged} = {right / max(judged, 1):.2f}")
    print(f"not triaged yet: {len(untriaged)}")
    for row in untriaged:
        print(f"  {row['pkg']} {row['path']}:{row['line']} {row['code']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
