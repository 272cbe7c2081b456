"""libdevice on the host: NVIDIA's math library for CUDA kernels (LLVM bitcode, from the
nvidia-nvvm wheel), compiled for this machine, so that what its functions compute on a
GPU can be computed, and measured, where there is none (`tools/cuda_math_error.py`).

`LibdeviceOnHost(symbols)` keeps the functions asked for and what they call, folds
`__nvvm_reflect` as kernelkit's CUDA builds fold it (`libdevice_for`), and replaces what
only a GPU has, or what a GPU computes otherwise than the host:

- each NVVM intrinsic declaration, by a host function of the same type (`INTRINSICS`);
- each call of inline PTX assembly, by a call of one (`INLINE_ASSEMBLY`);
- each shift by a variable amount, by one that clamps the amount as PTX does (LLVM calls
  a shift by the width or more poison, x86 shifts by the amount modulo the width, and
  libdevice's `pow` asks whether a huge exponent is odd with such a shift).

The host functions compute:

- exactly, bit for bit: the arithmetic in every rounding mode (the directed ones through
  float64 and an exact TwoSum), the conversions to integers (rounded, saturated, NaN to
  0), moving words in and out of doubles, and multi-word integer arithmetic;
- correctly rounded, in place of the approximate instructions (`ex2.approx`,
  `lg2.approx`, `rcp.approx`, `rsqrt.approx`, `sqrt.approx`, `div.approx`), which the
  hardware computes to within a documented error but whose bits cannot be reproduced
  here: the float32 ones in float64, rounded once; `rcp.approx.f64` as 1 / x;
  `rsqrt.approx.f64` as 1 / sqrt(x) in float64 (within an ulp). A function that reaches
  one (`approximations_reached`) can give other results on a GPU;
  `LibdeviceOnHost(..., perturbation=...)` says how much that can matter.

Variants with `.ftz` flush subnormal arguments and results to zeros of their sign. An
intrinsic or assembly string without an emulation is an error naming it, so a new
libdevice cannot be measured with something silently wrong.

This module knows libdevice and LLVM; it knows nothing of kernelkit's math functions."""
from __future__ import annotations

import ctypes
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir

from backends.cuda.libdevice import libdevice_bitcode
from kernelkit.compiler.llvm_types import i32, i64, ptr
from kernelkit.compiler.math_lowering import call_intrinsic
from kernelkit.compiler.native import host_functions

f32, f64 = ir.FloatType(), ir.DoubleType()
DEFAULT_ARCH = "sm_90"


@dataclass(frozen=True, slots=True)
class Emulation:
    """How the host computes what a GPU instruction computes. `ptx` is the instruction
    (as LLVM's NVPTX back end emits it for the intrinsic, or as the inline assembly
    writes it); `approximate`: the GPU's result is within a documented error of the exact
    one, and the host returns the correctly rounded value instead."""

    ptx: str
    build: Callable          # (builder, args) -> the result, in the instruction's types
    approximate: bool = False


def _fabs(b, x):
    return call_intrinsic(b, "llvm.fabs", [x])


def _signed_zero(b, like):
    return call_intrinsic(b, "llvm.copysign", [ir.Constant(like.type, 0.0), like])


def _flush_subnormal(b, x):
    """`x`, or a zero of its sign where it is subnormal (what `.ftz` does)."""
    smallest_normal = float(np.finfo(np.float32 if x.type == f32 else np.float64).tiny)
    tiny = b.fcmp_ordered("<", _fabs(b, x), ir.Constant(x.type, smallest_normal))
    return b.select(tiny, _signed_zero(b, x), x)


def _float_bits(b, x):
    return b.bitcast(x, ir.IntType(32 if x.type == f32 else 64))


def _fma_f32_directed(b, x, y, z, rounding: str):
    """fma(x, y, z) rounded once to float32 toward -inf (`rm`), +inf (`rp`) or zero
    (`rz`). In float64 the product is exact and TwoSum gives the sum exactly as
    total + error; the float32 nearest to the total, `nearest`, is within one float32 ulp
    of the exact value, and the sign of (exact - nearest), exact in float64 too, says
    whether the directed result is `nearest` or its neighbour."""
    xd, yd, zd = (b.fpext(v, f64) for v in (x, y, z))
    product = b.fmul(xd, yd)
    total = b.fadd(product, zd)
    z_part = b.fsub(total, product)
    error = b.fadd(b.fsub(product, b.fsub(total, z_part)), b.fsub(zd, z_part))
    nearest = b.fptrunc(total, f32)
    residual = b.fadd(b.fsub(total, b.fpext(nearest, f64)), error)  # sign of exact - nearest
    zero = ir.Constant(f64, 0.0)
    below = b.fcmp_ordered("<", residual, zero)
    above = b.fcmp_ordered(">", residual, zero)
    bits = _float_bits(b, nearest)
    negative = b.icmp_signed("<", bits, ir.Constant(i32, 0))
    is_zero = b.fcmp_ordered("==", nearest, ir.Constant(f32, 0.0))
    one = ir.Constant(i32, 1)
    smaller_magnitude, larger_magnitude = b.sub(bits, one), b.add(bits, one)
    if rounding == "rz":
        step = b.select(negative, above, below)
        result = b.select(step, smaller_magnitude, bits)
    elif rounding == "rm":
        down = b.select(is_zero, ir.Constant(i32, 0x80000001),
                        b.select(negative, larger_magnitude, smaller_magnitude))
        result = b.select(below, down, bits)
        # an exact zero sum of operands not both +0 is -0 when rounding down
        exact_zero = b.and_(is_zero, b.fcmp_ordered("==", residual, zero))
        both_plus_zero = b.icmp_unsigned("==", b.or_(_float_bits(b, product), _float_bits(b, zd)),
                                         ir.Constant(i64, 0))
        minus_zero = b.and_(exact_zero, b.not_(both_plus_zero))
        result = b.select(minus_zero, ir.Constant(i32, 0x80000000), result)
    else:
        assert rounding == "rp", rounding
        up = b.select(is_zero, one, b.select(negative, smaller_magnitude, larger_magnitude))
        result = b.select(above, up, bits)
    return b.bitcast(result, f32)


def _through_float64(function):
    """A float32 function computed in float64 and rounded once (correctly rounded, but
    where the float64 result's own error straddles a float32 rounding boundary)."""
    def build(b, args):
        return b.fptrunc(function(b, [b.fpext(a, f64) for a in args]), f32)
    return build


def _reciprocal(b, args):
    return b.fdiv(ir.Constant(args[0].type, 1.0), args[0])


def _reciprocal_sqrt(b, args):
    return b.fdiv(ir.Constant(args[0].type, 1.0), call_intrinsic(b, "llvm.sqrt", args))


def _saturate(b, args):
    """cvt.sat: clamped to [+0, 1], NaN to +0."""
    x = args[0]
    below_one = b.select(b.fcmp_ordered("<", x, ir.Constant(x.type, 1.0)), x,
                         ir.Constant(x.type, 1.0))
    return b.select(b.fcmp_ordered(">", x, ir.Constant(x.type, 0.0)), below_one,
                    ir.Constant(x.type, 0.0))


def _divide_approximately(b, args):
    """div.approx.f32 computes x * (1 / y): 0 (NaN for an infinite x) where |y| > 2**126."""
    x, y = args
    huge = b.fcmp_ordered(">", _fabs(b, y), ir.Constant(f32, 2.0 ** 126))
    return b.select(huge, b.fmul(x, _signed_zero(b, y)), b.fdiv(x, y))


def _to_integer(bits: int, signed: bool, nearest: bool):
    """cvt.rni/rzi to an integer: saturated to its range, NaN to 0."""
    def build(b, args):
        x = call_intrinsic(b, "llvm.roundeven", args) if nearest else args[0]
        return call_intrinsic(b, "llvm.fptosi.sat" if signed else "llvm.fptoui.sat", [x],
                              return_type=ir.IntType(bits))
    return build


def _double_half(high: bool):
    def build(b, args):
        bits = _float_bits(b, args[0])
        if high:
            bits = b.lshr(bits, ir.Constant(i64, 32))
        return b.trunc(bits, i32)
    return build


def _double_from_halves(b, args):
    low, high = (b.zext(a, i64) for a in args)
    return b.bitcast(b.or_(low, b.shl(high, ir.Constant(i64, 32))), f64)


def _intrinsic(name: str):
    return lambda b, args: call_intrinsic(b, name, args)


# The NVVM intrinsics libdevice's math functions call, by name without `llvm.nvvm.` and
# without `.ftz`: each `.ftz` variant is its plain one with subnormal arguments and
# results flushed to zeros of their sign.
INTRINSICS: dict[str, Emulation] = {
    "add.rn.f": Emulation("add.rn.f32", lambda b, a: b.fadd(*a)),
    "add.rn.d": Emulation("add.rn.f64", lambda b, a: b.fadd(*a)),
    "add.rz.f": Emulation("add.rz.f32", lambda b, a: _fma_f32_directed(
        b, a[0], ir.Constant(f32, 1.0), a[1], "rz")),
    "mul.rn.f": Emulation("mul.rn.f32", lambda b, a: b.fmul(*a)),
    "mul.rn.d": Emulation("mul.rn.f64", lambda b, a: b.fmul(*a)),
    "div.rn.f": Emulation("div.rn.f32", lambda b, a: b.fdiv(*a)),
    "fma.rn.f": Emulation("fma.rn.f32", _intrinsic("llvm.fma")),
    "fma.rn.d": Emulation("fma.rn.f64", _intrinsic("llvm.fma")),
    "fma.rm.f": Emulation("fma.rm.f32", lambda b, a: _fma_f32_directed(b, *a, "rm")),
    "fma.rp.f": Emulation("fma.rp.f32", lambda b, a: _fma_f32_directed(b, *a, "rp")),
    "fma.rz.f": Emulation("fma.rz.f32", lambda b, a: _fma_f32_directed(b, *a, "rz")),
    "sqrt.rn.f": Emulation("sqrt.rn.f32", _intrinsic("llvm.sqrt")),
    "sqrt.rn.d": Emulation("sqrt.rn.f64", _intrinsic("llvm.sqrt")),
    "fabs.f32": Emulation("abs.f32", _intrinsic("llvm.fabs")),
    "fabs.f64": Emulation("abs.f64", _intrinsic("llvm.fabs")),
    "floor.f": Emulation("cvt.rmi.f32.f32", _intrinsic("llvm.floor")),
    "floor.d": Emulation("cvt.rmi.f64.f64", _intrinsic("llvm.floor")),
    "trunc.f": Emulation("cvt.rzi.f32.f32", _intrinsic("llvm.trunc")),
    "trunc.d": Emulation("cvt.rzi.f64.f64", _intrinsic("llvm.trunc")),
    "round.f": Emulation("cvt.rni.f32.f32", _intrinsic("llvm.roundeven")),
    "round.d": Emulation("cvt.rni.f64.f64", _intrinsic("llvm.roundeven")),
    "saturate.f": Emulation("cvt.sat.f32.f32", _saturate),
    "fmin.d": Emulation("min.f64", _intrinsic("llvm.minimumnum")),
    "d2i.hi": Emulation("mov.b64", _double_half(high=True)),
    "d2i.lo": Emulation("mov.b64", _double_half(high=False)),
    "lohi.i2d": Emulation("mov.b64", _double_from_halves),
    "d2i.rn": Emulation("cvt.rni.s32.f64", _to_integer(32, signed=True, nearest=True)),
    "d2ll.rz": Emulation("cvt.rzi.s64.f64", _to_integer(64, signed=True, nearest=False)),
    "f2i.rn": Emulation("cvt.rni.s32.f32", _to_integer(32, signed=True, nearest=True)),
    "f2i.rz": Emulation("cvt.rzi.s32.f32", _to_integer(32, signed=True, nearest=False)),
    "f2ui.rz": Emulation("cvt.rzi.u32.f32", _to_integer(32, signed=False, nearest=False)),
    "ex2.approx.f32": Emulation("ex2.approx.f32", _through_float64(_intrinsic("llvm.exp2")),
                                approximate=True),
    "lg2.approx.f": Emulation("lg2.approx.f32", _through_float64(_intrinsic("llvm.log2")),
                              approximate=True),
    "rcp.approx.d": Emulation("rcp.approx.f64", _reciprocal, approximate=True),
    "rsqrt.approx.f": Emulation("rsqrt.approx.f32", _through_float64(_reciprocal_sqrt),
                                approximate=True),
    "sqrt.approx.f": Emulation("sqrt.approx.f32", _intrinsic("llvm.sqrt"), approximate=True),
    "div.approx.f": Emulation("div.approx.f32", _divide_approximately, approximate=True),
}


def _wide_integers(operation: str, width: int):
    """Multi-word integer arithmetic written in PTX with carries: the 64-bit (`mad`, from
    32-bit words) or 128-bit (from 64-bit words) result of a + b, a - b, a * b or
    a * b + c, returned as its low and high words."""
    def build(b, args):
        wide = ir.IntType(2 * width)
        words = [b.zext(a, wide) for a in args]
        if operation in ("add", "sub"):   # two numbers of two words each
            shift = ir.Constant(wide, width)
            first = b.or_(words[0], b.shl(words[1], shift))
            second = b.or_(words[2], b.shl(words[3], shift))
            total = b.add(first, second) if operation == "add" else b.sub(first, second)
        else:
            total = b.mul(words[0], words[1])
            if operation == "mad":
                total = b.add(total, words[2])
        low = b.trunc(total, ir.IntType(width))
        high = b.trunc(b.lshr(total, ir.Constant(wide, width)), ir.IntType(width))
        pair = ir.Constant(ir.LiteralStructType([ir.IntType(width)] * 2), ir.Undefined)
        return b.insert_value(b.insert_value(pair, low, 0), high, 1)
    return build


# libdevice's inline assembly, by its instructions (`_asm_instructions`).
INLINE_ASSEMBLY: dict[str, Emulation] = {
    "rcp.approx.ftz.f32 $0, $1;": Emulation("rcp.approx.ftz.f32", _reciprocal, approximate=True),
    "rsqrt.approx.ftz.f64 $0, $1;": Emulation("rsqrt.approx.ftz.f64", _reciprocal_sqrt,
                                              approximate=True),
    "sub.rn.f32 $0, $1, $2;": Emulation("sub.rn.f32", lambda b, a: b.fsub(*a)),
    "sub.rn.ftz.f32 $0, $1, $2;": Emulation("sub.rn.ftz.f32", lambda b, a: b.fsub(*a)),
    "setp.equ.f64 __$$temp3, $1, $2; selp.f64 $0, $3, $4, __$$temp3;": Emulation(
        "setp.equ.f64; selp.f64",
        lambda b, a: b.select(b.fcmp_unordered("==", a[0], a[1]), a[2], a[3])),
    "mad.lo.cc.u32 $0, $2, $3, $4; madc.hi.u32 $1, $2, $3, 0;": Emulation(
        "mad.lo.cc.u32; madc.hi.u32", _wide_integers("mad", 32)),
    "add.cc.u32 r0, a0, b0; addc.cc.u32 r1, a1, b1; addc.cc.u32 r2, a2, b2; "
    "addc.u32 r3, a3, b3;": Emulation("add.cc.u32; addc.u32 (128 bits)", _wide_integers("add", 64)),
    "sub.cc.u32 r0, a0, b0; subc.cc.u32 r1, a1, b1; subc.cc.u32 r2, a2, b2; "
    "subc.u32 r3, a3, b3;": Emulation("sub.cc.u32; subc.u32 (128 bits)", _wide_integers("sub", 64)),
    "mul.lo.u32 r0, alo, blo; mul.hi.u32 r1, alo, blo; mad.lo.cc.u32 r1, alo, bhi, r1; "
    "madc.hi.u32 r2, alo, bhi, 0; mad.lo.cc.u32 r1, ahi, blo, r1; "
    "madc.hi.cc.u32 r2, ahi, blo, r2; madc.hi.u32 r3, ahi, bhi, 0; "
    "mad.lo.cc.u32 r2, ahi, bhi, r2; addc.u32 r3, r3, 0;": Emulation(
        "mul/mad.lo/hi.cc.u32 (64 x 64 to 128 bits)", _wide_integers("mul", 64)),
    "mad.lo.cc.u32 r0, alo, blo, clo; madc.hi.cc.u32 r1, alo, blo, chi; "
    "madc.hi.u32 r2, alo, bhi, 0; mad.lo.cc.u32 r1, alo, bhi, r1; "
    "madc.hi.cc.u32 r2, ahi, blo, r2; madc.hi.u32 r3, ahi, bhi, 0; "
    "mad.lo.cc.u32 r1, ahi, blo, r1; madc.lo.cc.u32 r2, ahi, bhi, r2; "
    "addc.u32 r3, r3, 0;": Emulation(
        "mad.lo/hi.cc.u32 (64 x 64 + 64 to 128 bits)", _wide_integers("mad", 64)),
}


def _ptx_shift(operation: str):
    """A shift by a variable amount as PTX does it: amounts of the width and above give
    0 (`shl`, `lshr`) or the sign in every bit (`ashr`), where LLVM gives poison (and
    x86 shifts by the amount modulo the width)."""
    def build(b, args):
        value, amount = args
        width = ir.Constant(amount.type, value.type.width)
        in_range = b.icmp_unsigned("<", amount, width)
        shifted = getattr(b, operation)(value, amount)
        if operation == "ashr":
            clamped = b.ashr(value, ir.Constant(value.type, value.type.width - 1))
        else:
            clamped = ir.Constant(value.type, 0)
        return b.select(in_range, shifted, clamped)
    return build


_VARIABLE_SHIFT = re.compile(r"= (shl|lshr|ashr)(?: nuw| nsw| exact)* (i\d+) "
                             r"(%[\w.]+|-?\d+), (%[\w.]+)")
_INLINE_ASM = re.compile(r'call (?P<result>[^@]+?) asm (?:sideeffect )?"(?P<text>[^"]*)", '
                         r'"[^"]*"\((?P<operands>[^)]*)\)')
_REFLECT = re.compile(r'call i32 @__nvvm_reflect\(ptr (@[\w.]+)\)(?: #\d+)?')
_STRING = re.compile(r'^(@[\w.]+) = .*c"([^"]*)\\00"', re.MULTILINE)


def _asm_instructions(text: str) -> str:
    """The instructions of an inline assembly string as LLVM IR writes it (escaped), one
    space between operands: without braces, register declarations and the `mov`s that
    split 64-bit operands into 32-bit words."""
    text = text.replace("\\0A", "\n").replace("\\09", " ").strip().strip("{}")
    lines = [" ".join(line.replace(",", ", ").split()).replace(" ,", ",")
             for line in text.split("\n")]
    return " ".join(line for line in lines
                    if line and not line.startswith((".reg", "mov.b64")))


def _intrinsic_emulation(name: str) -> Emulation:
    """The emulation of `llvm.nvvm.<name>`, `.ftz` variants included."""
    base = name.replace(".ftz", "")
    if base not in INTRINSICS:
        raise NotImplementedError(f"no host emulation of llvm.nvvm.{name}: add it to "
                                  f"INTRINSICS in {Path(__file__).name}")
    emulation = INTRINSICS[base]
    if base == name:
        return emulation

    def flushing(b, args):
        args = [_flush_subnormal(b, a) if a.type in (f32, f64) else a for a in args]
        result = emulation.build(b, args)
        return _flush_subnormal(b, result) if result.type in (f32, f64) else result
    return Emulation(_with_ftz(emulation.ptx), flushing, emulation.approximate)


def _with_ftz(ptx: str) -> str:
    """The name of a PTX instruction's `.ftz` form: `.ftz` before its types."""
    parts = ptx.split(".")
    first_type = next(i for i, part in enumerate(parts) if re.fullmatch(r"[suf]\d+", part))
    return ".".join(parts[:first_type] + ["ftz"] + parts[first_type:])


def _asm_emulation(text: str) -> Emulation:
    instructions = _asm_instructions(text)
    if instructions not in INLINE_ASSEMBLY:
        raise NotImplementedError(f"no host emulation of libdevice's inline assembly "
                                  f"`{instructions}`: add it to INLINE_ASSEMBLY in "
                                  f"{Path(__file__).name}")
    emulation = INLINE_ASSEMBLY[instructions]
    if ".ftz." not in instructions:
        return emulation

    def flushing(b, args):
        return _flush_subnormal(b, emulation.build(b, [_flush_subnormal(b, a) for a in args]))
    return Emulation(emulation.ptx, flushing, emulation.approximate)


def reflect_values(arch: str) -> dict[str, int]:
    """What `__nvvm_reflect` answers in kernelkit's CUDA builds for `arch`: no flush to
    zero (thread.py's module flag); `__CUDA_PREC_SQRT` 0 (the NVPTX back end of
    llvmlite's LLVM answers 0 whatever the module says, so libdevice's `sqrtf` and
    `hypotf` take `sqrt.approx.f32`; kernels' own `sqrt` is `sqrt.rn`)."""
    number = int(re.match(r"sm_(\d+)", arch).group(1))
    return {"__CUDA_FTZ": 0, "__CUDA_PREC_SQRT": 0, "__CUDA_ARCH": 10 * number}


def libdevice_for(symbols: list[str], arch: str = DEFAULT_ARCH) -> llvm.ModuleRef:
    """libdevice with only `symbols` and what they call, `__nvvm_reflect` folded as for
    `arch` and what that leaves dead removed (still NVPTX's triple and data layout)."""
    library = llvm.parse_bitcode(libdevice_bitcode())
    missing = set(symbols) - {f.name for f in library.functions}
    if missing:
        raise KeyError(f"libdevice has no {', '.join(sorted(missing))}")
    for function in library.functions:
        if not function.is_declaration and function.name not in symbols:
            function.linkage = "internal"
    _run_passes(library, "global_dead_code_eliminate")
    text = str(library)
    strings = dict(_STRING.findall(text))
    values = reflect_values(arch)
    text = _REFLECT.sub(lambda m: f"add i32 {values.get(strings[m.group(1)], 0)}, 0", text)
    library = llvm.parse_assembly(text)
    _run_passes(library, "sccp", "simplify_cfg", "global_dead_code_eliminate")
    return library


def _run_passes(module: llvm.ModuleRef, *names: str) -> None:
    llvm.initialize_native_target()
    machine = llvm.Target.from_default_triple().create_target_machine()
    passes = llvm.create_new_module_pass_manager()
    for name in names:
        getattr(passes, f"add_{name}_pass")()
    passes.run(module, llvm.create_pass_builder(machine, llvm.PipelineTuningOptions()))


def gpu_only_instructions(module: llvm.ModuleRef) -> dict[str, Emulation]:
    """What `module` (from `libdevice_for`) calls that only a GPU has, by the name it has
    there: each NVVM intrinsic and each inline assembly string, with its emulation."""
    found = {}
    for function in module.functions:
        if function.is_declaration and function.name.startswith("llvm.nvvm."):
            found[function.name] = _intrinsic_emulation(function.name[len("llvm.nvvm."):])
    for match in _INLINE_ASM.finditer(str(module)):
        found[match.group("text")] = _asm_emulation(match.group("text"))
    return found


def approximations_reached(symbol: str, arch: str = DEFAULT_ARCH) -> list[str]:
    """The approximate PTX instructions libdevice's `symbol` can execute on `arch`."""
    found = gpu_only_instructions(libdevice_for([symbol], arch))
    return sorted({e.ptx for e in found.values() if e.approximate})


class LibdeviceOnHost:
    """libdevice's functions `symbols`, compiled for this machine: `evaluate(symbol,
    *arrays)` applies one to NumPy arrays, element by element.

    libdevice is pruned to `symbols` and what they call, `__nvvm_reflect` folded
    (`libdevice_for`); each NVVM intrinsic declaration is renamed to a host function
    that emulates it and each inline assembly call becomes a call of one (`INTRINSICS`,
    `INLINE_ASSEMBLY`); the module takes the host's triple and data layout; a loop per
    symbol maps it over arrays. kernelkit's `host_functions` compiles the lot (no LLVM
    optimization: the code runs as libdevice wrote it).

    `perturbation`: the approximate instructions' results are moved by this relative
    amount, up or down as a hash of the argument's bits says, to see how much a
    function's results depend on them (0: correctly rounded)."""

    def __init__(self, symbols: list[str], arch: str = DEFAULT_ARCH, perturbation: float = 0.0):
        self.arch = arch
        self.perturbation = perturbation
        library = libdevice_for(symbols, arch)
        self.instructions = gpu_only_instructions(library)
        self.emulations = ir.Module("emulations")
        text = str(library)
        for name, emulation in self.instructions.items():
            if name.startswith("llvm.nvvm."):
                signature = library.get_function(name).global_value_type.as_ir(ir.global_context)
                self._define("emulated." + name, signature, emulation)
                text = text.replace(f"@{name}(", f"@emulated.{name}(")
        text = _INLINE_ASM.sub(self._call_emulation, text)
        text = _VARIABLE_SHIFT.sub(self._call_shift, text)
        text += "".join(f'declare {f.function_type.return_type} @"{f.name}"'
                        f'({", ".join(map(str, f.function_type.args))})\n'
                        for f in self.emulations.functions
                        if f.name.startswith(("emulated.asm.", "emulated.shift.")))
        signatures = {name: library.get_function(name).global_value_type.as_ir(ir.global_context)
                      for name in symbols}
        for name, signature in signatures.items():
            _define_map(self.emulations, name, signature)
        machine = llvm.Target.from_default_triple().create_target_machine()
        module = llvm.parse_assembly(text)
        module.link_in(llvm.parse_assembly(str(self.emulations)))
        module.triple = llvm.get_process_triple()
        module.data_layout = str(machine.target_data)
        module.verify()
        addresses = host_functions(str(module), {})
        mapper = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                  ctypes.c_int64)
        self.functions = {
            name: (np.float32 if signature.return_type == f32 else np.float64,
                   len(signature.args), mapper(addresses["map." + name]))
            for name, signature in signatures.items()}

    def evaluate(self, name: str, *arrays: np.ndarray) -> np.ndarray:
        dtype, arity, function = self.functions[name]
        arrays = [np.ascontiguousarray(a, dtype) for a in arrays]
        assert len(arrays) == arity, (name, len(arrays))
        out = np.empty_like(arrays[0])
        second = arrays[1] if arity == 2 else arrays[0]
        function(out.ctypes.data, arrays[0].ctypes.data, second.ctypes.data, len(out))
        return out

    def _call_emulation(self, match: re.Match) -> str:
        """The text of a call of the host function that emulates the inline assembly the
        call `match` makes (defined on first use)."""
        result_type, operands = match.group("result"), match.group("operands")
        operand_types = ", ".join(part.split()[0] for part in operands.split(","))
        declaration = llvm.parse_assembly(f"declare {result_type} @f({operand_types})")
        signature = declaration.get_function("f").global_value_type.as_ir(ir.global_context)
        instructions = _asm_instructions(match.group("text"))
        name = f"emulated.asm.{zlib.crc32(instructions.encode()):08x}"
        if name not in self.emulations.globals:
            self._define(name, signature, _asm_emulation(match.group("text")))
        return f'call {result_type} @"{name}"({operands})'

    def _call_shift(self, match: re.Match) -> str:
        operation, type_name, value, amount = match.groups()
        name = f"emulated.shift.{operation}.{type_name}"
        if name not in self.emulations.globals:
            integer = ir.IntType(int(type_name[1:]))
            self._define(name, ir.FunctionType(integer, [integer, integer]),
                         Emulation(f"{operation}.b{type_name[1:]}", _ptx_shift(operation)))
        return f'= call {type_name} @"{name}"({type_name} {value}, {type_name} {amount})'

    def _define(self, name: str, signature: ir.FunctionType, emulation: Emulation) -> None:
        function = ir.Function(self.emulations, signature, name)
        builder = ir.IRBuilder(function.append_basic_block())
        result = emulation.build(builder, list(function.args))
        if emulation.approximate and self.perturbation:
            result = _perturb(builder, result, function.args[0], self.perturbation)
        builder.ret(result)


def _perturb(b, value, argument, relative: float):
    """`value` times 1 + `relative` or 1 - `relative`, as the top bit of a
    multiplicative hash of `argument`'s bits says; left as it is where it is an integer
    or a power of two, which the hardware gives exactly (libdevice computes 2**k as
    `ex2.approx` of the integer k)."""
    bits = _float_bits(b, argument)
    hashed = b.mul(bits, ir.Constant(bits.type, 0x9E3779B97F4A7C15 % 2 ** bits.type.width))
    up = b.icmp_signed("<", hashed, ir.Constant(bits.type, 0))
    factor = b.select(up, ir.Constant(value.type, 1 + relative),
                      ir.Constant(value.type, 1 - relative))
    value_bits = _float_bits(b, value)
    mantissa = (1 << (23 if value.type == f32 else 52)) - 1
    power_of_two = b.icmp_unsigned("==", b.and_(value_bits, ir.Constant(value_bits.type, mantissa)),
                                   ir.Constant(value_bits.type, 0))
    integer = b.fcmp_ordered("==", call_intrinsic(b, "llvm.trunc", [value]), value)
    exact = b.or_(power_of_two, integer)
    return b.select(exact, value, b.fmul(value, factor))


def _define_map(module: ir.Module, name: str, signature: ir.FunctionType) -> None:
    """`map.<name>(out, x, y, n)`: out[i] = name(x[i]) (or name(x[i], y[i]))."""
    callee = ir.Function(module, signature, name)
    mapper = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr, ptr, ptr, i64]),
                         "map." + name)
    out, first, second, count = mapper.args
    entry = mapper.append_basic_block("entry")
    loop = mapper.append_basic_block("loop")
    done = mapper.append_basic_block("done")
    builder = ir.IRBuilder(entry)
    builder.cbranch(builder.icmp_signed(">", count, ir.Constant(i64, 0)), loop, done)
    builder.position_at_end(loop)
    index = builder.phi(i64)
    index.add_incoming(ir.Constant(i64, 0), entry)
    element = signature.return_type
    operands = [builder.load(builder.gep(array, [index], source_etype=element), typ=element)
                for array in (first, second)[:len(signature.args)]]
    builder.store(builder.call(callee, operands),
                  builder.gep(out, [index], source_etype=element))
    following = builder.add(index, ir.Constant(i64, 1))
    index.add_incoming(following, loop)
    builder.cbranch(builder.icmp_signed("<", following, count), loop, done)
    builder.position_at_end(done)
    builder.ret_void()
