"""Kernel math on NVIDIA GPUs: what PTX has as instructions comes from LLVM intrinsics,
the rest from libdevice (`__nv_sinf` ...), NVIDIA's math library as LLVM bitcode, which
the `nvidia-nvvm` wheel ships. Only the libdevice functions a kernel calls are kept:
the library is linked in, made internal, and what is unused is dropped by the
optimizer."""
from __future__ import annotations

import functools

from llvmlite import binding as llvm
from llvmlite import ir

from kernelkit.compiler.llvm_types import declared, ptr
from kernelkit.compiler.math_lowering import (call_intrinsic, call_math_function, lower_math,
                                              lower_sincos)
from kernelkit.errors import BackendError
from kernelkit.ir import types as T
from kernelkit.ir.math_functions import MATH_FUNCTIONS

PREFIX = "__nv_"


def device_math(builder, name: str, args, type: T.ScalarType):
    return lower_math(builder, name, args, type, _libdevice_math)


def _libdevice_math(builder, name: str, args, type: T.ScalarType):
    function = MATH_FUNCTIONS[name]
    if function.exact and name != "fmod":   # PTX has instructions (sqrt.rn is IEEE sqrt)
        return call_intrinsic(builder, f"llvm.{name}", args)
    symbol = PREFIX + function.c_name + ("f" if type.bits == 32 else "")
    return call_math_function(builder, symbol, args)


def device_sincos(builder, x, type: T.ScalarType):
    """`{sin(x), cos(x)}` by libdevice's sincos, which reduces the argument once for both
    (as nvcc fuses a `sinf` and a `cosf` of one value)."""
    return lower_sincos(builder, x, type, _libdevice_sincos)


def _libdevice_sincos(builder, x):
    """A call of `kk_sincos[f](x)`, a function of ours returning both results that has no
    side effects, so that LLVM merges two calls of one argument (the sine's and the
    cosine's) before it inlines them; it calls libdevice's, which stores them."""
    module = builder.module
    scalar = x.type
    symbol = PREFIX + ("sincosf" if isinstance(scalar, ir.FloatType) else "sincos")
    name = "kk_" + symbol[len(PREFIX):]
    function = module.globals.get(name)
    if function is None:
        library = declared(module, symbol, ir.VoidType(), [scalar, ptr, ptr])
        both = ir.LiteralStructType([scalar, scalar])
        function = ir.Function(module, ir.FunctionType(both, [scalar]), name)
        function.linkage = "internal"
        function.attributes.add("nounwind")
        for attribute in ("willreturn", "memory(none)"):
            set.add(function.attributes, attribute)    # attributes llvmlite does not list
        body = ir.IRBuilder(function.append_basic_block("entry"))
        results = [body.alloca(scalar) for _ in range(2)]
        body.call(library, [function.args[0], *results])
        value = ir.Constant(both, ir.Undefined)
        for index, result in enumerate(results):
            value = body.insert_value(value, body.load(result), index)
        body.ret(value)
    return builder.call(function, [x])


@functools.lru_cache(maxsize=1)
def libdevice_path() -> str | None:
    try:
        from cuda.pathfinder import find_bitcode_lib
        return find_bitcode_lib("device")
    except Exception:  # not installed, or not where the wheels put it
        return None


def libdevice_unavailable_reason() -> str | None:
    if libdevice_path() is None:
        return ("libdevice (NVIDIA's math library) is not installed (pip install -e "
                "'.[cuda]': cuda-pathfinder and nvidia-nvvm)")
    return None


@functools.lru_cache(maxsize=1)
def libdevice_bitcode() -> bytes:
    path = libdevice_path()
    if path is None:
        raise BackendError("kernels that call math functions need libdevice on CUDA: "
                           + libdevice_unavailable_reason())
    with open(path, "rb") as file:
        return file.read()


def uses_libdevice(llvm_module) -> bool:
    return any(f.is_declaration and f.name.startswith(PREFIX) for f in llvm_module.functions)


def link_libdevice(llvm_module) -> None:
    """Link libdevice into `llvm_module` and make its functions internal, so that the
    optimizer keeps only those the kernel calls (and inlines them)."""
    library = llvm.parse_bitcode(libdevice_bitcode())
    library.triple = llvm_module.triple
    library.data_layout = llvm_module.data_layout
    own = {f.name for f in llvm_module.functions if not f.is_declaration}
    llvm_module.link_in(library)
    for function in llvm_module.functions:
        if not function.is_declaration and function.name not in own:
            function.linkage = "internal"
