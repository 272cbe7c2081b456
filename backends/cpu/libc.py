"""How kernel math and `kk.print` map to LLVM intrinsics and the C library on the host."""
from __future__ import annotations

from llvmlite import ir

from kernelkit.compiler.lowering import call_intrinsic, i1, i64, llvm_type
from kernelkit.ir import types as T

# Math functions LLVM knows as intrinsics; the others are C library calls.
_INTRINSICS = {"sqrt", "exp", "exp2", "log", "log2", "log10", "sin", "cos", "fabs", "floor",
               "ceil", "trunc", "rint", "pow", "copysign"}
_LIBM = {"expm1": "expm1", "log1p": "log1p", "tan": "tan", "asin": "asin", "acos": "acos",
         "atan": "atan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "asinh": "asinh",
         "acosh": "acosh", "atanh": "atanh", "erf": "erf", "erfc": "erfc", "gamma": "tgamma",
         "lgamma": "lgamma", "cbrt": "cbrt", "atan2": "atan2", "hypot": "hypot"}


def printf_arguments(builder, format: str, values, string):
    """Turn a kernel print format ('{}' per value) into a printf format and arguments."""
    pieces = format.replace("%", "%%").split("{}")
    pieces = [p.replace("{{", "{").replace("}}", "}") for p in pieces]
    text = pieces[0]
    args = []
    for (value, type), piece in zip(values, pieces[1:]):
        if type.is_bool:
            text += "%s"
            args.append(builder.select(value, string("True"), string("False")))
        elif type.is_float:
            text += "%g"
            args.append(value if type.bits == 64 else builder.fpext(value, ir.DoubleType()))
        elif type.is_signed:
            text += "%lld"
            args.append(value if type.bits == 64 else builder.sext(value, i64))
        else:
            text += "%llu"
            args.append(value if type.bits == 64 else builder.zext(value, i64))
        text += piece
    return text, args


def cpu_math(builder, name: str, args, type: T.ScalarType):
    if type.bits == 16:
        single = ir.FloatType()
        widened = [builder.fpext(a, single) for a in args]
        result = cpu_math(builder, name, widened, T.float32)
        return result if result.type == i1 else builder.fptrunc(result, llvm_type(type))
    (x, *rest) = args
    if name == "isnan":
        return builder.fcmp_unordered("uno", x, x)
    if name in ("isinf", "isfinite"):
        magnitude = call_intrinsic(builder, "llvm.fabs", [x])
        infinity = ir.Constant(x.type, float("inf"))
        if name == "isinf":
            return builder.fcmp_ordered("==", magnitude, infinity)
        return builder.fcmp_ordered("<", magnitude, infinity)
    if name == "fmod":
        return builder.frem(x, rest[0])
    if name in ("fmin", "fmax"):
        return call_intrinsic(builder, "llvm.minnum" if name == "fmin" else "llvm.maxnum", args)
    if name in _INTRINSICS:
        return call_intrinsic(builder, f"llvm.{name}", args)
    symbol = _LIBM[name] + ("f" if type.bits == 32 else "")
    function = builder.module.globals.get(symbol)
    if function is None:
        function = ir.Function(builder.module, ir.FunctionType(x.type, [x.type] * len(args)),
                               symbol)
    return builder.call(function, args)
