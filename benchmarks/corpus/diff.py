"""New and gone findings between two corpus runs (run.sh output folders), by package, path,
line and rule; writes the new ones (and the gone ones beside them) as JSON for score.py.

    python benchmarks/corpus/diff.py BEFORE_DIR AFTER_DIR new.json
"""

from __future__ import annotations

import collections
import json
import re
import sys
from pathlib import Path

_FINDING = re.compile(r"^(\S+?):(\d+):(\d+): (AMP\d{3}) (.*)$")
Key = tuple[str, str, int, str]


def load(folder: Path) -> dict[Key, str]:
    found: dict[Key, str] = {}
    for output in sorted(folder.glob("*.txt")):
        if output.name == "RUNINFO.txt":
            continue
        for line in output.read_text(encoding="utf-8", errors="replace").splitlines():
            match = _FINDING.match(line)
            if match:
                found[(output.stem, match[1], int(match[2]), match[4])] = match[5]
    return found


def rows(findings: dict[Key, str]) -> list[dict[str, object]]:
    return [
        {"pkg": k[0], "path": k[1], "line": k[2], "code": k[3], "message": v}
        for k, v in sorted(findings.items())
    ]


def main() -> int:
    before, after = load(Path(sys.argv[1])), load(Path(sys.argv[2]))
    new = {k: v for k, v in after.items() if k not in before}
    gone = {k: v for k, v in before.items() if k not in after}
    print(f"before {len(before)}, after {len(after)}, new {len(new)}, gone {len(gone)}")
    for name, group in (("before", before), ("after", after), ("new", new), ("gone", gone)):
        print(f"{name:>6}: {dict(sorted(collections.Counter(k[3] for k in group).items()))}")
    if len(sys.argv) > 3:
        target = Path(sys.argv[3])
        target.write_text(json.dumps(rows(new), indent=1), encoding="utf-8")
        gone_path = target.with_name(target.stem + "-gone.json")
        gone_path.write_text(json.dumps(rows(gone), indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
