"""Vectorized math on the CPU: glibc's libmvec, where the host has it.

A kernel's work-items are a loop that LLVM vectorizes; a call to the C library's `sinf`
inside it leaves the vector loop calling `sinf` once per lane. libmvec (part of glibc on
x86-64 Linux) has vector versions of most of the C library's math functions, callable
with a vector of 8 float32 or 4 float64 arguments (AVX2; SSE: 4 and 2).

A kernel calls a function of ours, `kk_mvec_<symbol>`, which takes one argument (one
work-item's) and computes it with the vector version on that argument repeated in every
lane; it carries the `vector-function-abi-variant` attribute naming the vector version,
so LLVM's loop vectorizer calls the vector version itself for a whole vector of
work-items. Work-items computed in the vector loop and those of its scalar remainder run
the same code: the same argument gives the same bits wherever its work-item falls.

One vector width per host (AVX2 where the CPU has it, else SSE): libmvec's versions for
different widths are different code, which need not agree to the last bit. Where the host
has no libmvec (macOS, Windows, musl, another architecture) or the function has no vector
version, the kernel calls the C library's scalar function, as before.

`fmod`, which libmvec lacks, has a vector version of ours (`vectorizable_fmod`), exact
as fmod is, with the same lanes; so have `gamma` and `lgamma` (gamma.py)."""
from __future__ import annotations

import ctypes.util
import functools
import platform

from llvmlite import binding as llvm
from llvmlite import ir

from kernelkit.compiler.llvm_types import declared
from kernelkit.compiler.math_lowering import call_intrinsic, call_math_function

LIBMVEC_AVX2 = "libmvec-avx2"
LIBMVEC_SSE = "libmvec-sse"

# (ISA letter of the vector-function ABI, lanes for float32, lanes for float64)
_SHAPES = {LIBMVEC_AVX2: ("d", 8, 4), LIBMVEC_SSE: ("b", 4, 2)}


@functools.lru_cache(maxsize=1)
def load_libmvec() -> bool:
    """Make libmvec's functions callable from JIT-compiled code; whether it could be."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    path = ctypes.util.find_library("mvec")
    if path is None:
        return False
    try:
        llvm.load_library_permanently(path)
    except RuntimeError:
        return False
    return True


def vector_library(features: str) -> str:
    """The vector math library kernels use on a host with these LLVM CPU features:
    LIBMVEC_AVX2, LIBMVEC_SSE, or "" for none."""
    if not load_libmvec():
        return ""
    return LIBMVEC_AVX2 if "+avx2" in features.split(",") else LIBMVEC_SSE


def vector_lanes(library: str, scalar: ir.Type) -> int:
    """How many lanes of `scalar` (float or double) the vector versions of functions of
    ours take on a host with this vector library; 0 where it has none."""
    if library not in _SHAPES or not isinstance(scalar, (ir.FloatType, ir.DoubleType)):
        return 0
    return _SHAPES[library][1 if isinstance(scalar, ir.FloatType) else 2]


def vector_symbol(library: str, symbol: str, arity: int, bits: int
                  ) -> tuple[str, int] | None:
    """libmvec's vector version of the C library's `symbol` (e.g. `sinf`) and its lanes,
    if it has one."""
    if library not in _SHAPES:
        return None
    isa, lanes32, lanes64 = _SHAPES[library]
    lanes = lanes32 if bits == 32 else lanes64
    name = f"_ZGV{isa}N{lanes}{'v' * arity}_{symbol}"
    return (name, lanes) if load_libmvec() and llvm.address_of_symbol(name) else None


def call_vectorizable(builder: ir.IRBuilder, library: str, symbol: str, args: list
                      ) -> ir.Value | None:
    """A call of `symbol(args...)` that the loop vectorizer turns into libmvec's vector
    version, or None where there is none."""
    scalar = args[0].type
    found = vector_symbol(library, symbol, len(args),
                          32 if isinstance(scalar, ir.FloatType) else 64)
    if found is None:
        return None
    module = builder.module
    name = f"kk_mvec_{symbol}"
    function = module.globals.get(name)
    if function is None:
        function = vectorizable_function(module, name, *found, scalar, len(args))
    return builder.call(function, args)


def vectorizable_function(module: ir.Module, name: str, vector_name: str, lanes: int,
                          scalar: ir.Type, arity: int) -> ir.Function:
    """`name(x...)`: lane 0 of `vector_name` applied to x repeated in every lane, marked
    as having `vector_name` as its vector version (and kept out of line until the
    vectorizer has seen its calls). Both are listed as used (`_keep`), and a
    `vector_name` of ours, defined in the module, is kept out of line too."""
    vector = ir.VectorType(scalar, lanes)
    vector_function = declared(module, vector_name, vector, [vector] * arity)
    if not vector_function.is_declaration:
        vector_function.attributes.add("noinline")
        _keep(module, vector_function)
    function = ir.Function(module, ir.FunctionType(scalar, [scalar] * arity), name)
    function.linkage = "internal"
    for attribute in ("noinline", "nounwind"):
        function.attributes.add(attribute)
    for attribute in ("willreturn", "memory(none)",
                      f'"vector-function-abi-variant"="_ZGV_LLVM_N{lanes}{"v" * arity}_'
                      f'{name}({vector_name})"'):
        set.add(function.attributes, attribute)    # attributes llvmlite does not list
    _keep(module, function)
    builder = ir.IRBuilder(function.append_basic_block())
    zeros = ir.Constant(ir.VectorType(ir.IntType(32), lanes), [0] * lanes)
    splats = []
    for argument in function.args:
        first = builder.insert_element(ir.Constant(vector, ir.Undefined), argument,
                                       ir.Constant(ir.IntType(64), 0))
        splats.append(builder.shuffle_vector(first, ir.Constant(vector, ir.Undefined), zeros))
    result = builder.call(vector_function, splats)
    builder.ret(builder.extract_element(result, ir.Constant(ir.IntType(64), 0)))
    return function


def _keep(module: ir.Module, function: ir.Function) -> None:
    """Add `function` to the module's `llvm.compiler.used`, so that LLVM leaves its
    signature as it is until the vectorizers have matched its calls to their vector
    version. Otherwise a vector function of ours, whose only caller before vectorization
    is the scalar function it is the vector version of, would be inlined there and
    deleted, or given the fast calling convention, which the calls the vectorizers add
    do not use (a call with the wrong convention is undefined behaviour: the code around
    it was deleted); and an argument every call gives the same constant (pow(x, 2.5))
    would be taken out of the scalar function, which then no longer matches its vector
    version: the loop called it once per work-item."""
    used = module.globals.get("llvm.compiler.used")
    functions = [function]
    if used is None:
        used = ir.GlobalVariable(module, ir.ArrayType(function.type, 0), "llvm.compiler.used")
        used.linkage = "appending"
        used.section = "llvm.metadata"
    else:
        functions = list(used.initializer.constant) + functions
    used.value_type = ir.ArrayType(function.type, len(functions))
    used.initializer = ir.Constant(used.value_type, functions)


_EXACT_QUOTIENTS = 2.0 ** 51
"""Below this, a quotient computed in float64 is off by at most one from the true one's
integer part, and that one is corrected."""


def vectorizable_fmod(builder: ir.IRBuilder, library: str, args: list) -> ir.Value | None:
    """fmod(x, y) by a function the loop vectorizer calls a vector version of (libmvec has
    none), or None where the host has no vector library."""
    scalar = args[0].type
    lanes = vector_lanes(library, scalar)
    if not lanes:
        return None
    module = builder.module
    symbol = "fmodf" if isinstance(scalar, ir.FloatType) else "fmod"
    name = f"kk_fmod_{symbol}"
    function = module.globals.get(name)
    if function is None:
        vector_name = f"kk_fmod_{symbol}_x{lanes}"
        _vector_fmod(module, vector_name, symbol, scalar, lanes)
        function = vectorizable_function(module, name, vector_name, lanes, scalar, 2)
    return builder.call(function, args)


def _vector_fmod(module: ir.Module, name: str, symbol: str, scalar: ir.Type,
                 lanes: int) -> ir.Function:
    """fmod on `lanes` lanes: in float64, the quotient's integer part q = trunc(|x| / |y|),
    then |x| - q * |y| by one fma (exact: the result is a multiple of the smaller of the
    two's last digit, smaller than |y|), plus |y| where q was one too large; the sign of
    x. The lanes this does not cover (an infinite or nan argument, y = 0, a quotient of
    2**51 or more) call the C library's `symbol`, one at a time."""
    vector = ir.VectorType(scalar, lanes)
    wide = ir.VectorType(ir.DoubleType(), lanes)
    function = ir.Function(module, ir.FunctionType(vector, [vector, vector]), name)
    function.linkage = "internal"
    function.attributes.add("nounwind")
    x, y = function.args
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    if scalar != ir.DoubleType():
        x_wide, y_wide = builder.fpext(x, wide), builder.fpext(y, wide)
    else:
        x_wide, y_wide = x, y
    numerator = call_intrinsic(builder, "llvm.fabs", [x_wide])
    denominator = call_intrinsic(builder, "llvm.fabs", [y_wide])
    quotient = call_intrinsic(builder, "llvm.trunc", [builder.fdiv(numerator, denominator)])
    remainder = call_intrinsic(builder, "llvm.fma", [builder.fneg(quotient), denominator,
                                                     numerator])
    negative = builder.fcmp_ordered("<", remainder, ir.Constant(wide, [0.0] * lanes))
    remainder = builder.select(negative, builder.fadd(remainder, denominator), remainder)
    result = call_intrinsic(builder, "llvm.copysign", [remainder, x_wide])
    if scalar != ir.DoubleType():
        result = builder.fptrunc(result, vector)
    infinity = ir.Constant(wide, [float("inf")] * lanes)
    covered = builder.and_(
        builder.and_(builder.fcmp_ordered("<", numerator, infinity),
                     builder.fcmp_ordered("<", denominator, infinity)),
        builder.and_(builder.fcmp_ordered(">", denominator, ir.Constant(wide, [0.0] * lanes)),
                     builder.fcmp_ordered("<", quotient,
                                          ir.Constant(wide, [_EXACT_QUOTIENTS] * lanes))))
    every = call_intrinsic(builder, "llvm.vector.reduce.and", [covered],
                           return_type=ir.IntType(1))
    done = function.append_basic_block("done")
    lane_blocks = [function.append_basic_block(f"lane{lane}") for lane in range(lanes)]
    entry, fast = builder.block, result
    builder.cbranch(every, done, lane_blocks[0])
    for lane, block in enumerate(lane_blocks):
        builder.position_at_end(block)
        index = ir.Constant(ir.IntType(32), lane)
        exact = builder.extract_element(covered, index)
        call_block = function.append_basic_block(f"lane{lane}_call")
        join = function.append_basic_block(f"lane{lane}_join")
        builder.cbranch(exact, join, call_block)
        builder.position_at_end(call_block)
        value = call_math_function(builder, symbol, [builder.extract_element(x, index),
                                                     builder.extract_element(y, index)])
        with_lane = builder.insert_element(result, value, index)
        builder.branch(join)
        builder.position_at_end(join)
        merged = builder.phi(vector)
        merged.add_incoming(result, block)
        merged.add_incoming(with_lane, call_block)
        result = merged
        builder.branch(lane_blocks[lane + 1] if lane + 1 < lanes else done)
    builder.position_at_end(done)
    final = builder.phi(vector)
    final.add_incoming(fast, entry)
    final.add_incoming(result, join)
    builder.ret(final)
    return function
