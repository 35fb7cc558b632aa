"""AMP401's finding on an import of the deprecated APIs (`from torch.cuda.amp import
autocast, GradScaler`, `import torch.cuda.amp as amp`, `from torch.cuda import amp`).

One finding per import statement, and only where a reported use goes through it: an import
whose names are used only in annotations, or only in compatibility code, warns nowhere. Its
fix is the migration of that import: the fixes of every use through it, and the import
removed once nothing uses it (the same removal the uses' own fixes ask for, so applying
either gives the same file).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Container, Sequence

from amp_lint.analysis.syntax.deprecated_amp_apis import (
    DEPRECATED_SINCE,
    ApiUse,
    DeprecatedApi,
    DeprecatedImport,
)
from amp_lint.analysis.syntax.names import dotted_name
from amp_lint.analysis.training.training_setup import snippet
from amp_lint.findings import Edit, Fix, FixSafety
from amp_lint.rules.base import Report
from amp_lint.settings.torch_version import TorchVersion, format_torch_version


def head(use: ApiUse) -> str:
    """The local name a use reaches its API through (`amp` in `amp.autocast()`)."""
    return (dotted_name(use.target) or "").split(".", 1)[0]


def import_report(
    statement: DeprecatedImport,
    through: Sequence[tuple[ApiUse, Report]],
    needs_torch: bool,
    exported: Container[str],
    target: TorchVersion | None,
) -> Report:
    apis = sorted(
        dict.fromkeys(use.api for use, _ in through), key=lambda api: (api.device, api.name.lower())
    )
    runtime = "calling them warns"
    if target is not None and target < DEPRECATED_SINCE:
        runtime = f"on torch >= {format_torch_version(DEPRECATED_SINCE)} calling them warns"
    olds = ", ".join(f"`{api.old}`" for api in apis)
    message = (
        f"`{snippet(statement.statement)}` imports AMP APIs deprecated in torch 2.4 ({olds}): "
        f'{runtime} "FutureWarning: {apis[0].warning}"; use {_replacements(apis)}'
    )
    fix = _fix(statement, through, needs_torch, exported)
    if fix is not None:
        count = len(through)
        message += (
            f" (the fix rewrites its {count} use{'s' if count > 1 else ''} and removes the "
            "import once nothing uses it)"
        )
    names = ", ".join(dict.fromkeys(api.name for api in apis))
    devices = "/".join(dict.fromkeys(f'"{api.device}"' for api in apis))
    summary = (
        f"import of deprecated `{_namespaces(apis)}`; use `torch.amp` ({names}) with {devices}"
    )
    return Report(statement.statement, message, fix, summary=summary)


def _replacements(apis: Sequence[DeprecatedApi]) -> str:
    spelled = []
    for api in apis:
        if api.device_is_keyword:
            spelled.append(f"`torch.amp.{api.name}(..., device_type='{api.device}')`")
        else:
            spelled.append(f"`torch.amp.{api.name}('{api.device}', ...)`")
    return ", ".join(spelled)


def _namespaces(apis: Sequence[DeprecatedApi]) -> str:
    return "`, `".join(dict.fromkeys(f"torch.{api.device}.amp" for api in apis))


def _fix(
    statement: DeprecatedImport,
    through: Sequence[tuple[ApiUse, Report]],
    needs_torch: bool,
    exported: Container[str],
) -> Fix | None:
    fixes = [report.fix for _, report in through if report.fix is not None]
    edits: list[Edit] = [edit for fix in fixes for edit in fix.edits]
    if not edits:
        return None
    unused: tuple[tuple[str, str | None, str | None], ...] = ()
    if not statement.nested:
        # Only what the uses went through: a name the import binds but nothing here uses
        # is another matter (F401), as it is for the uses' own fixes.
        used = {head(use) for use, _ in through}
        unused = tuple(
            binding
            for local, binding in statement.bindings.items()
            if local in used and (binding[2] or binding[1]) not in exported
        )
    return dataclasses.replace(
        Fix(FixSafety.SAFE, "Use `torch.amp` for every use of this import"),
        edits=tuple(edits),
        imports=("torch",) if needs_torch else (),
        unused_imports=unused,
    )
