"""`kk.clamp`, `kk.lerp`, `kk.sign`: small numeric helpers Python has no spelling for.

Each is a plain Python function written in the kernel language, so a kernel compiles it
as a device function: it works on every backend, automatic differentiation sees the
ordinary operations it is made of, and on the host it runs as Python on NumPy (or Python)
scalars, giving the same values. In a kernel, the result type is what the operations
give under the language's (NumPy's NEP 50) promotion; on the host, `min` and `max` are
Python's, which return one of their arguments as it is, so a result may be a Python
number where a kernel has a NumPy scalar of the same value.

A choice between two values needs no helper: Python's conditional expression
(`a if condition else b`) is one in kernels."""
from __future__ import annotations


def clamp(x, lo, hi):
    """`x` limited to [lo, hi]: exactly `min(max(x, lo), hi)`, with the language's
    `min` and `max` (Python's: the first argument unless the second is smaller, or
    larger), so the result type is the promotion of the three (a float32 `x` with
    Python-number bounds stays float32) and:

    - a NaN `x` gives NaN; a NaN bound is ignored (`max(x, nan)` is `x`);
    - where `lo > hi`, the result is `hi`.

        kk.clamp(np.float32(1.5), 0.0, 1.0)   # 1.0 (a float32 in a kernel)
        kk.clamp(-7, 0, 10)                   # 0
    """
    return min(max(x, lo), hi)


def lerp(a, b, t):
    """Linear interpolation from `a` (t = 0) to `b` (t = 1): exactly `a + t * (b - a)`,
    rounded operation by operation (as Warp defines it; no fused multiply-add, so every
    backend gives the same bits). `t` outside [0, 1] extrapolates; the result type is
    the promotion of the three.

        kk.lerp(np.float32(2.0), np.float32(4.0), np.float32(0.25))   # 2.5 (float32)
    """
    return a + t * (b - a)


def sign(x):
    """The sign of `x` as NumPy's `np.sign` gives it, in `x`'s type: -1, 0 or +1; NaN for
    NaN; +0.0 for both +0.0 and -0.0; +1 and -1 for infinities. An unsigned `x` gives 0
    or 1. A bool is an error in a kernel, as `np.sign` raises for one.

        kk.sign(np.float32(-2.5))   # -1.0 (a float32 in a kernel)
        kk.sign(np.int8(0))         # 0
    """
    # min and max of `x` with a Python int give that number in x's type.
    if x > 0:
        return min(max(x, 1), 1)
    if x < 0:
        return max(min(x, -1), -1)
    return x - x   # +0 for either zero (x - x rounds to +0), NaN for NaN


__all__ = ["clamp", "lerp", "sign"]
