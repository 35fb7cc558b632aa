"""`amp-lint check --output-format FORMAT` (and `--output-file`), through the real command, on a
small project whose findings have a safe fix, an unsafe fix, no fix, and a chain of calls
across files: concise and full for people; json, json-lines, sarif, github, gitlab and junit
for tools."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from runners import amp_lint

SARIF_SCHEMA = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"

PROJECT = {
    # AMP401: `torch.cuda.amp.autocast()`, a safe fix.
    "dep.py": "import torch\n\nwith torch.cuda.amp.autocast():\n    pass\n",
    # AMP102, reached from train.py's autocast region (via train.py:11): an unsafe fix.
    "losses.py": "import torch\n\n\ndef nll(p):\n    return -torch.log(p + 1e-10).mean()\n",
    # AMP101 (unsafe fix) and AMP301 (unsafe fix inserting a line).
    "train.py": """\
import torch
from losses import nll

model = torch.nn.Linear(4, 4).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cuda")

for x, y in [(torch.randn(2, 4).cuda(), None)]:
    with torch.autocast("cuda", dtype=torch.float16):
        out = model(x)
        loss = nll(out)
        scores = out.masked_fill(out > 0, -1e9)
    scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
""",
    # AMP304: float16 autocast and a backward without a GradScaler; no fix.
    "no_scaler.py": """\
import torch

model = torch.nn.Linear(4, 4).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x in [torch.randn(2, 4).cuda()]:
    with torch.autocast("cuda", dtype=torch.float16):
        loss = model(x).sum()
    loss.backward()
    opt.step()
""",
    "clean.py": "import torch\n\nwith torch.autocast('cuda'):\n    pass\n",
}

EXPECTED = {
    ("dep.py", 3, "AMP401"): "safe",
    ("losses.py", 5, "AMP102"): "unsafe",
    ("train.py", 12, "AMP101"): "unsafe",
    ("train.py", 14, "AMP301"): "unsafe",
    ("no_scaler.py", 8, "AMP304"): None,
}
LINE = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<code>AMP\d+) (?P<rest>.*)$")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    write_project(root)
    return root


def write_project(root: Path, prefix: str = "") -> None:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in PROJECT.items():
        (root / name).write_text(prefix + text)


def check(cwd: Path, *args: str) -> tuple[int, str, str]:
    result = amp_lint(cwd, "check", "--no-cache", *args)
    return result.returncode, result.stdout, result.stderr


def json_findings(cwd: Path, *args: str) -> list[dict[str, object]]:
    status, out, err = check(cwd, "--output-format", "json", *args)
    assert status == 1, err
    findings: list[dict[str, object]] = json.loads(out)
    return findings


def key(finding: dict[str, object]) -> tuple[object, object, object]:
    return (finding["path"], finding["line"], finding["code"])


# concise and full


def test_concise_marks_what_fix_fixes(project: Path) -> None:
    status, out, err = check(project, ".")
    assert status == 1, err
    lines = {}
    for text in out.splitlines():
        match = LINE.match(text)
        assert match, text
        lines[(match["path"], int(match["line"]), match["code"])] = match["rest"]
    assert set(lines) == set(EXPECTED)
    for place, safety in EXPECTED.items():
        assert lines[place].startswith("[*] ") == (safety == "safe"), place

    _, unsafe_out, _ = check(project, "--unsafe-fixes", ".")
    marked = {LINE.match(t)["code"] for t in unsafe_out.splitlines() if "[*]" in t}  # type: ignore[index]
    assert marked == {"AMP401", "AMP102", "AMP101", "AMP301"}


def test_text_and_format_are_aliases_of_concise(project: Path) -> None:
    concise = check(project, "--output-format", "concise", ".")
    assert check(project, "--output-format", "text", ".") == concise
    assert check(project, "--format", "text", ".") == concise
    assert check(project, ".") == concise


def test_full_shows_the_code_underlined_and_the_fix(project: Path) -> None:
    status, out, err = check(project, "--output-format", "full", "dep.py", "no_scaler.py")
    assert status == 1, err
    blocks = out.split("\n\n")
    assert blocks[-1] == ""  # each block ends with a blank line
    dep, no_scaler = blocks[0].splitlines(), blocks[1].splitlines()
    assert dep[0].startswith("dep.py:3:6: AMP401 [*] ")
    assert dep[1:] == [
        "  |",
        "1 | import torch",
        "2 |",
        "3 | with torch.cuda.amp.autocast():",
        "  |      " + "^" * len("torch.cuda.amp.autocast()") + " AMP401",
        "4 |     pass",
        "  |",
        dep[-1],
    ]
    assert re.match(r"^  = help: \S", dep[-1])
    assert no_scaler[0].startswith("no_scaler.py:8:")
    assert not any("help:" in line for line in no_scaler)  # no fix, no help
    assert "8 |     loss.backward()" in no_scaler


# json and json-lines


def test_json_has_urls_fixes_and_the_call_chain(project: Path) -> None:
    findings = {key(f): f for f in json_findings(project, ".")}
    assert set(findings) == set(EXPECTED)
    for place, safety in EXPECTED.items():
        finding = findings[place]
        fix = finding["fix"]
        if safety is None:
            assert fix is None
        else:
            assert isinstance(fix, dict)
            assert fix["applicability"] == safety
            assert fix["message"] and fix["edits"]
        url = finding["url"]
        assert isinstance(url, str) and url.startswith("https://")
        assert url.endswith(f"/docs/rules/{finding['code']}-{finding['name']}.md")
        page = Path(__file__).parents[1] / "docs" / "rules" / url.rsplit("/", 1)[1]
        assert page.is_file()
    assert findings[("losses.py", 5, "AMP102")]["via"] == [{"path": "train.py", "line": 11}]
    assert findings[("dep.py", 3, "AMP401")]["via"] == []


@pytest.mark.parametrize("place", [p for p, safety in EXPECTED.items() if safety is not None])
def test_json_edits_reproduce_what_fix_writes(
    project: Path, tmp_path: Path, place: tuple[str, int, str]
) -> None:
    path, _, code = place
    finding = next(f for f in json_findings(project, ".") if key(f) == place)
    fix = finding["fix"]
    assert isinstance(fix, dict)
    source = (project / path).read_text()
    expected = apply_edits(source, fix["edits"])
    assert expected != source

    fixed = tmp_path / "fixed"
    shutil.copytree(project, fixed)
    status, _, err = check(fixed, "--fix", "--unsafe-fixes", "--select", code, ".")
    assert status in (0, 1), err
    assert (fixed / path).read_text() == expected


def apply_edits(source: str, edits: object) -> str:
    """Apply ruff-style edits (1-based rows and columns, end exclusive) last first."""
    assert isinstance(edits, list)
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(location: dict[str, int]) -> int:
        return starts[location["row"] - 1] + location["column"] - 1

    ordered = sorted(edits, key=lambda e: offset(e["location"]), reverse=True)
    for edit in ordered:
        start, end = offset(edit["location"]), offset(edit["end_location"])
        assert start <= end
        source = source[:start] + edit["content"] + source[end:]
    return source


def test_json_lines_is_one_json_object_per_line(project: Path) -> None:
    status, out, _ = check(project, "--output-format", "json-lines", ".")
    assert status == 1
    objects = [json.loads(line) for line in out.splitlines()]
    assert objects == json_findings(project, ".")


def test_json_statistics_stay_json(project: Path) -> None:
    status, out, _ = check(project, "--output-format", "json", "--statistics", ".")
    assert status == 1
    assert {entry["code"] for entry in json.loads(out)} == {code for _, _, code in EXPECTED}


def test_cached_run_keeps_the_edits_of_json(project: Path, tmp_path: Path) -> None:
    """The result cache tells a run that made text edits from one that did not."""
    cache = str(tmp_path / "cache")
    runs = []
    for output_format in ("concise", "json", "json"):
        result = amp_lint(project, "check", "--cache-dir", cache, "--output-format", output_format)
        runs.append(result.stdout)
    assert json.loads(runs[1]) == json.loads(runs[2]) == json_findings(project, ".")


# sarif


def test_sarif_is_valid_and_carries_rules_fixes_and_chains(project: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    status, out, err = check(project, "--output-format", "sarif", ".")
    assert status == 1, err
    document = json.loads(out)
    schema = json.loads(SARIF_SCHEMA.read_text())
    jsonschema.Draft4Validator(schema).validate(document)

    run = document["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    by_json = {key(f): f for f in json_findings(project, ".")}
    assert {rule["id"] for rule in rules} == {code for _, _, code in EXPECTED}
    urls = {f["code"]: f["url"] for f in by_json.values()}
    for rule in rules:
        assert rule["helpUri"] == urls[rule["id"]]
        assert rule["shortDescription"]["text"]
    results = {
        (
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            r["locations"][0]["physicalLocation"]["region"]["startLine"],
            r["ruleId"],
        ): r
        for r in run["results"]
    }
    assert set(results) == set(EXPECTED)
    for place, result in results.items():
        finding = by_json[place]
        region = result["locations"][0]["physicalLocation"]["region"]
        assert (region["startColumn"], region["endLine"], region["endColumn"]) == (
            finding["column"],
            finding["end_line"],
            finding["end_column"],
        )
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        assert ("fixes" in result) == (EXPECTED[place] is not None)
    flow = results[("losses.py", 5, "AMP102")]["codeFlows"][0]["threadFlows"][0]["locations"]
    steps = [
        (
            step["location"]["physicalLocation"]["artifactLocation"]["uri"],
            step["location"]["physicalLocation"]["region"]["startLine"],
        )
        for step in flow
    ]
    assert steps == [("train.py", 11), ("losses.py", 5)]
    replacement = results[("dep.py", 3, "AMP401")]["fixes"][0]["artifactChanges"][0]
    edit = by_json[("dep.py", 3, "AMP401")]["fix"]["edits"][0]  # type: ignore[index]
    assert replacement["replacements"][0]["insertedContent"]["text"] == edit["content"]


# github


GITHUB_COMMAND = re.compile(
    r"^::(?P<level>error|warning|notice) (?P<properties>[^:]*)::(?P<data>.*)$"
)


def github_unescape(text: str) -> str:
    for escaped, plain in (("%3A", ":"), ("%2C", ","), ("%0D", "\r"), ("%0A", "\n"), ("%25", "%")):
        text = text.replace(escaped, plain)
    return text


def parse_github(out: str) -> list[tuple[dict[str, str], str]]:
    annotations = []
    for line in out.splitlines():
        match = GITHUB_COMMAND.match(line)
        assert match, line
        properties = dict(
            (name, github_unescape(value))
            for name, value in (item.split("=", 1) for item in match["properties"].split(","))
        )
        annotations.append((properties, github_unescape(match["data"])))
    return annotations


def test_github_annotations_parse_and_locate_findings(project: Path) -> None:
    status, out, _ = check(project, "--output-format", "github", ".")
    assert status == 1
    by_json = {key(f): f for f in json_findings(project, ".")}
    seen = set()
    for properties, data in parse_github(out):
        assert set(properties) == {"title", "file", "line", "col", "endLine", "endColumn"}
        place = (properties["file"], int(properties["line"]), data.split(" ", 1)[0])
        finding = by_json[place]
        assert properties["title"] == f"amp-lint ({finding['code']})"
        assert int(properties["col"]) == finding["column"]
        assert int(properties["endColumn"]) == finding["end_column"]
        assert data == f"{finding['code']} {finding['message']}"
        seen.add(place)
    assert seen == set(EXPECTED)


def test_github_escapes_commas_and_colons_in_properties(tmp_path: Path) -> None:
    (tmp_path / "a,b:c.py").write_text(PROJECT["dep.py"])
    status, out, _ = check(tmp_path, "--output-format", "github", ".")
    assert status == 1
    assert "file=a%2Cb%3Ac.py," in out
    [(properties, _)] = parse_github(out)
    assert properties["file"] == "a,b:c.py"


# gitlab


def test_gitlab_fingerprints_survive_shifted_lines(project: Path, tmp_path: Path) -> None:
    status, out, _ = check(project, "--output-format", "gitlab", ".")
    assert status == 1
    before = json.loads(out)
    shifted = tmp_path / "shifted"
    write_project(shifted, prefix="# a comment\n# another\n\n")
    (shifted / "train.py").write_text(
        PROJECT["train.py"].replace("scaler = torch", "# moved\n\nscaler = torch")
    )
    _, shifted_out, _ = check(shifted, "--output-format", "gitlab", ".")
    after = json.loads(shifted_out)

    for issue in before:
        assert set(issue) >= {"description", "check_name", "fingerprint", "severity", "location"}
        assert issue["location"]["lines"]["begin"] >= 1
    assert len({issue["fingerprint"] for issue in before}) == len(before) == len(EXPECTED)

    def places(issues: list[dict[str, object]]) -> dict[object, tuple[object, int]]:
        return {
            i["fingerprint"]: (i["check_name"], i["location"]["lines"]["begin"])  # type: ignore[index]
            for i in issues
        }

    old, new = places(before), places(after)
    assert set(old) == set(new)
    assert all(new[fp][1] > old[fp][1] for fp in old)  # every line moved, no fingerprint did


def test_gitlab_fingerprints_differ_for_identical_lines(tmp_path: Path) -> None:
    twice = PROJECT["dep.py"] + "\nwith torch.cuda.amp.autocast():\n    pass\n"
    (tmp_path / "dep.py").write_text(twice)
    _, out, _ = check(tmp_path, "--output-format", "gitlab", ".")
    issues = json.loads(out)
    assert len(issues) == 2
    assert issues[0]["fingerprint"] != issues[1]["fingerprint"]


# junit


def test_junit_is_one_suite_per_file_with_a_failure_per_finding(project: Path) -> None:
    status, out, _ = check(project, "--output-format", "junit", ".")
    assert status == 1
    root = ET.fromstring(out)
    assert root.tag == "testsuites"
    assert root.get("failures") == str(len(EXPECTED))
    cases = {}
    for suite in root.iter("testsuite"):
        assert suite.get("tests") == str(len(suite.findall("testcase")))
        for case in suite.iter("testcase"):
            failure = case.find("failure")
            assert failure is not None and failure.get("message")
            cases[(suite.get("name"), int(case.get("line", "0")), failure.get("type"))] = case
    assert set(cases) == set(EXPECTED)


def test_junit_of_a_clean_run_has_one_passing_case(project: Path) -> None:
    status, out, _ = check(project, "--output-format", "junit", "clean.py")
    assert status == 0
    root = ET.fromstring(out)
    cases = list(root.iter("testcase"))
    assert len(cases) == 1 and len(list(cases[0])) == 0
    assert root.get("failures") == "0"


def test_junit_reports_a_file_that_does_not_parse_as_an_error(project: Path) -> None:
    (project / "broken.py").write_text("import torch\nwith torch.autocast('cuda'):\n  x = (\n")
    status, out, err = check(project, "--output-format", "junit", "broken.py")
    assert status == 2, err
    errors = list(ET.fromstring(out).iter("error"))
    assert len(errors) == 1 and "broken.py" in (errors[0].get("message") or "")


# every format, the output file, the settings


@pytest.mark.parametrize(
    "output_format",
    ["concise", "full", "json", "json-lines", "sarif", "github", "gitlab", "junit"],
)
def test_output_file_gets_the_report_and_stdout_nothing(project: Path, output_format: str) -> None:
    _, expected, _ = check(project, "--output-format", output_format, ".")
    status, out, err = check(
        project, "--output-format", output_format, "--output-file", "reports/out/findings", "."
    )
    assert status == 1
    assert out == ""
    assert "Found 5 findings" in err
    assert (project / "reports" / "out" / "findings").read_text() == expected
    assert expected.strip()
    leftovers = [p.name for p in (project / "reports" / "out").iterdir()]
    assert leftovers == ["findings"]


def test_output_file_that_cannot_be_written_is_one_error(project: Path) -> None:
    (project / "taken").mkdir()
    status, out, err = check(project, "--output-file", "taken", ".")
    assert status == 2
    assert out == ""
    errors = [line for line in err.splitlines() if line.startswith("amp-lint: error:")]
    assert len(errors) == 1 and "taken: cannot write" in errors[0]
    assert "Traceback" not in err


def test_config_sets_format_and_file(project: Path) -> None:
    (project / "pyproject.toml").write_text(
        '[tool.amp-lint]\noutput-format = "json-lines"\noutput-file = "build/amp.jsonl"\n'
    )
    status, out, _ = check(project, ".")
    assert status == 1 and out == ""
    lines = (project / "build" / "amp.jsonl").read_text().splitlines()
    assert len(lines) == len(EXPECTED)
    assert all(json.loads(line)["url"] for line in lines)
    # The command line wins over the config, for the format and for the file.
    status, out, _ = check(project, "--output-format", "concise", "--output-file", "cli.txt", ".")
    assert status == 1 and out == ""
    assert LINE.match((project / "cli.txt").read_text().splitlines()[0])


def test_bad_config_format_is_an_error_naming_the_key(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.amp-lint]\noutput-format = "xml"\n')
    status, _, err = check(project, ".")
    assert status == 2
    assert "tool.amp-lint.output-format" in err and "Traceback" not in err


def test_environment_variable_chooses_the_format(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AMP_LINT_OUTPUT_FORMAT", "github")
    status, out, _ = check(project, ".")
    assert status == 1
    assert out.startswith("::error ")
    _, out, _ = check(project, "--output-format", "json", ".")  # the command line wins
    assert isinstance(json.loads(out), list)
    monkeypatch.setenv("AMP_LINT_OUTPUT_FORMAT", "xml")
    status, out, err = check(project, ".")
    assert status == 2 and out == ""
    assert err.startswith("amp-lint: error: AMP_LINT_OUTPUT_FORMAT: 'xml'")


def test_unknown_format_is_a_usage_error(project: Path) -> None:
    status, _, err = check(project, "--output-format", "xml", ".")
    assert status == 2
    assert "invalid choice" in err


# --output-file writes a regular file, and only that


def _device(tmp_path: Path) -> Path:
    """A character device like /dev/null (1, 3) made under tmp_path: a regression must not
    replace the machine's own."""
    path = tmp_path / "null"
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, AttributeError):
        pytest.skip("making a device node needs root")
    return path


def test_output_file_refuses_what_is_not_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(_DEPRECATED_SOURCE)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "folder").mkdir()
    for target, kind in (
        (_device(tmp_path), "a device"),
        (fifo, "a FIFO"),
        (tmp_path / "folder", "a directory"),
    ):
        before = os.lstat(target)
        result = amp_lint(tmp_path, "check", "--no-cache", "--output-file", str(target), "train.py")
        assert result.returncode == 2
        errors = [line for line in result.stderr.splitlines() if ": error: " in line]
        assert errors == [
            f"amp-lint: error: {target}: cannot write: not a regular file ({kind}); not replaced"
        ]
        after = os.lstat(target)
        assert (after.st_mode, after.st_ino, after.st_rdev) == (
            before.st_mode,
            before.st_ino,
            before.st_rdev,
        )


def test_output_file_writes_through_a_link_and_keeps_the_mode(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(_DEPRECATED_SOURCE)
    report = tmp_path / "report.txt"
    report.write_text("old\n")
    report.chmod(0o640)
    link = tmp_path / "link.txt"
    link.symlink_to(report.name)
    result = amp_lint(tmp_path, "check", "--no-cache", "--output-file", "link.txt", "train.py")
    assert result.returncode == 1, result.stderr
    assert link.is_symlink() and "AMP401" in report.read_text()
    assert stat.S_IMODE(report.stat().st_mode) == 0o640
    read_only = tmp_path / "read-only.txt"
    read_only.write_text("kept\n")
    read_only.chmod(0o444)
    refused = amp_lint(tmp_path, "check", "--no-cache", "--output-file", str(read_only), "train.py")
    assert refused.returncode == 2 and "the file is read-only" in refused.stderr
    assert read_only.read_text() == "kept\n" and stat.S_IMODE(read_only.stat().st_mode) == 0o444


_DEPRECATED_SOURCE = "import torch\n\nwith torch.cuda.amp.autocast():\n    pass\n"
