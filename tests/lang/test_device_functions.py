"""Device functions and compile-time constants: plain Python functions a kernel calls
(module level or nested), generic over argument types, returning tuples, calling each
other, touching arrays; module and closure constants; and one kernel specialized for
several dtypes, dimensions and layouts."""
import math

import numpy as np
import pytest

import kernelkit as kk

SCALE = 2.5
OFFSET = 7
WORKGROUP = 16


def launch(backend, kernel, *args, ndrange):
    kernel(backend, WORKGROUP)(*args, ndrange=ndrange)
    kk.synchronize(backend)


# --- module-level helpers ------------------------------------------------------------


def square(v):
    return v * v


def sum_of_squares(a, b):
    return square(a) + square(b)


def floor_divmod(a, b):
    return a // b, a % b


def sign(v):
    if v > 0:
        return 1
    elif v < 0:
        return -1
    return 0


def integer_power(base, exponent):
    result = 1
    for _ in range(exponent):
        result *= base
    return result


def scaled_with_offset(v):
    return v * SCALE + OFFSET


def write_pair(out, i, v):
    out[2 * i] = v
    out[2 * i + 1] = -v


def global_index():
    return kk.index(kk.Global)


def gelu(v):
    return 0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0)))


@kk.kernel
def apply_square(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = square(x[i])


def test_kernel_calls_a_module_level_function(backend):
    x = np.arange(-5, 20, dtype=np.float32) * 0.5
    y = kk.zeros(backend, np.float32, len(x))
    launch(backend, apply_square, y, kk.to_backend(backend, x), ndrange=len(x))
    np.testing.assert_array_equal(kk.to_numpy(y), x * x)


@kk.kernel
def apply_sum_of_squares(y, a: kk.Const, b: kk.Const):
    i = kk.index(kk.Global)
    y[i] = sum_of_squares(a[i], b[i])


def test_device_function_calls_another_device_function(backend):
    a = np.arange(20, dtype=np.int64) - 10
    b = np.arange(20, dtype=np.int64) * 3
    y = kk.zeros(backend, np.int64, len(a))
    launch(backend, apply_sum_of_squares, y, kk.to_backend(backend, a), kk.to_backend(backend, b), ndrange=len(a))
    np.testing.assert_array_equal(kk.to_numpy(y), a * a + b * b)


@kk.kernel
def square_of_int_and_of_float(ints, floats, x: kk.Const):
    i = kk.index(kk.Global)
    ints[i] = square(i)
    floats[i] = square(x[i])


def test_one_device_function_called_with_an_int_and_a_float_in_the_same_kernel(backend):
    n = 21
    x = np.linspace(-2.0, 3.0, n)
    ints = kk.zeros(backend, np.int64, n)
    floats = kk.zeros(backend, np.float64, n)
    launch(backend, square_of_int_and_of_float, ints, floats, kk.to_backend(backend, x), ndrange=n)
    np.testing.assert_array_equal(kk.to_numpy(ints), np.arange(n) ** 2)
    np.testing.assert_array_equal(kk.to_numpy(floats), x * x)


@kk.kernel
def apply_floor_divmod(quotient, remainder, a: kk.Const, b: kk.Const):
    i = kk.index(kk.Global)
    q, r = floor_divmod(a[i], b[i])
    quotient[i] = q
    remainder[i] = r


@pytest.mark.parametrize("dtype", [np.int32, np.float64], ids=lambda d: np.dtype(d).name)
def test_device_function_returns_a_tuple(backend, dtype):
    a = np.array([-7, 7, -7, 7, 0, 13, -13], dtype)
    b = np.array([2, 2, -2, -2, 5, -5, 4], dtype)
    quotient, remainder = kk.zeros(backend, dtype, len(a)), kk.zeros(backend, dtype, len(a))
    launch(backend, apply_floor_divmod, quotient, remainder, kk.to_backend(backend, a), kk.to_backend(backend, b),
           ndrange=len(a))
    np.testing.assert_array_equal(kk.to_numpy(quotient), np.floor_divide(a, b))
    np.testing.assert_array_equal(kk.to_numpy(remainder), np.remainder(a, b))


@kk.kernel
def apply_sign(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = sign(x[i])


def test_device_function_with_several_return_statements(backend):
    x = np.array([-2.5, 0.0, 3.0, -0.1, 7.0], np.float32)
    y = kk.zeros(backend, np.int8, len(x))
    launch(backend, apply_sign, y, kk.to_backend(backend, x), ndrange=len(x))
    np.testing.assert_array_equal(kk.to_numpy(y), np.sign(x))


@kk.kernel
def apply_integer_power(y, base: kk.Const, exponent: kk.Const):
    i = kk.index(kk.Global)
    y[i] = integer_power(base[i], exponent[i])


def test_device_function_with_a_loop(backend):
    base = np.array([3, -2, 7, 1, 5], np.int64)
    exponent = np.array([4, 3, 0, 9, 2], np.int64)
    y = kk.zeros(backend, np.int64, len(base))
    launch(backend, apply_integer_power, y, kk.to_backend(backend, base), kk.to_backend(backend, exponent),
           ndrange=len(base))
    np.testing.assert_array_equal(kk.to_numpy(y), base**exponent)


@kk.kernel
def mirror_pairs(out, x: kk.Const):
    i = kk.index(kk.Global)
    write_pair(out, i, x[i])


def test_device_function_writes_into_an_array_argument(backend):
    x = np.arange(1, 12, dtype=np.float64)
    out = kk.zeros(backend, np.float64, 2 * len(x))
    launch(backend, mirror_pairs, out, kk.to_backend(backend, x), ndrange=len(x))
    np.testing.assert_array_equal(kk.to_numpy(out), np.stack([x, -x], axis=1).ravel())


@kk.kernel
def index_from_helper(y):
    i = global_index()
    y[i] = i * 3


def test_device_function_may_use_kernel_intrinsics(backend):
    n = 40
    y = kk.zeros(backend, np.int64, n)
    launch(backend, index_from_helper, y, ndrange=n)
    np.testing.assert_array_equal(kk.to_numpy(y), 3 * np.arange(n))


@kk.kernel
def apply_gelu(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = gelu(x[i])


def test_device_function_using_math_functions(backend):
    x = np.linspace(-3.0, 3.0, 33)
    y = kk.zeros(backend, np.float64, len(x))
    launch(backend, apply_gelu, y, kk.to_backend(backend, x), ndrange=len(x))
    expected = [0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0))) for v in x]
    np.testing.assert_allclose(kk.to_numpy(y), expected, rtol=1e-12, atol=1e-15)


@kk.kernel
def calls_a_function_defined_below(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = defined_after_the_kernel(x[i])


def defined_after_the_kernel(v):
    return v + 100


def test_helper_defined_after_the_kernel_is_found_at_launch(backend):
    x = np.arange(10, dtype=np.int32)
    y = kk.zeros(backend, np.int32, len(x))
    launch(backend, calls_a_function_defined_below, y, kk.to_backend(backend, x), ndrange=len(x))
    np.testing.assert_array_equal(kk.to_numpy(y), x + 100)


# --- nested helpers and closure constants --------------------------------------------


def test_kernel_calls_a_nested_function(backend):
    def cube_plus_one(v):
        return v * v * v + 1

    @kk.kernel
    def apply_cube_plus_one(y, x: kk.Const):
        i = kk.index(kk.Global)
        y[i] = cube_plus_one(x[i])

    x = np.arange(-6, 6, dtype=np.int32)
    y = kk.zeros(backend, np.int32, len(x))
    launch(backend, apply_cube_plus_one, y, kk.to_backend(backend, x), ndrange=len(x))
    np.testing.assert_array_equal(kk.to_numpy(y), x**3 + 1)


def test_closure_constants_are_used_by_the_kernel_and_its_nested_helpers(backend):
    factor = 3
    shift = 0.25

    def shifted(v):
        return v + shift

    @kk.kernel
    def scale_and_shift(y, x: kk.Const):
        i = kk.index(kk.Global)
        y[i] = shifted(x[i] * factor)

    x = np.arange(15, dtype=np.float64)
    y = kk.zeros(backend, np.float64, len(x))
    launch(backend, scale_and_shift, y, kk.to_backend(backend, x), ndrange=len(x))
    np.testing.assert_array_equal(kk.to_numpy(y), x * 3 + 0.25)


def make_scaler(factor):
    @kk.kernel
    def scale(y, x: kk.Const):
        i = kk.index(kk.Global)
        y[i] = x[i] * factor

    return scale


def test_kernels_differing_only_in_a_closure_constant_give_their_own_results(backend):
    x = np.arange(12, dtype=np.int64)
    results = []
    for factor in (2, 5, 2, -1):
        y = kk.zeros(backend, np.int64, len(x))
        launch(backend, make_scaler(factor), y, kk.to_backend(backend, x), ndrange=len(x))
        results.append(kk.to_numpy(y))
    for factor, result in zip((2, 5, 2, -1), results):
        np.testing.assert_array_equal(result, x * factor)


@kk.kernel
def apply_module_constants(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = scaled_with_offset(x[i]) + SCALE


def test_module_constants_in_the_kernel_and_in_a_helper(backend):
    x = np.arange(10, dtype=np.float32) / 4
    y = kk.zeros(backend, np.float32, len(x))
    launch(backend, apply_module_constants, y, kk.to_backend(backend, x), ndrange=len(x))
    np.testing.assert_array_equal(kk.to_numpy(y), x * np.float32(2.5) + np.float32(7) + np.float32(2.5))


# --- specialization ------------------------------------------------------------------


@kk.kernel
def third(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i] / 3


def test_one_kernel_specialized_for_float32_then_float64_then_float32_again(backend):
    host = np.arange(1, 30, dtype=np.float64) * 0.7
    for dtype in (np.float32, np.float64, np.float32):
        x = host.astype(dtype)
        y = kk.zeros(backend, dtype, len(x))
        launch(backend, third, y, kk.to_backend(backend, x), ndrange=len(x))
        result = kk.to_numpy(y)
        assert result.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(result, x / 3)


@kk.kernel
def wrap_add(y, a: kk.Const, b: kk.Const):
    i = kk.index(kk.Global)
    y[i] = a[i] + b[i]


def test_one_kernel_specialized_for_int32_and_int64_wraps_only_in_int32(backend):
    for dtype in (np.int32, np.int64):
        a = np.array([2**31 - 1, 5], dtype)
        b = np.array([1, -5], dtype)
        y = kk.zeros(backend, np.int64, 2)
        launch(backend, wrap_add, y, kk.to_backend(backend, a), kk.to_backend(backend, b), ndrange=2)
        np.testing.assert_array_equal(kk.to_numpy(y), (a + b).astype(np.int64))


@kk.kernel
def increment_any_dimension(y, x: kk.Const):
    I = kk.index(kk.Global, kk.NTuple)
    y[I] = x[I] + 1


@pytest.mark.parametrize("shape", [(17,), (5, 7), (3, 4, 5)], ids=["1d", "2d", "3d"])
def test_one_kernel_specialized_for_arrays_of_each_dimension(backend, shape):
    host = np.arange(np.prod(shape), dtype=np.int32).reshape(shape)
    y = kk.zeros(backend, np.int32, shape)
    increment_any_dimension(backend)(y, kk.to_backend(backend, host), ndrange=shape)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(y), host + 1)


def test_one_kernel_specialized_for_contiguous_and_strided_layouts(backend):
    host = np.arange(40, dtype=np.float32)
    base = kk.to_backend(backend, host)
    contiguous_result = kk.zeros(backend, np.float32, 20)
    strided_result = kk.zeros(backend, np.float32, 20)
    launch(backend, third, contiguous_result, base[:20], ndrange=20)
    launch(backend, third, strided_result, base[::2], ndrange=20)
    np.testing.assert_array_equal(kk.to_numpy(contiguous_result), host[:20] / 3)
    np.testing.assert_array_equal(kk.to_numpy(strided_result), host[::2] / 3)
