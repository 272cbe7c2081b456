"""Scalar functions beyond `kk.sqrt` and its kind: `kk.bitcast`, `kk.round`, `kk.frac`,
`kk.step`, `kk.nonzero`, `kk.smoothstep`, `kk.erfinv` and `kk.erfcinv`, spelled as Warp
spells them, with NumPy's types.

Each keeps its argument's float type (a float32 in, a float32 out; a Python float gives a
Python-float result, weak; integers compute in float64), as `kk.sqrt` does. In a kernel
the frontend makes each of the language's operations (`kernelkit.frontend.scalars`), so
every backend computes them the same way and automatic differentiation sees what they
are made of; on the host they compute with NumPy, element by element on arrays too.

What each computes, where Warp, NumPy and C differ:

- `kk.round(x)` rounds half to even, as Python's `round` and NumPy's `np.round` do
  (`kk.round(2.5) == 2.0`, `kk.round(-0.5) == -0.0`); Warp's `wp.round` and C's `round`
  round half away from zero. Python's `round(x)` in a kernel is the same rounding and
  gives an int, as in Python.
- `kk.frac(x)` is `x - kk.trunc(x)`: the fractional part with x's sign
  (`kk.frac(-1.25) == -0.25`); NaN for an infinity.
- `kk.step(x)` is 1.0 where x < 0 and 0.0 elsewhere (NaN too): Warp's `step`, which is
  the reverse of GLSL's.
- `kk.nonzero(x)` is 1.0 where x != 0 (NaN too) and 0.0 where x is 0.
- `kk.smoothstep(a, b, x)` is Warp's: t = clamp((x - a) / (b - a), 0, 1), then
  t * t * (3 - 2 * t).
- `kk.erfinv(y)` and `kk.erfcinv(z)` invert `kk.erf` and `kk.erfc`: erfinv(±1) = ±inf,
  erfcinv(0) = inf and erfcinv(2) = -inf, NaN outside [-1, 1] and [0, 2].
- `kk.bitcast(x, dtype)` reads x's bits as `dtype`, a number type of x's size (NumPy's
  `view`): `kk.bitcast(np.float32(1.0), np.uint32) == 0x3f800000`. A Python int is an
  int64 and a Python float a float64 there."""
from __future__ import annotations

import math

import numpy as np

__all__ = ["bitcast", "round", "frac", "step", "nonzero", "smoothstep", "erfinv", "erfcinv"]

TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
# Winitzki's approximation of erf, inverted in closed form, starts the iteration.
WINITZKI = 0.147
WINITZKI_OFFSET = 2.0 / (math.pi * WINITZKI)
# Below this, erfinv(y) is y * sqrt(pi) / 2 to a relative 1e-8: the closed form's square
# roots of nearly 0 (whose derivatives are infinite) are left out.
LINEAR_BELOW = 1e-4
HALLEY_STEPS = 2


def _float_type(x):
    """The float type `x`'s function gives: its own, float64 for integers and bools."""
    dtype = np.result_type(x)
    return dtype if dtype.kind == "f" else np.dtype(np.float64)


def _like(value, x):
    """`value` in `x`'s float type: a NumPy scalar or array, or a Python float for one."""
    result = np.asarray(value).astype(_float_type(x))
    if isinstance(x, (int, float)) and not isinstance(x, (bool, np.generic)):
        return float(result)
    return result[()] if result.ndim == 0 else result


def bitcast(x, dtype):
    """The bits of `x` read as `dtype`, a number type of x's size (NumPy's `view`):

        kk.bitcast(np.float32(1.0), np.uint32)    # np.uint32(0x3f800000)
        kk.bitcast(np.int64(-1), np.float64)      # nan
    """
    source = np.result_type(x) if isinstance(x, np.generic) or np.ndim(x) else \
        np.dtype({int: np.int64, float: np.float64}.get(type(x), np.result_type(x)))
    target = np.dtype(dtype)
    if source.kind == "b" or target.kind == "b" or source.itemsize != target.itemsize:
        raise TypeError(f"kk.bitcast from {source.name} to {target.name}: numbers of one "
                        "size only, not bools")
    result = np.asarray(x, dtype=source).view(target)
    return result[()] if result.ndim == 0 else result


def round(x):   # noqa: A001 - kk.round, as Warp names it
    """`x` rounded to the nearest whole number, half to even (as Python's `round` and
    NumPy's `np.round`; Warp's `round` rounds half away from zero), in x's type:

        kk.round(2.5), kk.round(3.5), kk.round(np.float32(-0.5))   # 2.0, 4.0, -0.0
    """
    if np.result_type(x).kind == "b":
        raise TypeError("kk.round takes numbers, not bools")
    return np.round(x)


def frac(x):
    """The fractional part `x - kk.trunc(x)`, with x's sign (NaN for an infinity):

        kk.frac(-1.25)   # -0.25
    """
    x = _like(x, x)
    with np.errstate(invalid="ignore"):
        return x - np.trunc(x)


def step(x):
    """1.0 where `x < 0`, else 0.0 (NaN gives 0.0), in x's float type: Warp's `step`."""
    return _like(np.less(x, 0), x)


def nonzero(x):
    """1.0 where `x != 0` (NaN too), else 0.0, in x's float type."""
    return _like(np.not_equal(x, 0), x)


def smoothstep(a, b, x):
    """A smooth step from 0 (x <= a) to 1 (x >= b): t = clamp((x - a) / (b - a), 0, 1),
    then t * t * (3 - 2 * t), in the promoted float type of the three (Warp's)."""
    like = np.result_type(a, b, x)
    like = like if like.kind == "f" else np.dtype(np.float64)
    a, b, x = (np.asarray(v).astype(like) for v in (a, b, x))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (x - a) / (b - a)
    # clamp with Python's max and min, as kernels do: NaN and -0.0 stay
    t = np.where(0 > t, like.type(0), t)
    t = np.where(1 < t, like.type(1), t)
    result = t * t * (like.type(3) - like.type(2) * t)
    return result[()] if result.ndim == 0 else result


def erfinv(y):
    """The inverse of `kk.erf`: erfinv(erf(x)) == x, for y in [-1, 1] (±inf at ±1, NaN
    outside). Computed in float64 (rounded once to y's float type): Halley's method on
    erf, or on erfc for |y| > 0.5, from Winitzki's closed form."""
    a = np.abs(np.asarray(y, dtype=np.float64))
    x = _inverse(a, 1.0 - a, a <= 0.5)
    x = np.where(a == 1.0, np.inf, np.where(a > 1.0, np.nan, x))
    return _like(np.copysign(x, y), y)


def erfcinv(z):
    """The inverse of `kk.erfc`: erfcinv(erfc(x)) == x, for z in [0, 2] (inf at 0, -inf
    at 2, NaN outside). Computed in float64 as `kk.erfinv`; near 0 from z itself, so
    erfcinv(1e-300) keeps its precision where erfinv(1 - 1e-300) cannot."""
    wide = np.asarray(z, dtype=np.float64)
    upper = wide > 1.0
    q = np.where(upper, 2.0 - wide, wide)     # exact for z in [1, 2]
    x = _inverse(1.0 - q, q, q >= 0.5)
    x = np.where(q == 0.0, np.inf, np.where((wide < 0.0) | (wide > 2.0), np.nan, x))
    return _like(np.where(upper, -x, x), z)


_erf, _erfc = np.vectorize(math.erf, otypes=[float]), np.vectorize(math.erfc, otypes=[float])


def _inverse(a, q, central):
    """x >= 0 with erf(x) = a, or erfc(x) = q where not `central` (a = 1 - q). Halley's
    method on erf(x) - a, or in the tail on log(erfc(x) / q), which is nearly linear in
    x there, so that the steps converge from 1e-300 to 0.5 alike."""
    with np.errstate(all="ignore"):
        log_term = np.where(central, np.log1p(-a * a), np.log(q * (2.0 - q)))
        half = WINITZKI_OFFSET + 0.5 * log_term
        x = np.sqrt(np.sqrt(half * half - log_term / WINITZKI) - half)
        x = np.where(a < LINEAR_BELOW, a / TWO_OVER_SQRT_PI, x)
        for _ in range(HALLEY_STEPS):
            slope = TWO_OVER_SQRT_PI * np.exp(-x * x)
            # erf: f = erf(x) - a, f' = slope, f'' = -2x f'
            t = (_erf(x) - a) / slope
            central_step = t / (1.0 + x * t)
            # erfc: g = log(erfc(x) / q), g' = -r, g'' = r (2x - r), r = slope / erfc(x)
            tail = _erfc(x)
            g, r = np.log(tail / q), slope / tail
            tail_step = -g / (r - 0.5 * g * (2.0 * x - r))
            x = x - np.where(central, central_step, tail_step)
    return x
