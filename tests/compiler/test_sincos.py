"""A sine and a cosine of one value are computed together (`shared_sincos_arguments`):
which pairs are, in IR written as text; that such kernels give NumPy's values on every
backend, in float16, float32 and float64, with the pair in one block, across blocks and
on two sides of a branch; and that on CUDA the pair reaches libdevice as one sincos, with
one argument reduction (its PTX against that of a sine and a cosine of two values)."""
import numpy as np
import pytest

import kernelkit as kk
from backends.cuda import CUDABackend
from backends.cuda.runtime import compile_only_unavailable_reason
from kernelkit.compiler.math_lowering import shared_sincos_arguments
from kernelkit.ir.parser import parse_module


ONE_BLOCK = '''func @f(x, y) -> f32 file "f.py" {
^bb0(%0: f32, %1: f32):
  %2 = math.sin %0 : f32
  %3 = math.cos %0 : f32
  %4 = math.cos %1 : f32
  %5 = add %2, %3 : f32
  %6 = add %5, %4 : f32
  ret %6
}
'''

# The sine in the entry, which dominates the cosine in the branch; and a pair (of %1)
# split between the two sides of the branch.
BRANCHES = '''func @g(c, x, y) -> f32 file "f.py" {
^bb0(%0: bool, %1: f32, %2: f32):
  %3 = math.sin %2 : f32
  cbr %0, ^bb1(), ^bb2()
^bb1():
  %4 = math.sin %1 : f32
  %5 = math.cos %2 : f32
  %6 = add %4, %5 : f32
  br ^bb3(%6)
^bb2():
  %7 = math.cos %1 : f32
  br ^bb3(%7)
^bb3(%8: f32):
  %9 = add %8, %3 : f32
  ret %9
}
'''


def _params(text):
    function = parse_module(text).kernel
    return function, function.params


def test_a_sine_and_a_cosine_of_one_value_in_one_block_are_paired():
    function, (x, y) = _params(ONE_BLOCK)
    assert shared_sincos_arguments(function) == {x}


def test_a_pair_is_made_where_one_dominates_the_other_not_across_a_branch():
    function, (c, x, y) = _params(BRANCHES)
    assert shared_sincos_arguments(function) == {y}


@kk.kernel
def sine_and_cosine(s, c, x: kk.Const):
    i = kk.index(kk.Global)
    s[i] = kk.sin(x[i]) * x[i]
    c[i] = kk.cos(x[i])


@kk.kernel
def branches(s, c, x: kk.Const):
    i = kk.index(kk.Global)
    v = x[i]
    first = kk.sin(v)
    if i % 3 == 0:
        s[i] = kk.cos(v) + first
        c[i] = kk.sin(v + 1)
    else:
        s[i] = first
        c[i] = kk.cos(v + 1)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_kernels_taking_both_give_numpy_s_values(backend, dtype):
    n = 1000
    x_host = (np.random.default_rng(0).standard_normal(n) * 40).astype(dtype)
    x_host[:4] = [0.0, -0.0, np.inf, np.nan]
    wide = x_host.astype(np.float64)
    tolerance = {np.float16: 2e-3, np.float32: 2e-6, np.float64: 1e-14}[dtype]
    x = kk.to_backend(backend, x_host)
    with np.errstate(invalid="ignore"):
        cases = (
            (sine_and_cosine, np.sin(wide) * wide, np.cos(wide)),
            (branches,
             np.where(np.arange(n) % 3 == 0, np.cos(wide) + np.sin(wide), np.sin(wide)),
             np.where(np.arange(n) % 3 == 0, np.sin(wide + 1), np.cos(wide + 1))))
    for kernel, expected_s, expected_c in cases:
        s, c = kk.zeros(backend, dtype, n), kk.zeros(backend, dtype, n)
        kernel(backend, 64)(s, c, x, ndrange=n)
        kk.synchronize(backend)
        for got, expected in ((s, expected_s), (c, expected_c)):
            got = kk.to_numpy(got).astype(np.float64)
            np.testing.assert_allclose(got, expected.astype(dtype).astype(np.float64),
                                       rtol=tolerance, atol=tolerance * 40, equal_nan=True)


@kk.kernel
def one_value(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = kk.sin(x[i]) * kk.cos(x[i])


@kk.kernel
def two_values(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = kk.sin(x[i]) * kk.cos(x[i] + 1)


@pytest.mark.skipif(compile_only_unavailable_reason() is not None,
                    reason=str(compile_only_unavailable_reason()))
@pytest.mark.parametrize("dtype, at_most", [(np.float32, 0.7), (np.float64, 0.85)])
def test_on_cuda_a_pair_is_one_libdevice_sincos(dtype, at_most):
    """Measured: 753 PTX lines against 1352 (float32), 608 against 806 (float64); a
    sine and a cosine computed apart give about as many for one value as for two."""
    backend = CUDABackend.compile_only("sm_90")
    x = np.zeros(64, dtype)
    lines = {kernel: len(kk.code_native(kernel, backend, x, x, ndrange=64,
                                        workgroupsize=64).splitlines())
             for kernel in (one_value, two_values)}
    assert lines[one_value] < at_most * lines[two_values], lines
