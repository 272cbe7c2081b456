"""Kernel math in LLVM: what every target lowers alike (`lower_math`: float16 through
float32, isnan/isinf/isfinite, fmin/fmax), which sines and cosines are computed together
(`shared_sincos_arguments`), and declaring and calling LLVM intrinsics (`call_intrinsic`)
and library functions (`call_math_function`). Which library a target calls for the rest
(the C library, libdevice) is the target's."""
from __future__ import annotations

from llvmlite import ir

from ..analysis.dominance import block_dominators, dominates
from ..ir import types as T
from ..ir.definitions import Trait
from ..ir.function import Function
from .llvm_types import declared, i1, llvm_type

SINCOS = ("sin", "cos")
"""The functions a `sincos` computes, in the order of its result's fields."""


def shared_sincos_arguments(function: Function) -> frozenset:
    """The values `function` takes both the sine and the cosine of, where one of the two
    dominates the other: each such pair is lowered as one `sincos` (the environment's),
    whose argument reduction, the costly part of both, is made once. The derivative of
    `sin(x) * x` is one: it reads sin(x) and cos(x). A pair on two sides of a branch is
    left to two functions, so that no side computes what it does not use."""
    blocks: dict = {}                    # argument -> {"sin": [block], "cos": [block]}
    for block in function.reachable_blocks():
        for op in block.ops:
            if op.has(Trait.MATH) and op.definition.member.name in SINCOS:
                sides = blocks.setdefault(op.operands[0], {name: [] for name in SINCOS})
                sides[op.definition.member.name].append(block)
    paired = {x: sides for x, sides in blocks.items() if all(sides.values())}
    if not paired:
        return frozenset()
    idom = block_dominators(function)
    return frozenset(x for x, sides in paired.items()
                     if any(dominates(idom, a, b) or dominates(idom, b, a)
                            for a in sides["sin"] for b in sides["cos"]))


def lower_sincos(builder: ir.IRBuilder, x: ir.Value, type: T.ScalarType, library) -> ir.Value:
    """`{sin(x), cos(x)}`: float16 through float32; `library(builder, x)` computes the
    float32 and float64 ones."""
    if type.bits != 16:
        return library(builder, x)
    both = library(builder, builder.fpext(x, ir.FloatType()))
    half = llvm_type(type)
    result = ir.Constant(ir.LiteralStructType([half, half]), ir.Undefined)
    for index in range(len(SINCOS)):
        result = builder.insert_value(
            result, narrow_float(builder, builder.extract_value(both, index), half), index)
    return result


def lower_math(builder: ir.IRBuilder, name: str, args: list, type: T.ScalarType, library):
    """Math every target lowers alike (float16 through float32, isnan/isinf/isfinite,
    fmin/fmax); `library(builder, name, args, type)` lowers the rest."""
    if type.bits == 16:
        single = ir.FloatType()
        widened = [builder.fpext(a, single) for a in args]
        result = lower_math(builder, name, widened, T.float32, library)
        return result if result.type == i1 else narrow_float(builder, result, llvm_type(type))
    x = args[0]
    if name == "isnan":
        return builder.fcmp_unordered("uno", x, x)
    if name in ("isinf", "isfinite"):
        magnitude = call_intrinsic(builder, "llvm.fabs", [x])
        infinity = ir.Constant(x.type, float("inf"))
        return builder.fcmp_ordered("==" if name == "isinf" else "<", magnitude, infinity)
    if name in ("fmin", "fmax"):
        # NumPy's rule, with no choice left open between +0.0 and -0.0 (LLVM's minnum
        # leaves it, so the folded and the computed result could differ): the first
        # argument unless the second is smaller (larger) or the first is NaN.
        first, second = args
        keeps = builder.fcmp_ordered("<=" if name == "fmin" else ">=", first, second)
        keeps = builder.or_(keeps, builder.fcmp_unordered("uno", second, second))
        return builder.select(keeps, first, second)
    return library(builder, name, args, type)


_BITS = {"half": 16, "float": 32, "double": 64}
_MANTISSA_BITS = {16: 10, 32: 23, 64: 52}


def narrow_float(builder: ir.IRBuilder, value: ir.Value, to: ir.Type) -> ir.Value:
    """`value` rounded to the narrower float type `to`, a NaN staying a NaN of the same
    sign with the top bits of its payload, as NumPy's `astype` gives it (where PTX's
    `cvt` to f16 returns its one canonical NaN): to float16 by NumPy's own rule (the
    payload's top bits, 1 where they are all 0), to float32 by x86's (quieted)."""
    narrowed = builder.fptrunc(value, to)
    wide, narrow = _BITS[str(value.type)], _BITS[str(to)]
    source, target = ir.IntType(wide), ir.IntType(narrow)
    mantissa = _MANTISSA_BITS[narrow]

    def constant(number):
        return ir.Constant(target, number)

    bits = builder.bitcast(value, source)
    sign = builder.and_(builder.trunc(builder.lshr(bits, ir.Constant(source, wide - narrow)),
                                      target), constant(1 << (narrow - 1)))
    drop = ir.Constant(source, _MANTISSA_BITS[wide] - mantissa)
    payload = builder.and_(builder.trunc(builder.lshr(bits, drop), target),
                           constant((1 << mantissa) - 1))
    exponent = ((1 << (narrow - mantissa - 1)) - 1) << mantissa
    if narrow == 16:
        payload = builder.select(builder.icmp_unsigned("==", payload, constant(0)),
                                 constant(1), payload)
    else:
        payload = builder.or_(payload, constant(1 << (mantissa - 1)))
    nan = builder.or_(builder.or_(sign, payload), constant(exponent))
    return builder.select(builder.fcmp_unordered("uno", value, value),
                          builder.bitcast(nan, to), narrowed)


def call_math_function(builder: ir.IRBuilder, symbol: str, args: list) -> ir.Value:
    """Call `symbol(args...)`, declaring it (all arguments and the result of one type)."""
    type = args[0].type
    return builder.call(declared(builder.module, symbol, type, [type] * len(args)), args)


def call_intrinsic(builder: ir.IRBuilder, name: str, args: list[ir.Value],
                   return_type: ir.Type | None = None) -> ir.Value:
    """Call the LLVM intrinsic `name`, overloaded on the result's type (where
    `return_type` is given) and the first argument's, declaring it once per module."""
    module = builder.module
    types = [a.type for a in args]
    suffix_types = ([return_type] if return_type is not None else []) + [types[0]]
    full_name = name + "".join("." + _mangle(t) for t in suffix_types)
    return builder.call(declared(module, full_name, return_type or types[0], types), args)


def _mangle(type: ir.Type) -> str:
    if isinstance(type, ir.IntType):
        return f"i{type.width}"
    if isinstance(type, ir.VectorType):
        return f"v{type.count}{_mangle(type.element)}"
    return {"half": "f16", "float": "f32", "double": "f64"}[str(type)]
