"""How kernel math maps to LLVM intrinsics and the C library on the host.

Functions IEEE 754 defines exactly (sqrt, rounding, fabs, copysign, fmod) are LLVM
intrinsics or instructions. The others are calls to the C library's functions, declared
`nobuiltin` (and without side effects): LLVM would otherwise evaluate a call whose
argument it finds to be constant with its own, more exact, arithmetic, and the same
kernel would give a result an ulp away from what it computes at run time."""
from __future__ import annotations

from kernelkit.compiler.math_lowering import call_intrinsic, call_math_function, lower_math
from kernelkit.ir import types as T
from kernelkit.ir.math_functions import MATH_FUNCTIONS


def cpu_math(builder, name: str, args, type: T.ScalarType):
    return lower_math(builder, name, args, type, _host_math)


def _host_math(builder, name: str, args, type: T.ScalarType):
    if name == "fmod":
        return builder.frem(*args)
    function = MATH_FUNCTIONS[name]
    if function.exact:
        return call_intrinsic(builder, f"llvm.{name}", args)
    symbol = function.c_name + ("f" if type.bits == 32 else "")
    result = call_math_function(builder, symbol, args)
    for attribute in ("nobuiltin", "readnone", "nounwind"):
        builder.module.globals[symbol].attributes.add(attribute)
    return result
