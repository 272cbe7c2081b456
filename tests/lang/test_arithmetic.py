"""Arithmetic inside kernels, on every backend, checked against NumPy.

Covers every array dtype, NumPy's NEP 50 promotion (Python scalars are weak, NumPy
scalars are not), Python's floor semantics for // and %, powers, bit operations, casts,
comparisons, float16, and the math functions with their kk.* twins.

Promotion tests write into an output wider than the expected result type and use
values for which a wrongly chosen (narrower or wider) intermediate type gives a
different answer; each such test also asserts that the values really discriminate.
"""
import math

import numpy as np
import pytest

import kernelkit as kk

INTEGER_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
FLOAT_DTYPES = [np.float16, np.float32, np.float64]
NUMERIC_DTYPES = INTEGER_DTYPES + FLOAT_DTYPES
ALL_DTYPES = [np.bool_] + NUMERIC_DTYPES

N = 37  # not a multiple of WORKGROUP: the last work-group is masked
WORKGROUP = 16


def run_elementwise(backend, kernel, out_dtypes, *inputs):
    """Launch kernel(*outputs, *inputs) with one work-item per element; return the outputs.

    NumPy arrays among the inputs are moved to the backend; other inputs (scalars) are
    passed as they are. Outputs start as zeros of the given dtypes.
    """
    n = next(len(a) for a in inputs if isinstance(a, np.ndarray))
    outputs = [kk.zeros(backend, dtype, n) for dtype in out_dtypes]
    args = [kk.to_backend(backend, a) if isinstance(a, np.ndarray) else a for a in inputs]
    kernel(backend, WORKGROUP)(*outputs, *args, ndrange=n)
    kk.synchronize(backend)
    return [kk.to_numpy(out) for out in outputs]


def sample(dtype, seed=0, n=N):
    """Small values of dtype: no overflow under a few additions, exact in float16."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(n) < 0.5
    if dtype.kind == "u":
        return rng.integers(0, 100, n).astype(dtype)
    if dtype.kind == "i":
        return rng.integers(-50, 50, n).astype(dtype)
    return (rng.integers(-50, 50, n) / 4).astype(dtype)


def nonzero_sample(dtype, seed=1):
    values = sample(dtype, seed)
    values[values == 0] = 3
    return values


def extreme_values(dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.array([True, False])
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.array([info.min, info.max, 0, 1, info.max - 1], dtype)
    info = np.finfo(dtype)
    return np.array([info.max, -info.max, info.tiny, -0.0, np.inf, -np.inf, np.nan, info.eps], dtype)


# --- kernels -------------------------------------------------------------------------


@kk.kernel
def copy(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i]


@kk.kernel
def double_plus_one(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i] * 2 + 1


@kk.kernel
def add_sub_mul(total, difference, product, a: kk.Const, b: kk.Const):
    i = kk.index(kk.Global)
    total[i] = a[i] + b[i]
    difference[i] = a[i] - b[i]
    product[i] = a[i] * b[i]


@kk.kernel
def add(y, a: kk.Const, b: kk.Const):
    i = kk.index(kk.Global)
    y[i] = a[i] + b[i]


@kk.kernel
def divide(y, a: kk.Const, b: kk.Const):
    i = kk.index(kk.Global)
    y[i] = a[i] / b[i]


@kk.kernel
def times_literal_tenth(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i] * 0.1


@kk.kernel
def times_numpy_float64_tenth(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i] * np.float64(0.1)


@kk.kernel
def times_numpy_float32_tenth(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i] * np.float32(0.1)


@kk.kernel
def times_scalar(y, x: kk.Const, s):
    i = kk.index(kk.Global)
    y[i] = x[i] * s


@kk.kernel
def plus_literal_one(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i] + 1


@kk.kernel
def plus_literal_two_hundred(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i] + 200


@kk.kernel
def divide_by_literal_three(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i] / 3


@kk.kernel
def floordiv_mod(quotient, remainder, a: kk.Const, b: kk.Const):
    i = kk.index(kk.Global)
    quotient[i] = a[i] // b[i]
    remainder[i] = a[i] % b[i]


@kk.kernel
def floordiv_mod_by_minus_three(quotient, remainder, a: kk.Const):
    i = kk.index(kk.Global)
    quotient[i] = a[i] // -3
    remainder[i] = a[i] % -3


@kk.kernel
def cube(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i] ** 3


@kk.kernel
def power(y, base: kk.Const, exponent: kk.Const):
    i = kk.index(kk.Global)
    y[i] = base[i] ** exponent[i]


@kk.kernel
def power_one_half(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i] ** 0.5


@kk.kernel
def bit_ops(and_result, or_result, xor_result, invert_result, a: kk.Const, b: kk.Const):
    i = kk.index(kk.Global)
    and_result[i] = a[i] & b[i]
    or_result[i] = a[i] | b[i]
    xor_result[i] = a[i] ^ b[i]
    invert_result[i] = ~a[i]


@kk.kernel
def bool_logic(and_result, or_result, xor_result, a: kk.Const, b: kk.Const):
    i = kk.index(kk.Global)
    and_result[i] = a[i] & b[i]
    or_result[i] = a[i] | b[i]
    xor_result[i] = a[i] ^ b[i]


@kk.kernel
def shifts(left, right, a: kk.Const, amount: kk.Const):
    i = kk.index(kk.Global)
    left[i] = a[i] << amount[i]
    right[i] = a[i] >> amount[i]


@kk.kernel
def shifts_by_literals(left, right, a: kk.Const):
    i = kk.index(kk.Global)
    left[i] = a[i] << 3
    right[i] = a[i] >> 2


@kk.kernel
def negate(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = -x[i]


@kk.kernel
def float_casts(as_int, as_float, as_bool, as_float32, as_int64, x: kk.Const):
    i = kk.index(kk.Global)
    v = x[i]
    as_int[i] = int(v)
    as_float[i] = float(v)
    as_bool[i] = bool(v)
    as_float32[i] = np.float32(v)
    as_int64[i] = np.int64(v)


@kk.kernel
def int_to_float_casts(as_float, as_float32, x: kk.Const):
    i = kk.index(kk.Global)
    as_float[i] = float(x[i])
    as_float32[i] = np.float32(x[i])


@kk.kernel
def narrowing_int_casts(via_int8, via_uint16, x: kk.Const):
    i = kk.index(kk.Global)
    via_int8[i] = np.int8(x[i]) + 100
    via_uint16[i] = np.uint16(x[i]) * 1000


@kk.kernel
def index_as_float_over_three(y):
    i = kk.index(kk.Global)
    y[i] = float(i) / 3


@kk.kernel
def store_times_one_and_a_half(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i] * 1.5


@kk.kernel
def abs_min_max(absolute, smaller, larger, a: kk.Const, b: kk.Const):
    i = kk.index(kk.Global)
    absolute[i] = abs(a[i])
    smaller[i] = min(a[i], b[i])
    larger[i] = max(a[i], b[i])


@kk.kernel
def clip_with_literals(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = min(max(x[i], 0), 4.5)


@kk.kernel
def min_max_of_three(smallest, largest, a: kk.Const, b: kk.Const, c: kk.Const):
    i = kk.index(kk.Global)
    smallest[i] = min(a[i], b[i], c[i])
    largest[i] = max(a[i], b[i], c[i])


@kk.kernel
def compare(eq, ne, lt, le, gt, ge, a: kk.Const, b: kk.Const):
    i = kk.index(kk.Global)
    eq[i] = a[i] == b[i]
    ne[i] = a[i] != b[i]
    lt[i] = a[i] < b[i]
    le[i] = a[i] <= b[i]
    gt[i] = a[i] > b[i]
    ge[i] = a[i] >= b[i]


@kk.kernel
def augmented_int_updates(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] += x[i]
    y[i] *= 3
    y[i] -= 1
    y[i] //= 2
    y[i] %= 7
    y[i] <<= 1
    y[i] |= 1
    y[i] ^= 4


@kk.kernel
def augmented_float_updates(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] += x[i]
    y[i] *= 3
    y[i] -= 1
    y[i] /= 4


@kk.kernel
def float_four_ops(total, difference, product, quotient, less, a: kk.Const, b: kk.Const):
    i = kk.index(kk.Global)
    total[i] = a[i] + b[i]
    difference[i] = a[i] - b[i]
    product[i] = a[i] * b[i]
    quotient[i] = a[i] / b[i]
    less[i] = a[i] < b[i]


# --- every dtype ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_copy_preserves_every_value_of_every_dtype(backend, dtype):
    x = np.concatenate([extreme_values(dtype), sample(dtype)])
    (y,) = run_elementwise(backend, copy, [dtype], x)
    assert y.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(y, x)
    if np.dtype(dtype).kind == "f":
        finite = ~np.isnan(x)
        np.testing.assert_array_equal(np.signbit(y[finite]), np.signbit(x[finite]))


@pytest.mark.parametrize("dtype", NUMERIC_DTYPES, ids=lambda d: np.dtype(d).name)
def test_weak_python_int_arithmetic_computes_in_the_array_dtype(backend, dtype):
    x = sample(dtype)
    expected = x * 2 + 1
    assert expected.dtype == np.dtype(dtype)
    (y,) = run_elementwise(backend, double_plus_one, [dtype], x)
    np.testing.assert_array_equal(y, expected)


@pytest.mark.parametrize("dtype", NUMERIC_DTYPES, ids=lambda d: np.dtype(d).name)
def test_add_sub_mul_match_numpy_including_integer_wraparound(backend, dtype):
    a, b = sample(dtype, seed=0), sample(dtype, seed=1)
    total, difference, product = run_elementwise(backend, add_sub_mul, [dtype] * 3, a, b)
    np.testing.assert_array_equal(total, a + b)
    np.testing.assert_array_equal(difference, a - b)
    np.testing.assert_array_equal(product, a * b)


@pytest.mark.parametrize("dtype", NUMERIC_DTYPES, ids=lambda d: np.dtype(d).name)
def test_true_division_gives_numpy_result_type_and_value(backend, dtype):
    a, b = sample(dtype, seed=0), nonzero_sample(dtype, seed=1)
    expected = a / b
    (y,) = run_elementwise(backend, divide, [expected.dtype], a, b)
    np.testing.assert_array_equal(y, expected)


# --- NEP 50 promotion ----------------------------------------------------------------

MIXED_ARRAY_PROMOTIONS = [
    pytest.param(np.array([2**31 - 1, -5], np.int32), np.array([1, 2], np.int64), np.int64, id="int32+int64"),
    pytest.param(np.array([2**24 + 1, 3], np.int32), np.array([0.0, 0.5], np.float32), np.float64, id="int32+float32"),
    pytest.param(np.array([200, 255], np.uint8), np.array([100, -1], np.int8), np.int16, id="uint8+int8"),
    pytest.param(np.array([2**32 - 1, 7], np.uint32), np.array([1, -9], np.int32), np.int64, id="uint32+int32"),
    pytest.param(np.array([2**64 - 1, 5], np.uint64), np.array([1, -2], np.int64), np.float64, id="uint64+int64"),
    pytest.param(np.array([2048, 1.5], np.float16), np.array([1.0, 0.25], np.float32), np.float32, id="float16+float32"),
    pytest.param(np.array([1 / 3, 0.1], np.float32), np.array([1 / 3, 0.2], np.float64), np.float64, id="float32+float64"),
    pytest.param(np.array([True, False]), np.array([127, -3], np.int8), np.int8, id="bool+int8"),
]


@pytest.mark.parametrize("a, b, result_dtype", MIXED_ARRAY_PROMOTIONS)
def test_mixed_array_dtypes_promote_like_numpy(backend, a, b, result_dtype):
    expected = a + b
    assert expected.dtype == np.dtype(result_dtype)
    (y,) = run_elementwise(backend, add, [result_dtype], a, b)
    np.testing.assert_array_equal(y, expected)


WEAK_FLOAT_LITERAL_CASES = [
    pytest.param(np.float16, np.float16, id="float16"),
    pytest.param(np.float32, np.float32, id="float32"),
    pytest.param(np.float64, np.float64, id="float64"),
    pytest.param(np.int8, np.float64, id="int8"),
    pytest.param(np.int64, np.float64, id="int64"),
    pytest.param(np.bool_, np.float64, id="bool"),
]


@pytest.mark.parametrize("dtype, result_dtype", WEAK_FLOAT_LITERAL_CASES)
def test_python_float_literal_is_weak(backend, dtype, result_dtype):
    x = np.array([1 / 3, 2 / 3, 0.7, 1.1, 3.3, 7.9, 3, -7, 11, 1]).astype(dtype)
    expected = x * 0.1
    assert expected.dtype == np.dtype(result_dtype)
    (y,) = run_elementwise(backend, times_literal_tenth, [np.float64], x)
    np.testing.assert_array_equal(y, expected.astype(np.float64))
    if result_dtype != np.float64:
        assert not np.array_equal(y, x.astype(np.float64) * 0.1)


@pytest.mark.parametrize("dtype", [np.float16, np.float32], ids=lambda d: np.dtype(d).name)
def test_numpy_float64_literal_promotes_narrow_floats_to_float64(backend, dtype):
    x = np.array([1 / 3, 2 / 3, 0.7, 1.1, 3.3, 7.9], dtype)
    expected = x * np.float64(0.1)
    assert expected.dtype == np.float64
    (y,) = run_elementwise(backend, times_numpy_float64_tenth, [np.float64], x)
    np.testing.assert_array_equal(y, expected)
    assert not np.array_equal(y, (x * 0.1).astype(np.float64))


@pytest.mark.parametrize(
    "dtype, result_dtype",
    [(np.float16, np.float32), (np.float32, np.float32), (np.float64, np.float64)],
    ids=["float16", "float32", "float64"],
)
def test_numpy_float32_literal_is_a_strong_float32(backend, dtype, result_dtype):
    x = np.array([1 / 3, 2 / 3, 0.7, 1.1, 3.3, 7.9], dtype)
    expected = x * np.float32(0.1)
    assert expected.dtype == np.dtype(result_dtype)
    (y,) = run_elementwise(backend, times_numpy_float32_tenth, [np.float64], x)
    np.testing.assert_array_equal(y, expected.astype(np.float64))


SCALAR_ARGUMENT_CASES = [
    pytest.param(np.float32, 0.1, np.float32, id="float32*python-float"),
    pytest.param(np.float32, np.float64(0.1), np.float64, id="float32*np.float64"),
    pytest.param(np.float32, np.float32(0.1), np.float32, id="float32*np.float32"),
    pytest.param(np.float16, np.float32(0.1), np.float32, id="float16*np.float32"),
    pytest.param(np.int32, 3, np.int32, id="int32*python-int"),
    pytest.param(np.int32, np.int64(3), np.int64, id="int32*np.int64"),
    pytest.param(np.int32, 0.5, np.float64, id="int32*python-float"),
]


@pytest.mark.parametrize("dtype, scalar, result_dtype", SCALAR_ARGUMENT_CASES)
def test_scalar_launch_arguments_promote_like_numpy_scalars(backend, dtype, scalar, result_dtype):
    if np.dtype(dtype).kind == "f":
        x = np.array([1 / 3, 2 / 3, 0.7, 1.1, 3.3, 7.9], dtype)
    else:
        x = np.array([2**30, 7, -5, 2**31 - 1, 1, 0], dtype)
    expected = x * scalar
    assert expected.dtype == np.dtype(result_dtype)
    (y,) = run_elementwise(backend, times_scalar, [np.float64], x, scalar)
    np.testing.assert_array_equal(y, expected.astype(np.float64))


@pytest.mark.parametrize(
    "x",
    [np.array([2**31 - 1, 5, -3], np.int32), np.array([255, 3, 0], np.uint8), np.array([32767, -1, 4], np.int16)],
    ids=["int32", "uint8", "int16"],
)
def test_integer_plus_python_int_stays_in_the_array_dtype_and_wraps(backend, x):
    expected = x + 1
    assert expected.dtype == x.dtype
    (y,) = run_elementwise(backend, plus_literal_one, [np.int64], x)
    np.testing.assert_array_equal(y, expected.astype(np.int64))
    assert not np.array_equal(y, x.astype(np.int64) + 1)


def test_bool_plus_python_int_gives_default_int(backend):
    x = np.array([True, False, True])
    expected = x + 200
    assert expected.dtype == np.int64
    (y,) = run_elementwise(backend, plus_literal_two_hundred, [np.int64], x)
    np.testing.assert_array_equal(y, [201, 200, 201])


@pytest.mark.parametrize("dtype", [np.float16, np.float32], ids=lambda d: np.dtype(d).name)
def test_narrow_float_divided_by_python_int_stays_narrow(backend, dtype):
    x = np.array([1, 2, 5, 7, 10, 11], dtype)
    expected = x / 3
    assert expected.dtype == np.dtype(dtype)
    (y,) = run_elementwise(backend, divide_by_literal_three, [np.float64], x)
    np.testing.assert_array_equal(y, expected.astype(np.float64))
    assert not np.array_equal(y, x.astype(np.float64) / 3)


# --- //, %, ** -----------------------------------------------------------------------

SIGNED_NUMERATORS = [-7, 7, -7, 7, -1, 0, 6, -6, 13, -13]
SIGNED_DENOMINATORS = [2, 2, -2, -2, 3, 5, 3, 4, -5, -5]


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64], ids=lambda d: np.dtype(d).name)
def test_integer_floordiv_and_mod_use_floor_semantics_for_negative_values(backend, dtype):
    a = np.array(SIGNED_NUMERATORS, dtype)
    b = np.array(SIGNED_DENOMINATORS, dtype)
    quotient, remainder = run_elementwise(backend, floordiv_mod, [dtype, dtype], a, b)
    np.testing.assert_array_equal(quotient, np.floor_divide(a, b))
    np.testing.assert_array_equal(remainder, np.remainder(a, b))
    assert quotient[0] == -4 and remainder[0] == 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_float_floordiv_and_mod_use_floor_semantics_for_negative_values(backend, dtype):
    a = np.array([-7.5, 7.5, -7.5, 7.5, -1.0, 0.5, 5.25, -5.25], dtype)
    b = np.array([2.0, 2.0, -2.0, -2.0, 3.0, 0.25, -1.5, 1.5], dtype)
    quotient, remainder = run_elementwise(backend, floordiv_mod, [dtype, dtype], a, b)
    np.testing.assert_array_equal(quotient, np.floor_divide(a, b))
    np.testing.assert_array_equal(remainder, np.remainder(a, b))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float64], ids=lambda d: np.dtype(d).name)
def test_floordiv_and_mod_by_negative_literal(backend, dtype):
    a = np.array([-7, 7, -1, 0, 6, -6, 13, 2], dtype)
    quotient, remainder = run_elementwise(backend, floordiv_mod_by_minus_three, [dtype, dtype], a)
    np.testing.assert_array_equal(quotient, a // -3)
    np.testing.assert_array_equal(remainder, a % -3)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64], ids=lambda d: np.dtype(d).name)
def test_integer_power_with_literal_exponent_stays_integer_and_wraps(backend, dtype):
    x = np.array([-6, 5, -1, 0, 3, 2], dtype)
    expected = x**3
    assert expected.dtype == np.dtype(dtype)
    (y,) = run_elementwise(backend, cube, [np.int64], x)
    np.testing.assert_array_equal(y, expected.astype(np.int64))


def test_float32_power_with_literal_exponent_stays_float32(backend):
    x = np.array([1.1, -2.5, 0.3, 7.0, 1 / 3], np.float32)
    (y,) = run_elementwise(backend, cube, [np.float32], x)
    np.testing.assert_allclose(y, x.astype(np.float64) ** 3, rtol=1e-6)


def test_integer_power_with_runtime_exponent(backend):
    base = np.array([3, -2, 7, 9, 2, -1, 0], np.int64)
    exponent = np.array([2, 3, 0, 1, 10, 5, 4], np.int64)
    (y,) = run_elementwise(backend, power, [np.int64], base, exponent)
    np.testing.assert_array_equal(y, base**exponent)


@pytest.mark.parametrize("dtype, rtol", [(np.float32, 1e-5), (np.float64, 1e-12)], ids=["float32", "float64"])
def test_float_power_with_runtime_exponent(backend, dtype, rtol):
    rng = np.random.default_rng(7)
    base = rng.uniform(0.1, 3.0, N).astype(dtype)
    exponent = rng.uniform(-2.0, 2.0, N).astype(dtype)
    (y,) = run_elementwise(backend, power, [dtype], base, exponent)
    np.testing.assert_allclose(y, base.astype(np.float64) ** exponent.astype(np.float64), rtol=rtol)


def test_power_one_half_is_square_root(backend):
    x = np.random.default_rng(8).uniform(0.0, 10.0, N)
    (y,) = run_elementwise(backend, power_one_half, [np.float64], x)
    np.testing.assert_allclose(y, np.sqrt(x), rtol=1e-15)


# --- bit operations ------------------------------------------------------------------

BIT_DTYPES = [np.int8, np.int32, np.int64, np.uint8, np.uint32, np.uint64]


def full_range_sample(dtype, seed, n=N):
    info = np.iinfo(dtype)
    return np.random.default_rng(seed).integers(info.min, info.max, n, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("dtype", BIT_DTYPES, ids=lambda d: np.dtype(d).name)
def test_and_or_xor_invert_match_numpy(backend, dtype):
    a, b = full_range_sample(dtype, 0), full_range_sample(dtype, 1)
    results = run_elementwise(backend, bit_ops, [dtype] * 4, a, b)
    for result, expected in zip(results, [a & b, a | b, a ^ b, ~a]):
        np.testing.assert_array_equal(result, expected)


def test_bool_and_or_xor_are_logical(backend):
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    results = run_elementwise(backend, bool_logic, [np.bool_] * 3, a, b)
    for result, expected in zip(results, [a & b, a | b, a ^ b]):
        np.testing.assert_array_equal(result, expected)


@pytest.mark.parametrize("dtype", BIT_DTYPES, ids=lambda d: np.dtype(d).name)
def test_shifts_match_numpy_with_arithmetic_right_shift_for_signed(backend, dtype):
    a = full_range_sample(dtype, 2)
    amount = np.random.default_rng(3).integers(0, np.iinfo(dtype).bits, N).astype(dtype)
    left, right = run_elementwise(backend, shifts, [dtype, dtype], a, amount)
    np.testing.assert_array_equal(left, np.left_shift(a, amount))
    np.testing.assert_array_equal(right, np.right_shift(a, amount))


def test_shifts_by_literals_keep_uint8_and_wrap(backend):
    a = np.array([200, 1, 255, 37, 0], np.uint8)
    left, right = run_elementwise(backend, shifts_by_literals, [np.int64, np.int64], a)
    np.testing.assert_array_equal(left, (a << 3).astype(np.int64))
    np.testing.assert_array_equal(right, (a >> 2).astype(np.int64))
    assert left[0] == 64


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_unary_minus(backend, dtype):
    x = sample(dtype)
    (y,) = run_elementwise(backend, negate, [dtype], x)
    np.testing.assert_array_equal(y, -x)


# --- casts ---------------------------------------------------------------------------


def test_float_casts_truncate_toward_zero_and_round_to_float32(backend):
    x = np.array([-2.7, -0.5, 0.0, 0.5, 2.7, 1 / 3, 1e10 + 0.75, -1e10 - 0.75])
    as_int, as_float, as_bool, as_float32, as_int64 = run_elementwise(
        backend, float_casts, [np.int64, np.float64, np.bool_, np.float64, np.int64], x
    )
    np.testing.assert_array_equal(as_int, [-2, 0, 0, 0, 2, 0, 10**10, -(10**10)])
    np.testing.assert_array_equal(as_float, x)
    np.testing.assert_array_equal(as_bool, x != 0)
    np.testing.assert_array_equal(as_float32, x.astype(np.float32).astype(np.float64))
    np.testing.assert_array_equal(as_int64, x.astype(np.int64))


def test_int_to_float_casts_round_like_numpy(backend):
    x = np.array([2**24 + 1, -3, 2**53 + 1, 0], np.int64)
    as_float, as_float32 = run_elementwise(backend, int_to_float_casts, [np.float64, np.float64], x)
    np.testing.assert_array_equal(as_float, x.astype(np.float64))
    np.testing.assert_array_equal(as_float32, x.astype(np.float32).astype(np.float64))
    assert as_float32[0] == 2**24


def test_narrowing_integer_casts_produce_the_target_dtype(backend):
    x = np.array([100, 65, 7, 0, 27], np.int32)
    via_int8, via_uint16 = run_elementwise(backend, narrowing_int_casts, [np.int64, np.int64], x)
    np.testing.assert_array_equal(via_int8, (x.astype(np.int8) + 100).astype(np.int64))
    np.testing.assert_array_equal(via_uint16, (x.astype(np.uint16) * 1000).astype(np.int64))
    assert via_int8[0] == -56 and via_uint16[0] == 34464


def test_index_cast_to_float(backend):
    out = kk.zeros(backend, np.float64, N)
    index_as_float_over_three(backend, WORKGROUP)(out, ndrange=N)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(out), np.arange(N, dtype=np.float64) / 3)


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint16], ids=lambda d: np.dtype(d).name)
def test_storing_a_float_into_an_integer_array_truncates_like_numpy_astype(backend, dtype):
    x = np.array([-2.5, -1.0, 0.3, 1.0, 2.5, 3.9, 60.1])
    if np.dtype(dtype).kind == "u":
        x = np.abs(x)
    (y,) = run_elementwise(backend, store_times_one_and_a_half, [dtype], x)
    np.testing.assert_array_equal(y, (x * 1.5).astype(dtype))


# --- abs, min, max, comparisons ------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint16, np.float32, np.float64],
                         ids=lambda d: np.dtype(d).name)
def test_abs_min_max_match_numpy(backend, dtype):
    a, b = sample(dtype, 0), sample(dtype, 1)
    absolute, smaller, larger = run_elementwise(backend, abs_min_max, [dtype] * 3, a, b)
    np.testing.assert_array_equal(absolute, np.abs(a))
    np.testing.assert_array_equal(smaller, np.minimum(a, b))
    np.testing.assert_array_equal(larger, np.maximum(a, b))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_min_max_with_python_literals_keep_the_float_dtype(backend, dtype):
    x = sample(dtype)
    (y,) = run_elementwise(backend, clip_with_literals, [dtype], x)
    np.testing.assert_array_equal(y, np.clip(x, 0, 4.5))


def test_min_max_of_three_arguments(backend):
    a, b, c = sample(np.int32, 0), sample(np.int32, 1), sample(np.int32, 2)
    smallest, largest = run_elementwise(backend, min_max_of_three, [np.int32, np.int32], a, b, c)
    np.testing.assert_array_equal(smallest, np.minimum(np.minimum(a, b), c))
    np.testing.assert_array_equal(largest, np.maximum(np.maximum(a, b), c))


COMPARISON_CASES = [
    pytest.param(np.array([16777217, 1, 5, -3], np.int32), np.array([16777216, 1.5, 5, -3], np.float32),
                 id="int32-vs-float32"),
    pytest.param(np.array([-1, 3, 0, 2], np.int64), np.array([1, 2, 0, 2], np.uint64), id="int64-vs-uint64"),
    pytest.param(np.array([-1, 5, 127, 0], np.int8), np.array([255, 5, 0, 0], np.uint8), id="int8-vs-uint8"),
    pytest.param(np.array([0.1, 2.0, -1.5, 3.0], np.float16), np.array([0.1, 2.0, -1.5, 2.5], np.float64),
                 id="float16-vs-float64"),
]


@pytest.mark.parametrize("a, b", COMPARISON_CASES)
def test_comparisons_of_mixed_dtypes_match_numpy(backend, a, b):
    results = run_elementwise(backend, compare, [np.bool_] * 6, a, b)
    for result, expected in zip(results, [a == b, a != b, a < b, a <= b, a > b, a >= b]):
        np.testing.assert_array_equal(result, expected)


# --- augmented assignment to array elements ------------------------------------------


def test_augmented_assignment_to_int_array_elements(backend):
    start = sample(np.int32, 0)
    x = sample(np.int32, 1)
    y = kk.to_backend(backend, start.copy())
    augmented_int_updates(backend, WORKGROUP)(y, kk.to_backend(backend, x), ndrange=N)
    kk.synchronize(backend)
    expected = start.copy()
    expected += x
    expected *= 3
    expected -= 1
    expected //= 2
    expected %= 7
    expected <<= 1
    expected |= 1
    expected ^= 4
    np.testing.assert_array_equal(kk.to_numpy(y), expected)


def test_augmented_assignment_to_float_array_elements(backend):
    start = sample(np.float64, 0)
    x = sample(np.float64, 1)
    y = kk.to_backend(backend, start.copy())
    augmented_float_updates(backend, WORKGROUP)(y, kk.to_backend(backend, x), ndrange=N)
    kk.synchronize(backend)
    np.testing.assert_allclose(kk.to_numpy(y), ((start + x) * 3 - 1) / 4, rtol=1e-15)


# --- float16 -------------------------------------------------------------------------


def test_float16_arithmetic_rounds_each_operation_to_float16(backend):
    rng = np.random.default_rng(11)
    a = rng.uniform(-8, 8, N).astype(np.float16)
    b = rng.uniform(0.5, 8, N).astype(np.float16) * np.where(rng.random(N) < 0.5, -1, 1).astype(np.float16)
    total, difference, product, quotient, less = run_elementwise(
        backend, float_four_ops, [np.float16] * 4 + [np.bool_], a, b
    )
    np.testing.assert_array_equal(total, a + b)
    np.testing.assert_array_equal(difference, a - b)
    np.testing.assert_array_equal(product, a * b)
    np.testing.assert_array_equal(quotient, a / b)
    np.testing.assert_array_equal(less, a < b)


# --- math functions ------------------------------------------------------------------


@kk.kernel
def math_sqrt(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = math.sqrt(x[i])


@kk.kernel
def math_exp(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = math.exp(x[i])


@kk.kernel
def math_log(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = math.log(x[i])


@kk.kernel
def math_sin(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = math.sin(x[i])


@kk.kernel
def math_cos(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = math.cos(x[i])


@kk.kernel
def math_tan(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = math.tan(x[i])


@kk.kernel
def math_tanh(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = math.tanh(x[i])


@kk.kernel
def math_fabs(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = math.fabs(x[i])


@kk.kernel
def math_floor(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = math.floor(x[i])


@kk.kernel
def math_ceil(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = math.ceil(x[i])


@kk.kernel
def math_erf(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = math.erf(x[i])


@kk.kernel
def math_erfc(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = math.erfc(x[i])


@kk.kernel
def math_asin(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = math.asin(x[i])


@kk.kernel
def math_acos(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = math.acos(x[i])


@kk.kernel
def math_atan(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = math.atan(x[i])


@kk.kernel
def math_sinh(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = math.sinh(x[i])


@kk.kernel
def math_cosh(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = math.cosh(x[i])


@kk.kernel
def math_log10(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = math.log10(x[i])


@kk.kernel
def math_log2(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = math.log2(x[i])


@kk.kernel
def math_log1p(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = math.log1p(x[i])


@kk.kernel
def math_expm1(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = math.expm1(x[i])


@kk.kernel
def kk_sqrt(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = kk.sqrt(x[i])


@kk.kernel
def kk_exp(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = kk.exp(x[i])


@kk.kernel
def kk_log(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = kk.log(x[i])


@kk.kernel
def kk_sin(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = kk.sin(x[i])


@kk.kernel
def kk_cos(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = kk.cos(x[i])


@kk.kernel
def kk_tanh(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = kk.tanh(x[i])


@kk.kernel
def kk_erf(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = kk.erf(x[i])


@kk.kernel
def kk_floor(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = kk.floor(x[i])


@kk.kernel
def kk_fabs(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = kk.fabs(x[i])


def vectorized(scalar_function):
    return lambda values: np.array([scalar_function(v) for v in values])


UNARY_MATH_CASES = [
    pytest.param(math_sqrt, np.sqrt, (0.1, 4.0), id="math.sqrt"),
    pytest.param(math_exp, np.exp, (-2.0, 2.0), id="math.exp"),
    pytest.param(math_log, np.log, (0.1, 4.0), id="math.log"),
    pytest.param(math_sin, np.sin, (-1.5, 1.5), id="math.sin"),
    pytest.param(math_cos, np.cos, (-1.5, 1.5), id="math.cos"),
    pytest.param(math_tan, np.tan, (-1.2, 1.2), id="math.tan"),
    pytest.param(math_tanh, np.tanh, (-2.0, 2.0), id="math.tanh"),
    pytest.param(math_fabs, np.fabs, (-3.0, 3.0), id="math.fabs"),
    pytest.param(math_floor, np.floor, (-3.0, 3.0), id="math.floor"),
    pytest.param(math_ceil, np.ceil, (-3.0, 3.0), id="math.ceil"),
    pytest.param(math_erf, vectorized(math.erf), (-2.0, 2.0), id="math.erf"),
    pytest.param(math_erfc, vectorized(math.erfc), (-2.0, 2.0), id="math.erfc"),
    pytest.param(math_asin, np.arcsin, (-0.9, 0.9), id="math.asin"),
    pytest.param(math_acos, np.arccos, (-0.9, 0.9), id="math.acos"),
    pytest.param(math_atan, np.arctan, (-3.0, 3.0), id="math.atan"),
    pytest.param(math_sinh, np.sinh, (-2.0, 2.0), id="math.sinh"),
    pytest.param(math_cosh, np.cosh, (-2.0, 2.0), id="math.cosh"),
    pytest.param(math_log10, np.log10, (0.1, 4.0), id="math.log10"),
    pytest.param(math_log2, np.log2, (0.1, 4.0), id="math.log2"),
    pytest.param(math_log1p, np.log1p, (-0.5, 3.0), id="math.log1p"),
    pytest.param(math_expm1, np.expm1, (-2.0, 2.0), id="math.expm1"),
    pytest.param(kk_sqrt, np.sqrt, (0.1, 4.0), id="kk.sqrt"),
    pytest.param(kk_exp, np.exp, (-2.0, 2.0), id="kk.exp"),
    pytest.param(kk_log, np.log, (0.1, 4.0), id="kk.log"),
    pytest.param(kk_sin, np.sin, (-1.5, 1.5), id="kk.sin"),
    pytest.param(kk_cos, np.cos, (-1.5, 1.5), id="kk.cos"),
    pytest.param(kk_tanh, np.tanh, (-2.0, 2.0), id="kk.tanh"),
    pytest.param(kk_erf, vectorized(math.erf), (-2.0, 2.0), id="kk.erf"),
    pytest.param(kk_floor, np.floor, (-3.0, 3.0), id="kk.floor"),
    pytest.param(kk_fabs, np.fabs, (-3.0, 3.0), id="kk.fabs"),
]

FLOAT_TOLERANCES = [
    pytest.param(np.float32, 1e-5, 1e-6, id="float32"),
    pytest.param(np.float64, 1e-12, 1e-14, id="float64"),
]


@pytest.mark.parametrize("dtype, rtol, atol", FLOAT_TOLERANCES)
@pytest.mark.parametrize("kernel, reference, domain", UNARY_MATH_CASES)
def test_unary_math_function_matches_numpy(backend, kernel, reference, domain, dtype, rtol, atol):
    x = np.random.default_rng(3).uniform(*domain, N).astype(dtype)
    (y,) = run_elementwise(backend, kernel, [dtype], x)
    np.testing.assert_allclose(y, reference(x.astype(np.float64)), rtol=rtol, atol=atol)


@kk.kernel
def math_pow(y, a: kk.Const, b: kk.Const):
    i = kk.index(kk.Global)
    y[i] = math.pow(a[i], b[i])


@kk.kernel
def kk_pow(y, a: kk.Const, b: kk.Const):
    i = kk.index(kk.Global)
    y[i] = kk.pow(a[i], b[i])


@kk.kernel
def math_atan2(y, a: kk.Const, b: kk.Const):
    i = kk.index(kk.Global)
    y[i] = math.atan2(a[i], b[i])


@kk.kernel
def math_hypot(y, a: kk.Const, b: kk.Const):
    i = kk.index(kk.Global)
    y[i] = math.hypot(a[i], b[i])


@kk.kernel
def math_fmod(y, a: kk.Const, b: kk.Const):
    i = kk.index(kk.Global)
    y[i] = math.fmod(a[i], b[i])


BINARY_MATH_CASES = [
    pytest.param(math_pow, np.power, (0.1, 3.0), (-2.0, 2.0), id="math.pow"),
    pytest.param(kk_pow, np.power, (0.1, 3.0), (-2.0, 2.0), id="kk.pow"),
    pytest.param(math_atan2, np.arctan2, (-3.0, 3.0), (0.2, 3.0), id="math.atan2"),
    pytest.param(math_hypot, np.hypot, (-3.0, 3.0), (-3.0, 3.0), id="math.hypot"),
    pytest.param(math_fmod, np.fmod, (-10.0, 10.0), (0.5, 3.0), id="math.fmod"),
]


@pytest.mark.parametrize("dtype, rtol, atol", FLOAT_TOLERANCES)
@pytest.mark.parametrize("kernel, reference, domain_a, domain_b", BINARY_MATH_CASES)
def test_binary_math_function_matches_numpy(backend, kernel, reference, domain_a, domain_b, dtype, rtol, atol):
    rng = np.random.default_rng(5)
    a = rng.uniform(*domain_a, N).astype(dtype)
    b = rng.uniform(*domain_b, N).astype(dtype)
    (y,) = run_elementwise(backend, kernel, [dtype], a, b)
    np.testing.assert_allclose(y, reference(a.astype(np.float64), b.astype(np.float64)), rtol=rtol, atol=atol)


@kk.kernel
def squares(out, x):
    i = kk.index(kk.Global)
    out[i] = x[i] ** 2 - x[i] ** 2.0 + x[i] ** 2


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_float_squared_is_the_correctly_rounded_square(backend, dtype):
    """x ** 2 is x * x exactly (the correctly rounded square), where a vectorized pow
    may be an ulp off, in every lane of the work-item loop."""
    x = np.random.default_rng(3).uniform(-1e3, 1e3, 1000).astype(dtype)
    (out,) = run_elementwise(backend, squares, [dtype], x)
    np.testing.assert_array_equal(out, x * x)
