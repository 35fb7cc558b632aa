"""Settings: `[tool.amp-lint]` files, which apply to each file, rule selectors, the torch-version
target.
"""
