"""The helper functions LLVM's code generator calls on the host where the target has no
instruction, and that nothing in a Python process provides: conversions to and from
float16.

LLVM lowers a few IR operations to calls of runtime-library functions ("libcalls",
normally from compiler-rt or libgcc). For the IR kernelkit emits, these are:

- x86-64 with F16C (Haswell and later): `fptrunc double to half` -> `__truncdfhf2`.
  float <-> half are instructions (vcvtps2ph, vcvtph2ps); half arithmetic is done in
  float and rounded back.
- x86-64 without F16C (the baseline `x86-64` CPU): also every float <-> half conversion,
  so every half operation: `__extendhfsf2` and `__truncsfhf2`.
- x86-64 with AVX512-FP16, and AArch64: none (all conversions are instructions).
- Everywhere: `frem` -> `fmod`/`fmodf`, and the C math functions `libc.py` calls, which
  the C library in the process provides. kernelkit emits no 128-bit integers and no
  `llvm.powi`, so `__divti3` and friends and `__powidf2` are never called.

A Python process loads no compiler-rt, and libgcc (when loaded at all) has the half
conversions only from GCC 12 on, so the JIT bound these calls to address 0. This module
compiles its own, written in LLVM IR with integer operations only (so compiling them
never needs a libcall itself), once per process (`native.host_functions` keeps the object
code in the disk cache), and makes them known to the JIT by name. They are compiled by
the same LLVM as the kernels that call them, so they follow the calling convention those
calls use for `half`.

Each conversion rounds to nearest, ties to even, once: double -> float -> half would
round twice, which is wrong where the first rounding lands exactly halfway between two
halves. A NaN stays a NaN of the same sign, quieted, with the top bits of its payload
(what the F16C instructions do)."""
from __future__ import annotations

import functools
from dataclasses import dataclass

from llvmlite import binding as llvm
from llvmlite import ir

from kernelkit.compiler.native import host_functions


@dataclass(frozen=True, slots=True)
class _BinaryFormat:
    """An IEEE binary floating-point format: the field widths of its bit pattern."""
    bits: int
    mantissa_bits: int

    @property
    def exponent_bias(self) -> int:
        return (1 << (self.bits - self.mantissa_bits - 2)) - 1

    @property
    def integer(self) -> ir.IntType:
        return ir.IntType(self.bits)


_HALF = _BinaryFormat(16, 10)
_SINGLE = _BinaryFormat(32, 23)
_DOUBLE = _BinaryFormat(64, 52)


def _round_to_nearest_even(b: ir.IRBuilder, truncated, rest, halfway):
    """`truncated` plus one where the dropped bits `rest` are above `halfway`, or at it
    with `truncated` odd."""
    one = ir.Constant(truncated.type, 1)
    up = b.or_(b.icmp_unsigned(">", rest, halfway),
               b.and_(b.icmp_unsigned("==", rest, halfway),
                      b.trunc(b.and_(truncated, one), ir.IntType(1))))
    return b.add(truncated, b.zext(up, truncated.type))


def _truncate_to_half(b: ir.IRBuilder, bits, source: _BinaryFormat):
    """The float16 bit pattern (i16) nearest to the `source` bit pattern `bits`."""
    def const(value):
        return ir.Constant(source.integer, value)

    drop = source.mantissa_bits - _HALF.mantissa_bits
    rebias = source.exponent_bias - _HALF.exponent_bias
    magnitude = b.and_(bits, const((1 << (source.bits - 1)) - 1))
    sign = b.and_(b.trunc(b.lshr(bits, const(source.bits - 16)), ir.IntType(16)),
                  ir.Constant(ir.IntType(16), 0x8000))
    infinity = const(((1 << (source.bits - source.mantissa_bits - 1)) - 1)
                     << source.mantissa_bits)

    # At least 2**-14, the smallest normal half: drop the low mantissa bits and rebias
    # the exponent. Rounding up may carry into the exponent, up to infinity (65520 and
    # above round to it).
    normal = _round_to_nearest_even(
        b, b.sub(b.lshr(magnitude, const(drop)), const(rebias << _HALF.mantissa_bits)),
        b.and_(magnitude, const((1 << drop) - 1)), const(1 << (drop - 1)))

    # Below 2**-14: a multiple of 2**-24, the significand (with its implicit bit) shifted
    # right by how far the exponent is below. A shift of mantissa_bits + 2 places or more
    # leaves less than half of 2**-24, which rounds to zero; clamping to that (also the
    # shifts below 1 of the other cases, whose result is not used) keeps it in range.
    exponent = b.lshr(magnitude, const(source.mantissa_bits))
    significand = b.or_(b.and_(magnitude, const((1 << source.mantissa_bits) - 1)),
                        const(1 << source.mantissa_bits))
    shift = b.sub(const(source.exponent_bias + source.mantissa_bits - 24), exponent)
    most = source.mantissa_bits + 2
    in_range = b.icmp_unsigned("<", b.sub(shift, const(1)), const(most - 1))
    shift = b.select(in_range, shift, const(most))
    subnormal = _round_to_nearest_even(
        b, b.lshr(significand, shift),
        b.and_(significand, b.sub(b.shl(const(1), shift), const(1))),
        b.shl(const(1), b.sub(shift, const(1))))

    quiet_nan = b.or_(b.and_(b.lshr(magnitude, const(drop)), const(0x1FF)), const(0x7E00))
    result = b.select(b.icmp_unsigned(">=", magnitude, const((rebias + 1) << source.mantissa_bits)),
                      normal, subnormal)
    result = b.select(b.icmp_unsigned(">=", magnitude,
                                      const((source.exponent_bias + 16) << source.mantissa_bits)),
                      const(0x7C00), result)
    result = b.select(b.icmp_unsigned(">", magnitude, infinity), quiet_nan, result)
    return b.or_(b.trunc(result, ir.IntType(16)), sign)


def _extend_half_to_single(b: ir.IRBuilder, bits):
    """The float32 bit pattern (i32) of the float16 bit pattern `bits` (exact)."""
    i16, i32 = ir.IntType(16), ir.IntType(32)
    magnitude = b.zext(b.and_(bits, ir.Constant(i16, 0x7FFF)), i32)
    sign = b.shl(b.zext(b.and_(bits, ir.Constant(i16, 0x8000)), i32), ir.Constant(i32, 16))
    mantissa_shift = ir.Constant(i32, _SINGLE.mantissa_bits - _HALF.mantissa_bits)
    rebias = _SINGLE.exponent_bias - _HALF.exponent_bias

    normal = b.add(b.shl(magnitude, mantissa_shift),
                   ir.Constant(i32, rebias << _SINGLE.mantissa_bits))
    # A subnormal half is its mantissa times 2**-24, which float holds exactly.
    scaled = b.fmul(b.uitofp(magnitude, ir.FloatType()), ir.Constant(ir.FloatType(), 2.0 ** -24))
    subnormal = b.bitcast(scaled, i32)
    infinity_or_nan = b.or_(b.shl(magnitude, mantissa_shift), ir.Constant(i32, 0x7F800000))
    quiet = b.select(b.icmp_unsigned(">", magnitude, ir.Constant(i32, 0x7C00)),
                     ir.Constant(i32, 0x00400000), ir.Constant(i32, 0))
    result = b.select(b.icmp_unsigned("<", magnitude, ir.Constant(i32, 0x0400)), subnormal, normal)
    result = b.select(b.icmp_unsigned(">=", magnitude, ir.Constant(i32, 0x7C00)),
                      b.or_(infinity_or_nan, quiet), result)
    return b.or_(result, sign)


def _define(module: ir.Module, name: str, result: ir.Type, argument: ir.Type, body) -> None:
    function = ir.Function(module, ir.FunctionType(result, [argument]), name)
    function.attributes.add("nounwind")
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    builder.ret(body(builder, function.args[0]))


PROVIDED = frozenset({"__truncdfhf2", "__truncsfhf2", "__extendhfsf2"})
"""The names the library defines: object code that needs none of them is loaded without
it (it costs a compile, or a load from the disk cache, at a process's first kernel)."""


def _library_ir() -> str:
    half, single, double = ir.HalfType(), ir.FloatType(), ir.DoubleType()
    module = ir.Module("kernelkit_runtime_library")
    _define(module, "__truncdfhf2", half, double, lambda b, x: b.bitcast(
        _truncate_to_half(b, b.bitcast(x, _DOUBLE.integer), _DOUBLE), half))
    _define(module, "__truncsfhf2", half, single, lambda b, x: b.bitcast(
        _truncate_to_half(b, b.bitcast(x, _SINGLE.integer), _SINGLE), half))
    _define(module, "__extendhfsf2", single, half, lambda b, x: b.bitcast(
        _extend_half_to_single(b, b.bitcast(x, _HALF.integer)), single))
    return str(module)


@functools.lru_cache(maxsize=1)
def runtime_library() -> dict[str, int]:
    """{symbol: address} of the helpers, compiled (or loaded) once per process and
    registered with LLVM, so that object code the JIT loads afterwards finds them."""
    addresses = host_functions(_library_ir(), {})
    for name, address in addresses.items():
        llvm.add_symbol(name, address)
    return addresses
