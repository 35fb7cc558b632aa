"""A small model zoo: building blocks for users' own training loops."""

from .blocks import ScaleNorm, TokenClassifier
from .geometry import PoseRefiner

__all__ = ["PoseRefiner", "ScaleNorm", "TokenClassifier"]
