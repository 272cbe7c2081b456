"""How kernel math maps to LLVM intrinsics and the C library on the host.

Functions IEEE 754 defines exactly (sqrt, rounding, fabs, copysign, fmod) are LLVM
intrinsics or instructions. The others are calls to the C library's functions, declared
`nobuiltin` (and without side effects): LLVM would otherwise evaluate a call whose
argument it finds to be constant with its own, more exact, arithmetic, and the same
kernel would give a result an ulp away from what it computes at run time. Where the host
has vector versions of them (`vector_math.py`; `gamma.py` for gamma and lgamma, which the
vector library lacks), the calls are to functions the loop vectorizer turns into those."""
from __future__ import annotations

from kernelkit.compiler.math_lowering import call_intrinsic, call_math_function, lower_math
from kernelkit.ir import types as T
from kernelkit.ir.math_functions import MATH_FUNCTIONS

from .gamma import vectorizable_gamma
from .vector_math import call_vectorizable, vectorizable_fmod


def cpu_math(builder, name: str, args, type: T.ScalarType, vector_library: str = ""):
    """`name(args)` in LLVM IR; `vector_library` (vector_math.py) gives the vectorizable
    versions of the C library's functions, where the host has them."""
    return lower_math(builder, name, args, type,
                      lambda b, n, a, t: _host_math(b, n, a, t, vector_library))


def _host_math(builder, name: str, args, type: T.ScalarType, vector_library: str):
    if name == "fmod":
        return vectorizable_fmod(builder, vector_library, args) or builder.frem(*args)
    if name in ("gamma", "lgamma"):
        vectorizable = vectorizable_gamma(builder, vector_library, name, args)
        if vectorizable is not None:
            return vectorizable
    function = MATH_FUNCTIONS[name]
    if function.exact:
        return call_intrinsic(builder, f"llvm.{name}", args)
    symbol = function.c_name + ("f" if type.bits == 32 else "")
    if type.bits in (32, 64):
        vectorizable = call_vectorizable(builder, vector_library, symbol, args)
        if vectorizable is not None:
            return vectorizable
    result = call_math_function(builder, symbol, args)
    for attribute in ("nobuiltin", "readnone", "nounwind"):
        builder.module.globals[symbol].attributes.add(attribute)
    return result
