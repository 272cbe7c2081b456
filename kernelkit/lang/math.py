"""`kk.sqrt`, `kk.exp` ...: math functions that keep their argument's precision
(a float32 in, a float32 out), like NumPy's. `math.*` works in kernels too, with
Python's rules: it computes in float64 and gives a Python float, which is weak
(`math.sqrt(x) * y` with a float32 `y` is a float32), and `math.floor` gives an int.
On the host these compute with NumPy."""
from __future__ import annotations

import math as _math

import numpy as _np


def _twin(name: str, implementation):
    def function(*args):
        return implementation(*args)
    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"kk.{name}: usable inside kernels and on the host."
    return function


_FROM_NUMPY = {"sqrt": _np.sqrt, "exp": _np.exp, "exp2": _np.exp2, "expm1": _np.expm1,
               "log": _np.log, "log2": _np.log2, "log10": _np.log10, "log1p": _np.log1p,
               "sin": _np.sin, "cos": _np.cos, "tan": _np.tan, "asin": _np.arcsin,
               "acos": _np.arccos, "atan": _np.arctan, "sinh": _np.sinh, "cosh": _np.cosh,
               "tanh": _np.tanh, "asinh": _np.arcsinh, "acosh": _np.arccosh,
               "atanh": _np.arctanh, "fabs": _np.fabs, "floor": _np.floor, "ceil": _np.ceil,
               "trunc": _np.trunc, "rint": _np.rint, "cbrt": _np.cbrt, "isnan": _np.isnan,
               "isinf": _np.isinf, "isfinite": _np.isfinite, "pow": _np.power,
               "atan2": _np.arctan2, "hypot": _np.hypot, "fmod": _np.fmod,
               "copysign": _np.copysign, "fmin": _np.fmin, "fmax": _np.fmax}
_FROM_MATH = {"erf": _math.erf, "erfc": _math.erfc, "gamma": _math.gamma,
              "lgamma": _math.lgamma}

for _name, _implementation in {**_FROM_NUMPY, **_FROM_MATH}.items():
    globals()[_name] = _twin(_name, _implementation)

__all__ = sorted({**_FROM_NUMPY, **_FROM_MATH})
