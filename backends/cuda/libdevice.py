"""Kernel math on NVIDIA GPUs: what PTX has as instructions comes from LLVM intrinsics,
the rest from libdevice (`__nv_sinf` ...), NVIDIA's math library as LLVM bitcode, which
the `nvidia-nvvm` wheel ships. Only the libdevice functions a kernel calls are kept:
the library is linked in, made internal, and what is unused is dropped by the
optimizer."""
from __future__ import annotations

import functools

from llvmlite import binding as llvm

from kernelkit.compiler.math_lowering import call_intrinsic, call_math_function, lower_math
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
