"""The user-facing kernel language: `@kernel` and launching (`kernel`), the functions a
kernel calls with their signatures and examples (`intrinsics`: `kk.index`, `kk.localmem`,
atomics ...), and the math functions usable in kernels and on the host (`math`)."""
from . import intrinsics, math

__all__ = ["intrinsics", "math"]
