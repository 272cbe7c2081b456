"""The CPU backend: `CPU()` runs kernels on this machine's cores."""
from .runtime import CPU

__all__ = ["CPU"]
