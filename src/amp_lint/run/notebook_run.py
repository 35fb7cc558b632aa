"""Notebooks in a run: analysed as the Python module of their code cells (notebooks.py), reported
and written back as notebooks.

A run reads and caches a notebook's own bytes (so the warm-run index and the result cache key
on the file), hands its module to the analysis in their place, and turns each outcome back:
findings at `cell N:line:column`, the fixed module written into the notebook's cells
(notebook_writing.py), the notebook's bytes as the outcome's source. A notebook that cannot be
read is one error, and the other files are linted as usual.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from amp_lint.findings import Finding, TextEdit
from amp_lint.fixes.text_edits import text_edits
from amp_lint.run.runner import Job, Outcome, run_jobs
from amp_lint.settings.config import Config
from amp_lint.sources.notebook_writing import fixed_notebook
from amp_lint.sources.notebooks import (
    Notebook,
    NotebookError,
    cell_source,
    is_notebook,
    parse_notebook,
)
from amp_lint.suppressions.comments import apply_text_edits


def notebook_error(path: str, error: NotebookError) -> str:
    return f"{path}: cannot read notebook: {error}"


@dataclass
class NotebookSources:
    """A run's sources with each notebook replaced by its Python module."""

    original: dict[str, bytes]
    python: dict[str, bytes] = field(default_factory=dict)
    notebooks: dict[str, Notebook] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    @classmethod
    def split(cls, sources: dict[str, bytes]) -> NotebookSources:
        split = cls(sources)
        for path, source in sources.items():
            if not is_notebook(path):
                split.python[path] = source
                continue
            try:
                notebook = parse_notebook(source)
            except NotebookError as error:
                split.errors[path] = notebook_error(path, error)
                continue
            split.notebooks[path] = notebook
            split.python[path] = notebook.python_bytes
        return split

    def restore(self, outcomes: list[Outcome]) -> list[Outcome]:
        """The outcomes in notebook terms, with one per unreadable notebook, in the order of
        the sources."""
        if not self.notebooks and not self.errors:
            return outcomes
        by_path = {outcome.path: outcome for outcome in outcomes}
        restored = []
        for path, source in self.original.items():
            if path in self.errors:
                restored.append(Outcome(path, source, error=self.errors[path]))
            elif path in by_path:
                outcome = by_path.pop(path)
                notebook = self.notebooks.get(path)
                restored.append(
                    outcome if notebook is None else notebook_outcome(outcome, notebook)
                )
        return restored + list(by_path.values())


def notebook_outcome(outcome: Outcome, notebook: Notebook) -> Outcome:
    """An outcome computed on the notebook's module, in terms of the notebook: its source the
    notebook's bytes, its fixed source the fixed notebook, its findings in cells."""
    outcome.source = notebook.raw
    outcome.fixed = _in_cells(outcome.fixed, outcome.path, notebook)
    if outcome.unfixed is not None:
        outcome.unfixed = _in_cells(outcome.unfixed, outcome.path, notebook)
    if outcome.fixed_source is None:
        outcome.remaining = _in_cells(outcome.remaining, outcome.path, notebook)
        return outcome
    fixed_python = outcome.fixed_source.decode("utf-8", "surrogatepass")
    try:
        fixed_raw = fixed_notebook(notebook, fixed_python)
        fixed = parse_notebook(fixed_raw)
    except NotebookError as error:
        outcome.error = f"{outcome.path}: cannot write the fixes into the notebook: {error}"
        outcome.remaining = outcome.unfixed if outcome.unfixed is not None else []
        outcome.fixed, outcome.fixed_source = [], None
        return outcome
    # What remains was found in the fixed module, whose lines the fixed notebook maps.
    outcome.remaining = _in_cells(outcome.remaining, outcome.path, fixed)
    outcome.fixed_source = fixed_raw if fixed_raw != notebook.raw else None
    return outcome


def _in_cells(findings: list[Finding], path: str, notebook: Notebook) -> list[Finding]:
    return [in_cell(finding, notebook) if finding.path == path else finding for finding in findings]


def in_cell(finding: Finding, notebook: Notebook) -> Finding:
    """The finding at its cell and line in the cell (a finding already there is kept)."""
    if finding.cell is not None:
        return finding
    cell, line = notebook.position(finding.line)
    end_line, end_column = finding.end_line, finding.end_column
    if end_line:
        end_cell, end_line = notebook.position(end_line)
        if end_cell != cell:  # a range across cells is cut to its start
            end_line, end_column = line, finding.column
    fix = finding.fix
    if fix is not None and fix.text_edits:
        fix = replace(fix, text_edits=_cell_edits(fix.text_edits, notebook))
    return replace(
        finding,
        cell=cell,
        line=line,
        end_line=end_line,
        end_column=end_column,
        message=_lines_in_cells(finding.message, finding.path, notebook),
        summary=_lines_in_cells(finding.summary, finding.path, notebook),
        fix=fix,
    )


def _cell_edits(edits: tuple[TextEdit, ...], notebook: Notebook) -> tuple[TextEdit, ...]:
    """A fix's edits on the notebook's module as edits on its cells, each naming its cell.
    Made again cell by cell from the fixed notebook, not mapped: one module edit may span
    two cells (an import removed from one, the call changed in the next, merged by the diff
    because the module's lines are adjacent)."""
    fixed_python = apply_text_edits(notebook.python_bytes, edits)
    try:
        fixed = parse_notebook(
            fixed_notebook(notebook, fixed_python.decode("utf-8", "surrogateescape"))
        )
    except NotebookError:
        return ()  # not expressible in cells: offered as no edits, as a conflicting fix is
    if len(fixed.cells) != len(notebook.cells):
        return ()
    cell_edits: list[TextEdit] = []
    for number, (old, new) in enumerate(zip(notebook.cells, fixed.cells), start=1):
        before, after = cell_source(old), cell_source(new)
        if before != after:
            cell_edits += [replace(e, cell=number) for e in text_edits(before, after)]
    return tuple(cell_edits)


def _lines_in_cells(message: str, path: str, notebook: Notebook) -> str:
    """Messages name other lines of the module (`(line 7)`, `via nb.ipynb:7`): named by cell
    and line in the notebook."""

    def cell_and_line(line: str) -> tuple[int, int]:
        return notebook.position(int(line))

    message = re.sub(
        rf"{re.escape(path)}:(\d+)\b",
        lambda match: "{}:cell {}:{}".format(path, *cell_and_line(match.group(1))),
        message,
    )
    return re.sub(
        r"\bline (\d+)\b",
        lambda match: "cell {}, line {}".format(*cell_and_line(match.group(1))),
        message,
    )


def lint_notebook_input(
    path: str, raw: bytes, config: Config, *, fix: bool, unsafe: bool
) -> Outcome:
    """Lint (or fix) a notebook read from standard input, named `path`."""
    from amp_lint.sources.files import has_amp_vocabulary

    try:
        notebook = parse_notebook(raw)
    except NotebookError as error:
        return Outcome(path, raw, error=notebook_error(path, error))
    python = notebook.python_bytes
    if not has_amp_vocabulary(python, config):
        return Outcome(path, raw)
    outcome = run_jobs([Job(path, python, fix, unsafe)], config)[0]
    return notebook_outcome(outcome, notebook)
