"""`kk.sqrt`, `kk.exp` ...: math functions that keep their argument's precision
(a float32 in, a float32 out), like NumPy's. `math.*` works in kernels too, with
Python's rules: it computes in float64 and gives a Python float, which is weak
(`math.sqrt(x) * y` with a float32 `y` is a float32), and `math.floor` gives an int.
On the host these compute with NumPy."""
from __future__ import annotations

from ..ir.math_functions import MATH_FUNCTIONS as _FUNCTIONS


def _twin(name: str, implementation):
    def function(*args):
        return implementation(*args)
    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"kk.{name}: usable inside kernels and on the host."
    return function


for _function in _FUNCTIONS.values():
    globals()[_function.name] = _twin(_function.name, _function.host)

__all__ = sorted(_FUNCTIONS)
