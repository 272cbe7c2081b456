"""How kernel math maps to LLVM intrinsics and the C library on the host.

Functions IEEE 754 defines exactly (sqrt, rounding, fabs, copysign, fmod) are LLVM
intrinsics or instructions. The others are calls to the C library's functions, declared
`nobuiltin` (and without side effects): LLVM would otherwise evaluate a call whose
argument it finds to be constant with its own, more exact, arithmetic, and the same
kernel would give a result an ulp away from what it computes at run time."""
from __future__ import annotations

from kernelkit.compiler.lowering import call_intrinsic, call_math_function, lower_math
from kernelkit.ir import types as T

_EXACT_INTRINSICS = {"sqrt", "fabs", "floor", "ceil", "trunc", "rint", "copysign"}
_LIBM = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "log10": "log10",
         "sin": "sin", "cos": "cos", "pow": "pow", "expm1": "expm1", "log1p": "log1p",
         "tan": "tan", "asin": "asin", "acos": "acos", "atan": "atan", "sinh": "sinh",
         "cosh": "cosh", "tanh": "tanh", "asinh": "asinh", "acosh": "acosh",
         "atanh": "atanh", "erf": "erf", "erfc": "erfc", "gamma": "tgamma",
         "lgamma": "lgamma", "cbrt": "cbrt", "atan2": "atan2", "hypot": "hypot"}


def cpu_math(builder, name: str, args, type: T.ScalarType):
    return lower_math(builder, name, args, type, _host_math)


def _host_math(builder, name: str, args, type: T.ScalarType):
    if name == "fmod":
        return builder.frem(*args)
    if name in _EXACT_INTRINSICS:
        return call_intrinsic(builder, f"llvm.{name}", args)
    symbol = _LIBM[name] + ("f" if type.bits == 32 else "")
    result = call_math_function(builder, symbol, args)
    for attribute in ("nobuiltin", "readnone", "nounwind"):
        builder.module.globals[symbol].attributes.add(attribute)
    return result
