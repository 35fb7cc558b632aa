from .detector import Detector
from .loss import SetLoss

__all__ = ["Detector", "SetLoss"]
