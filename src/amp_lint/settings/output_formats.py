"""The `--output-format` values (`output-format` in `[tool.amp-lint]`), as ruff names them:
`concise` and `full` for people; `json`, `json-lines`, `sarif`, `github`, `gitlab` and `junit`
for tools. The formats themselves are in formats/."""

OUTPUT_FORMATS = ("concise", "full", "json", "json-lines", "sarif", "github", "gitlab", "junit")
# `text` is accepted as the older name of `concise`.
ALIASES = {"text": "concise"}
