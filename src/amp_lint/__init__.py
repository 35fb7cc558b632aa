"""amp-lint: find and fix PyTorch code that is unsafe under automatic mixed precision."""

__version__ = "0.1.0"
