"""Seeded mutants of the rule fixtures (tests/fixtures/*/*.py)."""

from __future__ import annotations

import keyword
import random
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from fuzzing.harness import SEED, Program, indented

FIXTURES = Path(__file__).parent.parent / "fixtures"


def fixture_sources() -> list[tuple[str, str]]:
    return [
        (f"{path.parent.name.split('-')[0]}/{path.name}", path.read_text(encoding="utf-8"))
        for path in sorted(FIXTURES.glob("*/*.py"))
    ]


NUMBERS = [
    "0", "-0.0", "1e309", "-1e309", "1e-400", "5e-324", "65504.0", "65505", "-65520.0",
    "6e-8", "1e-45", "3.4028235e38", "1e38", "1e-8", "0.0001", "1e-4", "-1", "2j", "0b1",
    "123456789012345678901234567890123456789", "0x" + "f" * 40, "1_000_000", "10 ** 400",
    "float('inf')", "float('nan')", "torch.finfo(torch.float16).max", "-2 ** 31", "0o777",
]  # fmt: skip
NUMBER = re.compile(r"(?<![\w.])\d[\d_]*(?:\.\d*)?(?:[eE][-+]?\d+)?j?(?![\w.])")
NAME = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")
AMP_NAMES = [
    "torch", "autocast", "GradScaler", "scaler", "float16", "bfloat16", "half", "forward",
    "self", "nn", "Module", "loss", "optimizer", "x", "step", "update", "unscale_", "backward",
    "custom_fwd", "masked_fill", "__init__", "super", "print", "None", "True", "match", "case",
    "_", "type", "\u00e9t\u00e9", "\u0394x", "\u53d8\u91cf",
]  # fmt: skip
DTYPES = ["float16", "bfloat16", "float32", "float64", "half", "float", "bf16", "fp16", "int8"]
DECORATORS = [
    '@torch.autocast("cuda")', '@torch.autocast(device_type="cuda", dtype=torch.float16)',
    "@torch.no_grad()", "@torch.cuda.amp.custom_fwd(cast_inputs=torch.float16)",
    '@torch.amp.custom_bwd(device_type="cuda")', "@staticmethod", "@classmethod", "@property",
    "@functools.lru_cache(maxsize=None)", "@torch.jit.script", "@torch.compile",
    "@{name}", "@{name}.{name}({name})", "@(lambda f: f)", "@torch.amp.autocast('cpu')",
]  # fmt: skip
SIZES = [20, 100, 200, 400, 1000, 2000]


class Mutator:
    """Seeded edits of a fixture's text (then, sometimes, of its bytes)."""

    def __init__(self, rng: random.Random, others: Sequence[str]) -> None:
        self.rng = rng
        self.others = others

    def mutate(self, text: str) -> tuple[bytes, list[str]]:
        applied: list[str] = []
        for _ in range(self.rng.choice([1, 1, 2, 2, 3, 4])):
            edit = self.rng.choice(TEXT_EDITS)
            text = edit(self, text)
            applied.append(edit.__name__)
        data = text.encode("utf-8", errors="surrogatepass")
        if self.rng.random() < 0.3:
            edit_bytes = self.rng.choice(BYTE_EDITS)
            data = edit_bytes(self, data)
            applied.append(edit_bytes.__name__)
        return data, applied

    # helpers

    def name(self, text: str) -> str:
        names: list[str] = [n for n in NAME.findall(text) if not keyword.iskeyword(n)]
        if names and self.rng.random() < 0.7:
            return self.rng.choice(names)
        return self.rng.choice(AMP_NAMES)

    def line_index(self, lines: list[str]) -> int:
        return self.rng.randrange(len(lines) + 1)

    def indentation_at(self, lines: list[str], index: int) -> str:
        for line in lines[index:]:
            if line.strip():
                return line[: len(line) - len(line.lstrip())]
        return ""

    def size(self) -> int:
        return self.rng.choice(SIZES)

    def insert_statement(self, text: str, statement: str) -> str:
        lines = text.split("\n")
        at = self.line_index(lines)
        indent = self.indentation_at(lines, at)
        if self.rng.random() < 0.3:
            statement = 'with torch.autocast("cuda", dtype=torch.float16):\n' + indented(
                statement, "    "
            )
        lines[at:at] = indented(statement, indent).split("\n")
        return "\n".join(lines)

    def block(self, lines: list[str]) -> tuple[int, int, str]:
        """A run of lines starting at a statement, at the same or deeper indentation."""
        starts = [i for i, line in enumerate(lines) if line.strip()]
        if not starts:
            return 0, len(lines), ""
        start = self.rng.choice(starts)
        indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
        end, siblings, wanted = start + 1, 1, self.rng.randint(1, 8)
        while end < len(lines):
            line = lines[end]
            if line.strip():
                current = line[: len(line) - len(line.lstrip())]
                if len(current) < len(indent):
                    break
                if len(current) == len(indent):
                    if siblings >= wanted:
                        break
                    siblings += 1
            end += 1
        return start, end, indent


def delete_lines(m: Mutator, text: str) -> str:
    lines = text.split("\n")
    at = m.rng.randrange(len(lines))
    del lines[at : at + m.rng.randint(1, 3)]
    return "\n".join(lines)


def duplicate_lines(m: Mutator, text: str) -> str:
    lines = text.split("\n")
    at = m.rng.randrange(len(lines))
    span = lines[at : at + m.rng.randint(1, 5)]
    lines[at:at] = span
    return "\n".join(lines)


def swap_lines(m: Mutator, text: str) -> str:
    lines = text.split("\n")
    a, b = m.rng.randrange(len(lines)), m.rng.randrange(len(lines))
    lines[a], lines[b] = lines[b], lines[a]
    return "\n".join(lines)


def move_block(m: Mutator, text: str) -> str:
    lines = text.split("\n")
    start, end, _ = m.block(lines)
    moved = lines[start:end]
    del lines[start:end]
    at = m.line_index(lines)
    lines[at:at] = moved
    return "\n".join(lines)


def wrap_block(m: Mutator, text: str) -> str:
    """Re-indent a block under a new compound statement."""
    lines = text.split("\n")
    start, end, indent = m.block(lines)
    name = m.name(text)
    choices = [
        (['with torch.autocast("cuda"):'], [], 4),
        (['with torch.autocast("cuda", dtype=torch.float16):'], [], 4),
        (['with torch.autocast(device_type="cpu", dtype=torch.bfloat16), torch.no_grad():'], [], 4),
        ([f"match {name}:", "    case [a, *rest] if a:"], ["    case _:", "        pass"], 8),
        ([f"match {name}:", "    case {'k': v, **kw}:"], [], 8),
        ([f"match {name}:", "    case torch.Tensor(dtype=torch.float16) | None:"], [], 8),
        ([f"match {name}:", "    case _:"], [], 8),
        ([f"def _fuzz_0(self, {name}, *args, **kwargs):"], [], 4),
        (["async def _fuzz_async(self):"], [], 4),
        ([f"if {name}:"], ["else:", "    pass"], 4),
        ([f"while {name}:"], [], 4),
        ([f"for {name} in range(3):"], [], 4),
        (["try:"], ["except Exception as error:", "    raise RuntimeError(error) from None"], 4),
        (["try:"], ["finally:", "    scaler.update()"], 4),
        (["class _Fuzz(nn.Module):"], [], 4),
        (["with torch.cuda.amp.autocast():", "    with torch.autocast('cuda', enabled=False):"],
         [], 8),
        (["lambda_ = lambda: None", "if True:"], [], 4),
    ]  # fmt: skip
    header, footer, depth = m.rng.choice(choices)
    body = [(" " * depth + line if line.strip() else line) for line in lines[start:end]]
    lines[start:end] = [indent + h for h in header] + body + [indent + f for f in footer]
    return "\n".join(lines)


def replace_number(m: Mutator, text: str) -> str:
    numbers = list(NUMBER.finditer(text))
    if not numbers:
        return m.insert_statement(text, f"{m.name(text)} = {m.rng.choice(NUMBERS)}")
    targets = numbers if m.rng.random() < 0.2 else [m.rng.choice(numbers)]
    for match in reversed(targets):
        text = text[: match.start()] + m.rng.choice(NUMBERS) + text[match.end() :]
    return text


def replace_name(m: Mutator, text: str) -> str:
    names = sorted({n for n in NAME.findall(text) if not keyword.iskeyword(n)})
    if not names:
        return text
    old, new = m.rng.choice(names), m.name(text)
    pattern = re.compile(rf"\b{re.escape(old)}\b")
    if m.rng.random() < 0.5:
        return pattern.sub(new, text)
    occurrences = list(pattern.finditer(text))
    hit = m.rng.choice(occurrences)
    return text[: hit.start()] + new + text[hit.end() :]


def toggle_dtype(m: Mutator, text: str) -> str:
    pattern = re.compile(r"\b(" + "|".join(DTYPES) + r")\b")
    hits = list(pattern.finditer(text))
    if not hits:
        return text
    hit = m.rng.choice(hits)
    return text[: hit.start()] + m.rng.choice(DTYPES) + text[hit.end() :]


def deep_expression(m: Mutator, text: str) -> str:
    """Deep or long expressions: bracket towers, long operator and method chains."""
    n, x = m.size(), m.name(text)
    shapes = [
        lambda: "(" * n + x + ")" * n,
        lambda: "[" * n + "]" * n,
        lambda: "{'k': " * n + "0" + "}" * n,
        lambda: " + ".join(f"{x}{i % 7}" for i in range(2 * n)),
        lambda: " * ".join(f"{x}.half()" for _ in range(n)),
        lambda: x + ".half()" * n,
        lambda: "torch.ones(3)" + ".to(torch.float16).float()" * (n // 2),
        lambda: f"{x}.masked_fill({x} > 0, -1e9)" + ".sum()" * n,
        lambda: "f(" * n + ")" * n,
        lambda: "torch.exp(" * n + x + ")" * n,
        lambda: "-" * n + x,
        lambda: "not " * n + x,
        lambda: "lambda: " * n + "0",
        lambda: x + "[0]" * n,
        lambda: x + ".a" * n,
        lambda: f"1 if {x} else " * n + "0",
        lambda: " and ".join([x] * n),
        lambda: " < ".join([x] * n),
        lambda: "'s' " * n,
        lambda: f"{x}(" + ", ".join(f"a{i}" for i in range(n * 2)) + ")",
        lambda: "[" + ", ".join(f"{x}.half()" for _ in range(n * 2)) + "]",
    ]
    return m.insert_statement(text, f"{m.name(text)} = {m.rng.choice(shapes)()}")


def deep_statements(m: Mutator, text: str) -> str:
    """Deeply nested blocks, long elif chains, many statements."""
    x = m.name(text)
    depth = m.rng.choice([10, 50, 99, 120, 300])
    shapes = [
        lambda: "".join("    " * i + f"if {x}:\n" for i in range(depth)) + "    " * depth + "pass",
        lambda: (
            "".join("    " * i + "with torch.autocast('cuda'):\n" for i in range(depth))
            + "    " * depth
            + f"{x} = {x}.half()"
        ),
        lambda: (
            "".join("    " * i + f"def f{i}({x}):\n" for i in range(min(depth, 60)))
            + "    " * min(depth, 60)
            + "return torch.float16"
        ),
        lambda: (
            f"if {x} == 0:\n    pass\n"
            + "".join(f"elif {x} == {i}:\n    {x} = {x}.half()\n" for i in range(1, depth * 10))
            + "else:\n    pass"
        ),
        lambda: "\n".join(f"{x} = {x} + {x}.half()" for _ in range(depth * 10)),
        lambda: "\n".join(f"try:\n    pass\nexcept E{i}:\n    pass" for i in range(depth)),
    ]
    return m.insert_statement(text, m.rng.choice(shapes)())


def wrap_in_class(m: Mutator, text: str) -> str:
    if m.rng.random() < 0.5:
        return "class _Fuzz(torch.nn.Module):\n" + indented(text, "    ")
    return "class _Outer:\n    class _Fuzz(nn.Module):\n" + indented(text, "        ")


def add_decorators(m: Mutator, text: str) -> str:
    lines = text.split("\n")
    targets = [i for i, line in enumerate(lines) if re.match(r"\s*(async\s+)?(def|class)\s", line)]
    if not targets:
        return text
    at = m.rng.choice(targets)
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
    chosen = [
        m.rng.choice(DECORATORS).replace("{name}", m.name(text)) for _ in range(m.rng.randint(1, 3))
    ]
    lines[at:at] = [indent + decorator for decorator in chosen]
    return "\n".join(lines)


def splice(m: Mutator, text: str) -> str:
    """A few lines of another fixture, re-indented to where they go."""
    other = m.rng.choice(m.others).split("\n")
    start = m.rng.randrange(len(other))
    chunk = [line for line in other[start : start + m.rng.randint(1, 12)]]
    margin = min((len(x) - len(x.lstrip()) for x in chunk if x.strip()), default=0)
    lines = text.split("\n")
    at = m.line_index(lines)
    indent = m.indentation_at(lines, at)
    lines[at:at] = [indent + line[margin:] if line.strip() else line for line in chunk]
    return "\n".join(lines)


def edit_characters(m: Mutator, text: str) -> str:
    if not text:
        return "\n"
    at = m.rng.randrange(len(text))
    if m.rng.random() < 0.5:
        return text[:at] + text[at + 1 :]
    return text[:at] + m.rng.choice(":()[]{},=@*\\'\"#\t\x0c;.") + text[at:]


def add_comments(m: Mutator, text: str) -> str:
    lines = text.split("\n")
    comments = [
        "  # noqa", "  # noqa: AMP", "  # noqa: AMP301,AMP1", "  # noqa:", "  # type: ignore",
        "  # amp-lint: ignore", "  # \u00e9t\u00e9 \U0001f600", "  # noqa: E501, AMP999",
    ]  # fmt: skip
    for _ in range(m.rng.randint(1, 4)):
        at = m.rng.randrange(len(lines))
        lines[at] += m.rng.choice(comments)
    return "\n".join(lines)


def continue_lines(m: Mutator, text: str) -> str:
    lines = text.split("\n")
    candidates = [i for i, line in enumerate(lines) if " " in line.strip()]
    if not candidates:
        return text
    at = m.rng.choice(candidates)
    line = lines[at]
    spaces = [i for i, c in enumerate(line) if c == " " and line[:i].strip()]
    cut = m.rng.choice(spaces)
    lines[at] = line[:cut] + " \\\n" + " " * m.rng.choice([0, 4, 8]) + line[cut + 1 :]
    return "\n".join(lines)


def unicode_names(m: Mutator, text: str) -> str:
    names = sorted({n for n in NAME.findall(text) if not keyword.iskeyword(n)})
    new = m.rng.choice(["\u00e9t\u00e9", "\u0394x", "\u53d8\u91cf", "\uff54orch", "x\u0301"])
    if names and m.rng.random() < 0.6:
        return re.sub(rf"\b{re.escape(m.rng.choice(names))}\b", new, text)
    return m.insert_statement(text, f"{new} = '\u2028\U0001f600\\N{{BULLET}}'")


def tabs(m: Mutator, text: str) -> str:
    lines = text.split("\n")
    if m.rng.random() < 0.7:
        return "\n".join(
            re.sub(r"^( {4})+", lambda g: "\t" * (len(g.group()) // 4), x) for x in lines
        )
    at = m.rng.randrange(len(lines))
    lines[at] = lines[at].replace("    ", "\t", 1)
    return "\n".join(lines)


def degenerate(m: Mutator, text: str) -> str:
    return m.rng.choice(
        [
            "",
            "\n" * 1000,
            "# torch.autocast only a comment",
            "\\",
            "import torch\n" + "x = 1\n" * 5000,
            "import torch\nx = '" + "a" * 200_000 + "'\n",
            "import torch\n\x0cwith torch.autocast('cuda'):\n\x0c    pass\n",
            text + "\n" + text,
        ]
    )


TEXT_EDITS: list[Callable[[Mutator, str], str]] = [
    delete_lines, duplicate_lines, swap_lines, move_block, wrap_block, wrap_block,
    replace_number, replace_number, replace_name, replace_name, toggle_dtype, deep_expression,
    deep_statements, wrap_in_class, add_decorators, splice, splice,
    edit_characters, add_comments, continue_lines, unicode_names, tabs, degenerate,
]  # fmt: skip


def crlf(m: Mutator, data: bytes) -> bytes:
    return data.replace(b"\n", b"\r\n")


def cr_only(m: Mutator, data: bytes) -> bytes:
    return data.replace(b"\n", b"\r")


def mixed_newlines(m: Mutator, data: bytes) -> bytes:
    lines = data.split(b"\n")
    return b"".join(line + m.rng.choice([b"\n", b"\r\n", b"\r"]) for line in lines[:-1]) + lines[-1]


def bom(m: Mutator, data: bytes) -> bytes:
    return b"\xef\xbb\xbf" + data


def latin1_cookie(m: Mutator, data: bytes) -> bytes:
    try:
        body = data.decode("utf-8").encode("latin-1")
    except (UnicodeDecodeError, UnicodeEncodeError):
        body = data
    return b"# -*- coding: latin-1 -*-\n" + body


def odd_cookie(m: Mutator, data: bytes) -> bytes:
    return (
        m.rng.choice(
            [
                b"# coding: no-such-codec\n",
                b"\xef\xbb\xbf# coding: latin-1\n",
                b"#!/usr/bin/env python\n# vim: set fileencoding=utf-16 :\n",
                b"# coding: ascii\n",
            ]
        )
        + data
    )


def null_byte(m: Mutator, data: bytes) -> bytes:
    at = m.rng.randrange(len(data) + 1)
    return data[:at] + b"\x00" + data[at:]


def truncate(m: Mutator, data: bytes) -> bytes:
    return data[: m.rng.randrange(len(data) + 1)]


def no_final_newline(m: Mutator, data: bytes) -> bytes:
    return data.rstrip(b"\r\n") + m.rng.choice([b"", b"  ", b"\\", b"\t# end"])


BYTE_EDITS: list[Callable[[Mutator, bytes], bytes]] = [
    crlf, cr_only, mixed_newlines, bom, latin1_cookie, odd_cookie, null_byte, truncate,
    truncate, no_final_newline,
]  # fmt: skip


def make_mutants(count: int) -> list[Program]:
    fixtures = fixture_sources()
    texts = [text for _, text in fixtures]
    mutants = []
    for index in range(count):
        rng = random.Random(SEED * 1_000_003 + index)
        origin, text = fixtures[index % len(fixtures)]
        data, applied = Mutator(rng, texts).mutate(text)
        mutants.append(Program(f"m{index:05d}.py", data, f"{origin}: {', '.join(applied)}"))
    return mutants
