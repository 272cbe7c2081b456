"""The math functions kernels can call: the one table the frontend, the constant folder,
the IR's operation definitions and the CPU and CUDA lowerings derive what they need from.

Each function is an IR operation of its own (`math.sqrt`). `exact` marks those IEEE 754
defines exactly (correctly rounded, or exact), so NumPy, the C library and libdevice
agree on every argument: they are folded on constants and lowered to LLVM intrinsics or
instructions. The others (exp, sin, pow ...) differ by an ulp between NumPy, the host's
C library and libdevice, so they are left to run time: a kernel gives the same answer
whether its argument is a constant or not."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np


def _fmin(first, second):
    """The first argument unless the second is smaller or the first is NaN: NumPy's
    rule, with +0.0 and -0.0 settled as the kernels compute it (NumPy's own choice
    between them differs from one dtype to another)."""
    return first if first <= second or np.isnan(second) else second


def _fmax(first, second):
    return first if first >= second or np.isnan(second) else second


@dataclass(frozen=True, slots=True)
class MathFunction:
    name: str                 # as kernels spell it: kk.<name>, math.<name>, IR `math.<name>`
    arity: int
    host: Callable            # NumPy's (or Python's) implementation, for host code
    exact: bool = False       # defined exactly by IEEE 754: folded, an LLVM intrinsic
    predicate: bool = False   # gives a bool (isnan ...)
    library_name: str = ""    # the C library's / libdevice's base name, if not `name`

    @property
    def c_name(self) -> str:
        return self.library_name or self.name


def _functions(*entries: MathFunction) -> dict[str, MathFunction]:
    return {entry.name: entry for entry in entries}


MATH_FUNCTIONS: dict[str, MathFunction] = _functions(
    MathFunction("sqrt", 1, np.sqrt, exact=True),
    MathFunction("exp", 1, np.exp),
    MathFunction("exp2", 1, np.exp2),
    MathFunction("expm1", 1, np.expm1),
    MathFunction("log", 1, np.log),
    MathFunction("log2", 1, np.log2),
    MathFunction("log10", 1, np.log10),
    MathFunction("log1p", 1, np.log1p),
    MathFunction("sin", 1, np.sin),
    MathFunction("cos", 1, np.cos),
    MathFunction("tan", 1, np.tan),
    MathFunction("asin", 1, np.arcsin),
    MathFunction("acos", 1, np.arccos),
    MathFunction("atan", 1, np.arctan),
    MathFunction("sinh", 1, np.sinh),
    MathFunction("cosh", 1, np.cosh),
    MathFunction("tanh", 1, np.tanh),
    MathFunction("asinh", 1, np.arcsinh),
    MathFunction("acosh", 1, np.arccosh),
    MathFunction("atanh", 1, np.arctanh),
    MathFunction("fabs", 1, np.fabs, exact=True),
    MathFunction("floor", 1, np.floor, exact=True),
    MathFunction("ceil", 1, np.ceil, exact=True),
    MathFunction("trunc", 1, np.trunc, exact=True),
    MathFunction("rint", 1, np.rint, exact=True),
    MathFunction("erf", 1, math.erf),
    MathFunction("erfc", 1, math.erfc),
    MathFunction("gamma", 1, math.gamma, library_name="tgamma"),
    MathFunction("lgamma", 1, math.lgamma),
    MathFunction("cbrt", 1, np.cbrt),
    MathFunction("isnan", 1, np.isnan, exact=True, predicate=True),
    MathFunction("isinf", 1, np.isinf, exact=True, predicate=True),
    MathFunction("isfinite", 1, np.isfinite, exact=True, predicate=True),
    MathFunction("pow", 2, np.power),
    MathFunction("atan2", 2, np.arctan2),
    MathFunction("hypot", 2, np.hypot),
    MathFunction("fmod", 2, np.fmod, exact=True),
    MathFunction("copysign", 2, np.copysign, exact=True),
    MathFunction("fmin", 2, np.fmin, exact=True),
    MathFunction("fmax", 2, np.fmax, exact=True),
)

# How the folder evaluates the exact functions: as compiled kernels compute them.
EXACT_EVALUATION: dict[str, Callable] = {
    **{f.name: f.host for f in MATH_FUNCTIONS.values() if f.exact},
    "fmin": _fmin, "fmax": _fmax,
}
