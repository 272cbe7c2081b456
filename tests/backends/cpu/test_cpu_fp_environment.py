"""A CPU kernel computes in the default floating-point environment whatever its thread's
(`backends/cpu/fp_environment.py`): with flush-to-zero and denormals-are-zero set on the
launching thread, as Taichi's `ti.init` sets them, a kernel still computes with
subnormals, as the GPU does, and the thread's own setting is left as it was. The
control word under test is x86's MXCSR; AArch64's FPCR wrapper is checked by compiling
for it (test_cpu_cross_compile.py)."""
import ctypes
import platform

import numpy as np
import pytest
from llvmlite import binding as llvm

import kernelkit as kk
from backends.cpu.fp_environment import MXCSR_DEFAULT

pytestmark = pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                                reason="MXCSR is x86's control word")

FLUSH_TO_ZERO = 1 << 15
DENORMALS_ARE_ZERO = 1 << 6
FLAGS = 0x3F     # the sticky exception flags, which any arithmetic may raise

CONTROL_WORD = """
declare void @llvm.x86.sse.ldmxcsr(ptr)
declare void @llvm.x86.sse.stmxcsr(ptr)
define void @set_mxcsr(i32 %word) {
  %slot = alloca i32
  store i32 %word, ptr %slot
  call void @llvm.x86.sse.ldmxcsr(ptr %slot)
  ret void
}
define i32 @get_mxcsr() {
  %slot = alloca i32
  call void @llvm.x86.sse.stmxcsr(ptr %slot)
  %word = load i32, ptr %slot
  ret i32 %word
}
"""


@pytest.fixture(scope="module")
def mxcsr():
    """(set, get) of this thread's MXCSR, compiled here."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    module = llvm.parse_assembly(CONTROL_WORD)
    machine = llvm.Target.from_default_triple().create_target_machine()
    engine = llvm.create_mcjit_compiler(module, machine)
    engine.finalize_object()
    set_word = ctypes.CFUNCTYPE(None, ctypes.c_uint32)(engine.get_function_address("set_mxcsr"))
    get_word = ctypes.CFUNCTYPE(ctypes.c_uint32)(engine.get_function_address("get_mxcsr"))
    yield set_word, get_word
    set_word(MXCSR_DEFAULT)
    del engine


@kk.kernel
def scale(y, x: kk.Const, factor):
    i = kk.index(kk.Global)
    y[i] = x[i] * factor


@pytest.mark.parametrize("threads", [1, 2])
def test_a_kernel_keeps_subnormals_on_a_thread_that_flushes_them(mxcsr, threads):
    set_word, get_word = mxcsr
    x = np.full(4096, 3e-39, np.float32)    # subnormal inputs, and subnormal results
    y = np.zeros_like(x)
    backend = kk.CPU(threads=threads)
    launch = scale(backend, 64)
    flushing = MXCSR_DEFAULT | FLUSH_TO_ZERO | DENORMALS_ARE_ZERO
    set_word(flushing)
    try:
        # NumPy on this thread now reads the inputs as 0: the setting took.
        assert x[0] * np.float32(0.5) == 0
        launch(y, x, np.float32(0.5), ndrange=x.size)
        kk.synchronize(backend)
        assert get_word() & ~FLAGS == flushing   # the thread's own setting is kept
    finally:
        set_word(MXCSR_DEFAULT)
    np.testing.assert_array_equal(y, x * np.float32(0.5))
    assert y[0] == np.float32(1.5e-39) and y[0] != 0
