from .attn import Attention

__all__ = ["Attention"]
