"""Without a GPU: the CUDA builds of the operations NVPTX would compute differently from
the CPU are lowered to something exact, and the compiler refuses to emit PTX from an
instruction NVPTX expands inexactly (`backends/cuda/exactness.py`)."""
import numpy as np
import pytest

import kernelkit as kk
from backends.cuda import CUDABackend
from backends.cuda.exactness import check_exact_lowering, inexact_instructions
from backends.cuda.runtime import compile_only_unavailable_reason
from kernelkit.errors import InternalCompilerError

needs_toolchain = pytest.mark.skipif(compile_only_unavailable_reason() is not None,
                                     reason=str(compile_only_unavailable_reason()))


@kk.kernel
def floordiv_mod_divmod(quotient, remainder, pair, x: kk.Const, y: kk.Const):
    i = kk.index(kk.Global)
    quotient[i] = x[i] // y[i]
    remainder[i] = x[i] % y[i] + math_fmod(x[i], y[i])
    q, r = divmod(x[i], y[i])
    pair[i] = q + r


def math_fmod(x, y):
    return kk.fmod(x, y)


@kk.kernel
def to_half(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i]


def compile_only():
    return CUDABackend.compile_only("sm_90")


@needs_toolchain
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64],
                         ids=lambda d: np.dtype(d).name)
def test_float_floordiv_mod_and_divmod_reach_the_gpu_as_fmod_not_frem(dtype):
    backend = compile_only()
    arrays = [kk.zeros(backend, dtype, 64) for _ in range(5)]
    llvm_ir = kk.code_llvm(floordiv_mod_divmod, backend, *arrays, ndrange=64, workgroupsize=32)
    assert inexact_instructions(llvm_ir) == []
    assert "__nv_fmod" in llvm_ir   # libdevice's exact remainder, inlined


def test_an_frem_in_a_cuda_build_is_an_internal_error_naming_the_kernel():
    module = ("define void @k(double %x, double %y) {\n"
              "  %r = frem double %x, %y\n  %s = frem fast float 1.0, 2.0\n  ret void\n}\n")
    assert inexact_instructions(module) == ["%r = frem double %x, %y",
                                            "%s = frem fast float 1.0, 2.0"]
    with pytest.raises(InternalCompilerError, match=r"(?s)kernel 'k'.*2 LLVM instruction.*"
                                                     r"frem double.*__nv_fmod"):
        check_exact_lowering(module, "k")
    check_exact_lowering(module.replace("frem", "fadd"), "k")


@needs_toolchain
@pytest.mark.parametrize("source", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_a_conversion_to_float16_on_the_gpu_keeps_a_nan_s_sign(source):
    """PTX's cvt to f16 returns its canonical NaN: the kernel selects NumPy's NaN instead."""
    backend = compile_only()
    y, x = kk.zeros(backend, np.float16, 64), kk.zeros(backend, source, 64)
    ptx = kk.code_native(to_half, backend, y, x, ndrange=64, workgroupsize=64)
    bits = 64 if source == np.float64 else 32
    assert f"setp.nan.f{bits}" in ptx and "selp.b16" in ptx


@kk.kernel
def half_sum(y, a: kk.Const, b: kk.Const):
    i = kk.index(kk.Global)
    y[i] = a[i] + b[i]


@needs_toolchain
def test_float16_arithmetic_on_the_gpu_selects_numpy_s_nan():
    """PTX's f16 `add` returns its positive canonical NaN for `inf - inf`: the kernel
    selects NumPy's (x86's negative default NaN, or the operand's) instead."""
    backend = compile_only()
    y, a, b = (kk.zeros(backend, np.float16, 64) for _ in range(3))
    ptx = kk.code_native(half_sum, backend, y, a, b, ndrange=64, workgroupsize=64)
    assert "add.rn.f16" in ptx and "setp.nan.f16" in ptx
    assert "-512" in ptx   # 0xFE00, the negative default NaN, as a signed 16-bit number
