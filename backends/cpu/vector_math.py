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
version, the kernel calls the C library's scalar function, as before."""
from __future__ import annotations

import ctypes.util
import functools
import platform

from llvmlite import binding as llvm
from llvmlite import ir

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
        function = _vectorizable_function(module, name, *found, scalar, len(args))
    return builder.call(function, args)


def _vectorizable_function(module: ir.Module, name: str, vector_name: str, lanes: int,
                           scalar: ir.Type, arity: int) -> ir.Function:
    """`name(x...)`: lane 0 of `vector_name` applied to x repeated in every lane, marked
    as having `vector_name` as its vector version (and kept out of line until the
    vectorizer has seen its calls)."""
    vector = ir.VectorType(scalar, lanes)
    vector_function = ir.Function(module, ir.FunctionType(vector, [vector] * arity),
                                  vector_name)
    function = ir.Function(module, ir.FunctionType(scalar, [scalar] * arity), name)
    function.linkage = "internal"
    for attribute in ("noinline", "nounwind"):
        function.attributes.add(attribute)
    for attribute in ("willreturn", "memory(none)",
                      f'"vector-function-abi-variant"="_ZGV_LLVM_N{lanes}{"v" * arity}_'
                      f'{name}({vector_name})"'):
        set.add(function.attributes, attribute)    # attributes llvmlite does not list
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
