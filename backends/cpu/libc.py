"""How kernel math maps to LLVM intrinsics and the C library on the host."""
from __future__ import annotations

from kernelkit.compiler.lowering import call_intrinsic, call_math_function, lower_math
from kernelkit.ir import types as T

# Math functions LLVM knows as intrinsics; the others are C library calls.
_INTRINSICS = {"sqrt", "exp", "exp2", "log", "log2", "log10", "sin", "cos", "fabs", "floor",
               "ceil", "trunc", "rint", "pow", "copysign"}
_LIBM = {"expm1": "expm1", "log1p": "log1p", "tan": "tan", "asin": "asin", "acos": "acos",
         "atan": "atan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "asinh": "asinh",
         "acosh": "acosh", "atanh": "atanh", "erf": "erf", "erfc": "erfc", "gamma": "tgamma",
         "lgamma": "lgamma", "cbrt": "cbrt", "atan2": "atan2", "hypot": "hypot"}


def cpu_math(builder, name: str, args, type: T.ScalarType):
    return lower_math(builder, name, args, type, _host_math)


def _host_math(builder, name: str, args, type: T.ScalarType):
    if name == "fmod":
        return builder.frem(*args)
    if name in _INTRINSICS:
        return call_intrinsic(builder, f"llvm.{name}", args)
    return call_math_function(builder, _LIBM[name] + ("f" if type.bits == 32 else ""), args)
