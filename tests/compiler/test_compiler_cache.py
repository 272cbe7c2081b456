"""The driver's in-memory cache: an equal job gives the same compiled kernel, and
compiling a job again gives the same IR text."""
import numpy as np

import kernelkit as kk
from kernelkit.compiler.driver import build, compile_job, typed_module
from kernelkit.ir import types as T
from kernelkit.ir.printer import print_module

F32_ARRAY = T.ArrayType(T.float32, 1, "C")


def axpy(y, a, x: kk.Const):
    i = kk.index(kk.Global)
    if i < y.shape[0]:
        y[i] = a * x[i] + y[i]


def test_equal_jobs_give_the_same_compiled_kernel():
    cpu = kk.CPU(threads=1)
    argtypes = (F32_ARRAY, T.weak_float, F32_ARRAY)
    first = compile_job(cpu.compiler_job(axpy, argtypes, workgroupsize=(64,)))
    second = compile_job(cpu.compiler_job(axpy, argtypes, workgroupsize=(64,)))
    assert first is second


def test_another_workgroup_size_gives_another_compiled_kernel():
    cpu = kk.CPU(threads=1)
    argtypes = (F32_ARRAY, T.weak_float, F32_ARRAY)
    small = compile_job(cpu.compiler_job(axpy, argtypes, workgroupsize=(32,)))
    large = compile_job(cpu.compiler_job(axpy, argtypes, workgroupsize=(256,)))
    assert small is not large
    assert small.job != large.job


def test_two_kernel_objects_for_one_function_share_the_compiled_kernel():
    cpu = kk.CPU(threads=1)
    argtypes = (F32_ARRAY, T.weak_float, F32_ARRAY)
    assert kk.kernel(axpy).specialize(cpu, argtypes, (64,)) is \
        kk.kernel(axpy).specialize(cpu, argtypes, (64,))


def test_compiling_a_job_twice_gives_the_same_ir_and_llvm_text():
    job = kk.CPU(threads=1).compiler_job(axpy, (F32_ARRAY, T.float32, F32_ARRAY),
                                         workgroupsize=(16,))
    first, second = build(job), build(job)
    assert first is not second
    assert first.ir == second.ir
    assert first.llvm_ir == second.llvm_ir
    assert first.ir == print_module(typed_module(job))
    assert "kernel @axpy(y, a, x) -> void" in first.ir


def test_code_ir_is_the_compiled_kernels_ir():
    cpu = kk.CPU(threads=1)
    y = np.zeros(8, np.float32)
    x = np.ones(8, np.float32)
    text = kk.code_ir(kk.kernel(axpy), cpu, y, 2.0, x, ndrange=8, workgroupsize=8)
    job = cpu.compiler_job(axpy, (F32_ARRAY, T.weak_float, T.ArrayType(T.float32, 1, "C", const=True)),
                           workgroupsize=(8,))
    assert text == compile_job(job).ir
    assert "%0: array<f32, 1, C>, %1: float, %2: array<f32, 1, C, const>" in text


def double(x):
    return x * 2


def triple(x):
    return x * 3


def make_applier(operation):
    @kk.kernel
    def apply(y):
        i = kk.index(kk.Global)
        y[i] = operation(y[i])
    return apply


def test_kernels_closing_over_different_device_functions_compute_their_own_results():
    cpu = kk.CPU(threads=1)
    doubled = np.ones(4)
    tripled = np.ones(4)
    make_applier(double)(cpu, 4)(doubled, ndrange=4)
    make_applier(triple)(cpu, 4)(tripled, ndrange=4)
    kk.synchronize(cpu)
    np.testing.assert_array_equal(doubled, 2.0)
    np.testing.assert_array_equal(tripled, 3.0)


def make_reciprocal(denominator):
    @kk.kernel
    def reciprocal(y):
        i = kk.index(kk.Global)
        y[i] = 1.0 / denominator
    return reciprocal


def test_kernels_closing_over_zero_and_negative_zero_compute_their_own_results():
    cpu = kk.CPU(threads=1)
    positive = np.zeros(2)
    negative = np.zeros(2)
    make_reciprocal(0.0)(cpu, 2)(positive, ndrange=2)
    make_reciprocal(-0.0)(cpu, 2)(negative, ndrange=2)
    kk.synchronize(cpu)
    np.testing.assert_array_equal(positive, np.inf)
    np.testing.assert_array_equal(negative, -np.inf)
