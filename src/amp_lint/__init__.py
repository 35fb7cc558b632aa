"""amp-lint: find and fix PyTorch code that is unsafe under automatic mixed precision."""

# The release; CHANGELOG.md has what changed in each. pyproject.toml reads it from here.
__version__ = "0.2.0"
