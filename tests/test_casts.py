"""AMP105 (float32 casts autocast undoes) and AMP003's sums over the sequence axis hidden in
linear attention, beyond the fixtures: call chains, custom_fwd, library mode, the einsum
readings and the bounded (softmax) operands."""

from __future__ import annotations

import textwrap

import pytest

from amp_lint.analysis.syntax.contractions import parse_equation
from amp_lint.findings import Finding
from amp_lint.run.engine import fix_source, lint_source
from amp_lint.settings.config import Config


def lint(source: str, code: str, **settings: object) -> list[Finding]:
    config = Config(select=(code,), **settings)  # type: ignore[arg-type]
    return lint_source(textwrap.dedent(source).encode(), "example.py", config)


# --- AMP105 --------------------------------------------------------------------------------


def test_a_helper_called_from_the_region_is_reported_with_its_call_chain() -> None:
    [finding] = lint(
        """
        import torch

        def gram(x, y):
            return x.float() @ y.float()

        def step(x, w):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                h = x @ w
                return gram(h, h)
        """,
        "AMP105",
    )
    assert finding.line == 5
    assert finding.via == (("example.py", 10),)
    assert "(via example.py:10)" in finding.message
    assert "cpu bfloat16 autocast runs in bfloat16" in finding.message


def test_the_helper_fix_uses_the_tensor_device() -> None:
    source = textwrap.dedent(
        """
        import torch

        def gram(x, y):
            return x.float() @ y.float()

        def step(x, w):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return gram(x @ w, x @ w)
        """
    )
    config = Config(select=("AMP105",))
    fixed = fix_source(source.encode(), "example.py", config, unsafe=True).source.decode()
    assert "    with torch.autocast(x.device.type, enabled=False):\n" in fixed


def test_a_statement_with_a_half_operand_gets_no_fix() -> None:
    [finding] = lint(
        """
        import torch

        def step(x, w):
            with torch.autocast("cuda", dtype=torch.float16):
                h = x @ w
                return torch.addmm(h, x.float(), w.float())
        """,
        "AMP105",
    )
    assert finding.fix is None  # h stays half in an island, where addmm would raise


@pytest.mark.parametrize(
    ("arguments", "flagged"),
    [('device_type="cuda", cast_inputs=torch.float32', False), ('device_type="cuda"', True)],
)
def test_custom_fwd_with_cast_inputs_runs_with_autocast_disabled(
    arguments: str, flagged: bool
) -> None:
    findings = lint(
        f"""
        import torch

        @torch.amp.custom_fwd({arguments})
        def gram(x):
            return x.float() @ x.float().T

        def step(x, w):
            with torch.autocast("cuda", dtype=torch.float16):
                return gram(x @ w)
        """,
        "AMP105",
    )
    assert bool(findings) is flagged


def test_library_mode_reports_a_forward() -> None:
    [finding] = lint(
        """
        import torch

        class Head(torch.nn.Module):
            def forward(self, x, w):
                return x.float() @ w.float()
        """,
        "AMP105",
        assume_autocast="float16",
        assume_device="cpu",
    )
    assert "cpu float16 autocast runs in float16" in finding.message


@pytest.mark.parametrize(
    ("device", "flagged"),
    [("cpu", False), ("cuda", True)],
)
def test_mv_is_lowered_on_cuda_only(device: str, flagged: bool) -> None:
    findings = lint(
        f"""
        import torch

        def step(x, v):
            with torch.autocast("{device}", dtype=torch.float16):
                return torch.mv(x.float(), v.float())
        """,
        "AMP105",
    )
    assert bool(findings) is flagged


# --- AMP003: sums over the sequence axis ---------------------------------------------------


def test_einsum_equations() -> None:
    equation = parse_equation("...nd,...ne->...de")
    assert equation is not None
    assert equation.operands == ("nd", "ne") and equation.ellipsis == (True, True)
    assert equation.contracted == frozenset("n")
    assert parse_equation("b i d, b j d -> b i j") is not None
    assert parse_equation("ij,jk") is None  # implicit output
    assert parse_equation("i...j,jk->ik") is None  # ellipsis in the middle
    assert parse_equation("ii->i") is None  # a repeated index (a diagonal)


LINEAR_ATTENTION = """
import torch

def attention(q, k, v):
    {prelude}
    return {expression}

def step(x, w):
    with torch.autocast("cuda", dtype=torch.float16):
        q = x @ w
        return attention(q, q, q)
"""


@pytest.mark.parametrize(
    ("prelude", "expression", "flagged"),
    [
        ("pass", "k.transpose(-2, -1) @ v", True),
        ("pass", "q @ k.transpose(-2, -1)", False),  # scores: sums features
        ("k = k.softmax(dim=-2)", "k.transpose(-2, -1) @ v", False),  # weights sum to 1
        ("k = k.softmax(dim=-1)", "k.transpose(-2, -1) @ v", True),  # normalised elsewhere
        ("k = k + 1.0\n    k = k + 1.0", "k.transpose(-2, -1) @ v", True),  # rebinding
        ("s = k.sum(dim=-2)\n    s = s + 1e-6", "q @ s.unsqueeze(-1)", False),  # not all sums
        ("s = k.sum(dim=-2) + 1e-6", "q @ s[..., None]", True),
        ("pass", 'torch.einsum("bhnd,bhne->bhde", k, v)', True),
        ("pass", 'torch.einsum("bhij,bhjd->bhid", q, v)', False),  # weights times values
        ("pass", 'torch.einsum("bi,bj->ij", q, v)', False),  # a sum over the batch
        ("pass", 'torch.einsum("...nd,...d->...n", q, k.sum(-2))', True),
        ("pass", 'torch.einsum("...nd,...d->...n", q, k.sum(-1))', False),  # shapes disagree
        ("pass", 'torch.einsum("bnd,bd->bn", q, k.sum(dim=1))', True),
        ("pass", 'torch.einsum("bnd,bd->bn", q, k.sum(dim=0))', False),  # the batch
    ],
)
def test_linear_attention_shapes(prelude: str, expression: str, flagged: bool) -> None:
    source = LINEAR_ATTENTION.format(prelude=prelude, expression=expression)
    findings = lint(source, "AMP003")
    assert bool(findings) is flagged, findings


def test_the_normaliser_message_states_the_measured_growth() -> None:
    source = LINEAR_ATTENTION.format(prelude="pass", expression="q @ k.sum(dim=-2).unsqueeze(-1)")
    [finding] = lint(source, "AMP003")
    assert "inf from about 750 tokens" in finding.message
    assert "enabled=False" in finding.message and finding.fix is None
    assert "(via example.py:11)" in finding.message
