"""Scalar semantics at the edges of NumPy's rules (NEP 50) and Python's, on every backend:
comparisons of integers with Python ints out of their range and of signed with unsigned
integers, range() over bounds of mixed signedness, len(a) and a.shape as Python ints,
arithmetic on bools, and math.* as Python's float64 functions.

Each test uses values for which the rule it checks gives another answer than the
plausible wrong one (a literal converted to the element type first, a strong int64
extent, bools added as ints, math computed in float32)."""
import functools
import math
import re

import numpy as np
import pytest

import kernelkit as kk
from kernelkit.ir.math_functions import MATH_FUNCTIONS

import source_lines

line_starting_with = functools.partial(source_lines.line_starting_with, __file__)
assert_points_at = functools.partial(source_lines.assert_points_at, path=__file__)
INTEGER_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def launch(backend, kernel, outputs, *inputs, n=None):
    """Launch kernel(*outputs, *inputs) with n work-items (the first input's length by
    default); return the outputs as NumPy arrays."""
    n = n if n is not None else len(next(a for a in inputs if isinstance(a, np.ndarray)))
    on_backend = [kk.to_backend(backend, a) for a in outputs]
    args = [kk.to_backend(backend, a) if isinstance(a, np.ndarray) else a for a in inputs]
    kernel(backend, 4)(*on_backend, *args, ndrange=n)
    kk.synchronize(backend)
    return [kk.to_numpy(a) for a in on_backend]


def values_of(dtype):
    info = np.iinfo(dtype)
    return np.array([info.min, info.max, 0, 1, 50, info.max // 2 + 1], dtype)


# --- comparisons with Python ints ----------------------------------------------------


@kk.kernel
def compare_with_literals(out, a: kk.Const):
    i = kk.index(kk.Global)
    out[0, i] = a[i] < 300
    out[1, i] = a[i] > -1
    out[2, i] = a[i] == 300
    out[3, i] = a[i] != -129
    out[4, i] = a[i] >= 2**40
    out[5, i] = -2**40 < a[i]
    out[6, i] = 2**62 <= a[i]
    out[7, i] = a[i] <= -2**62


def literal_comparisons(a):
    return [a < 300, a > -1, a == 300, a != -129, a >= 2**40, -2**40 < a, 2**62 <= a, a <= -2**62]


@pytest.mark.parametrize("dtype", INTEGER_DTYPES, ids=lambda d: np.dtype(d).name)
def test_integer_compared_with_a_python_int_literal_compares_the_values(backend, dtype):
    a = values_of(dtype)
    (out,) = launch(backend, compare_with_literals, [np.zeros((8, len(a)), np.bool_)], a)
    expected = literal_comparisons(a)
    for row, want in enumerate(expected):
        np.testing.assert_array_equal(out[row], want, err_msg=f"comparison {row}")
    if np.iinfo(dtype).max < 300:
        # Converting the literal to the element type first gives other answers.
        assert not np.array_equal(a < dtype(300 % 2**np.iinfo(dtype).bits), expected[0])


@kk.kernel
def compare_with_argument(out, a: kk.Const, n):
    i = kk.index(kk.Global)
    out[0, i] = a[i] < n
    out[1, i] = a[i] >= n
    out[2, i] = n == a[i]
    out[3, i] = n > a[i]


@pytest.mark.parametrize("n", [300, -1, 2**40, -2**62, 2**63 - 1])
@pytest.mark.parametrize("dtype", INTEGER_DTYPES, ids=lambda d: np.dtype(d).name)
def test_integer_compared_with_a_python_int_argument_compares_the_values(backend, dtype, n):
    a = values_of(dtype)
    (out,) = launch(backend, compare_with_argument, [np.zeros((4, len(a)), np.bool_)], a, n)
    for row, want in enumerate([a < n, a >= n, n == a, n > a]):
        np.testing.assert_array_equal(out[row], want, err_msg=f"comparison {row}")


@kk.kernel
def compare_arrays(out, a: kk.Const, b: kk.Const):
    i = kk.index(kk.Global)
    out[0, i] = a[i] < b[i]
    out[1, i] = a[i] <= b[i]
    out[2, i] = a[i] == b[i]
    out[3, i] = a[i] != b[i]
    out[4, i] = b[i] > a[i]
    out[5, i] = b[i] >= a[i]


@pytest.mark.parametrize("signed_dtype", [np.int8, np.int64], ids=["int8", "int64"])
def test_signed_integer_compared_with_uint64_compares_the_values(backend, signed_dtype):
    info = np.iinfo(signed_dtype)
    a = np.array([info.max, -1, 0, info.min, info.max, 5], signed_dtype)
    b = np.array([2**63, 2**64 - 1, 0, 0, info.max, 5], np.uint64)
    (out,) = launch(backend, compare_arrays, [np.zeros((6, len(a)), np.bool_)], a, b)
    expected = [a < b, a <= b, a == b, a != b, b > a, b >= a]
    for row, want in enumerate(expected):
        np.testing.assert_array_equal(out[row], want, err_msg=f"comparison {row}")
    # int64 and uint64 promote to float64, where 2**63 - 1 and 2**63 are equal.
    if signed_dtype is np.int64:
        assert not np.array_equal(a.astype(np.float64) == b.astype(np.float64), expected[2])


# --- range() over bounds of mixed signedness ------------------------------------------


@kk.kernel
def count_range(out, start, stop, step):
    count = 0
    total = 0
    for k in range(start, stop, step):
        count += 1
        total += k
    out[0] = count
    out[1] = total


RANGE_CASES = [
    (-2, np.uint8(3), 1),
    (np.uint8(3), -1, -1),
    (np.uint8(250), 300, 1),
    (np.uint8(5), np.uint8(0), -1),
    (np.int64(-3), np.uint64(2), 1),
    (np.uint16(10), np.int8(-5), np.int8(-3)),
    (np.uint32(0), np.uint32(7), np.uint8(2)),
]


@pytest.mark.parametrize("start, stop, step", RANGE_CASES, ids=repr)
def test_range_over_bounds_of_mixed_signedness_counts_like_python(backend, start, stop, step):
    expected = range(int(start), int(stop), int(step))
    (out,) = launch(backend, count_range, [np.zeros(2, np.int64)], start, stop, step, n=1)
    np.testing.assert_array_equal(out, [len(expected), sum(expected)])


@kk.kernel
def count_constant_ranges(out):
    count = 0
    for k in range(-2, np.uint8(3)):
        count += 1
    out[0] = count
    count = 0
    for k in range(np.uint8(2), -3, -1):
        count += 1
    out[1] = count
    count = 0
    for k in range(np.uint8(250), 300):
        count += 1
    out[2] = count


def test_range_over_constant_bounds_of_mixed_signedness_counts_like_python(backend):
    (out,) = launch(backend, count_constant_ranges, [np.zeros(3, np.int64)], n=1)
    np.testing.assert_array_equal(out, [len(range(-2, 3)), len(range(2, -3, -1)),
                                        len(range(250, 300))])


@kk.kernel
def grid_stride_sum(out, x: kk.Const, n):
    i = kk.index(kk.Global)
    total = 0.0
    for p in range(i, n, kk.ndrange()[0]):
        total += x[p]
    out[i] = total


def test_an_int64_range_with_python_int_bounds_keeps_an_int64_counter(backend):
    x = np.arange(10, dtype=np.float64)
    args = (np.zeros(4), x, len(x))
    ir = kk.code_ir(grid_stride_sum, kk.CPU(), *args, ndrange=4, workgroupsize=4)
    block_params = re.findall(r"%\d+: (\w+)", ir.split("\n^bb1", 1)[1])
    assert "i64" in block_params and "int" not in block_params
    (out,) = launch(backend, grid_stride_sum, [args[0]], x, len(x), n=4)
    np.testing.assert_array_equal(out, [sum(x[k::4]) for k in range(4)])


# --- len(a) and a.shape are Python ints ------------------------------------------------


@kk.kernel
def add_extents(out, a: kk.Const):
    i = kk.index(kk.Global)
    out[0, i] = a[i] + len(a)
    out[1, i] = a[i] + a.shape[0]
    out[2, i] = a[i] + a.size
    scratch = kk.localmem(np.uint8, 4)
    out[3, i] = a[i] + len(scratch)


def test_len_and_shape_are_python_ints_that_take_the_element_type(backend):
    a = np.array([254, 253, 1, 0], np.uint8)
    (out,) = launch(backend, add_extents, [np.zeros((4, len(a)), np.int64)], a)
    expected = a + np.uint8(len(a))  # uint8: 254 + 4 wraps to 2
    for row in range(4):
        np.testing.assert_array_equal(out[row], expected)
    assert not np.array_equal(expected, a.astype(np.int64) + len(a))


# --- bools ----------------------------------------------------------------------------


@kk.kernel
def bool_arithmetic(as_int, as_float, a: kk.Const, b: kk.Const, f: kk.Const):
    i = kk.index(kk.Global)
    as_int[0, i] = a[i] + b[i]
    as_int[1, i] = a[i] * b[i]
    as_int[2, i] = min(a[i], b[i])
    as_int[3, i] = max(a[i], b[i])
    as_int[4, i] = abs(a[i])
    as_int[5, i] = a[i] // b[i] + np.int8(127)
    as_int[6, i] = a[i] % b[i] + np.int8(127)
    as_int[7, i] = a[i] ** b[i] + np.int8(127)
    as_int[8, i] = (a[i] << b[i]) + np.int8(127)
    as_int[9, i] = (a[i] >> b[i]) + np.int8(127)
    as_float[0, i] = a[i] / b[i] + f[i]
    as_float[1, i] = a[i] + 1.5
    as_float[2, i] = a[i] * f[i]


def test_bool_arithmetic_follows_numpy_bool_rules(backend):
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    f = np.full(4, 0.1, np.float32)
    as_int, as_float = launch(backend, bool_arithmetic,
                              [np.zeros((10, 4), np.int64), np.zeros((3, 4), np.float64)], a, b, f)
    with np.errstate(all="ignore"):
        expected_int = [a + b, a * b, np.minimum(a, b), np.maximum(a, b), np.abs(a),
                        a // b + np.int8(127), a % b + np.int8(127), a ** b + np.int8(127),
                        (a << b) + np.int8(127), (a >> b) + np.int8(127)]
        expected_float = [a / b + f, a + 1.5, a * f]
    for row, want in enumerate(expected_int):
        np.testing.assert_array_equal(as_int[row], want, err_msg=f"row {row}")
    for row, want in enumerate(expected_float):
        np.testing.assert_array_equal(as_float[row], want, err_msg=f"row {row}")
    # bools added as ints give 2, int8 arithmetic computed as int64 does not wrap, and a
    # Python float from a / b would keep f's float32.
    assert (as_int[0] != a.astype(int) + b).any()
    assert (as_int[5] != (a.astype(int) // np.maximum(b, 1)) + 127).any()
    assert as_float[0, 0] != np.float32(1.0) + f[0]


def test_subtracting_bools_is_a_compile_error_as_numpy_raises(backend):
    @kk.kernel
    def bool_difference(out, a: kk.Const, b: kk.Const):
        i = kk.index(kk.Global)
        out[i] = a[i] - b[i]  # bool minus bool

    a = np.array([True, False])
    with pytest.raises(kk.CompileError) as info:
        launch(backend, bool_difference, [np.zeros(2, np.int64)], a, a)
    assert_points_at(info.value, "bool_difference", "out[i] = a[i] - b[i]  # bool minus bool")
    assert "^" in str(info.value)


def test_negating_a_bool_is_a_compile_error_as_numpy_raises(backend):
    @kk.kernel
    def bool_negation(out, a: kk.Const):
        i = kk.index(kk.Global)
        out[i] = -a[i]  # minus a bool

    a = np.array([True, False])
    with pytest.raises(kk.CompileError) as info:
        launch(backend, bool_negation, [np.zeros(2, np.int64)], a)
    assert_points_at(info.value, "bool_negation", "out[i] = -a[i]  # minus a bool")
    assert "not" in str(info.value)


# --- math.* is Python's float64 math ---------------------------------------------------


PYTHON_MATH = [name for name in MATH_FUNCTIONS if hasattr(math, name)]
DOMAINS = {"acosh": (1.1, 4.0), "log": (0.1, 4.0), "log2": (0.1, 4.0), "log10": (0.1, 4.0),
           "sqrt": (0.1, 4.0), "log1p": (-0.5, 3.0), "asin": (-0.9, 0.9), "acos": (-0.9, 0.9),
           "atanh": (-0.9, 0.9), "gamma": (0.2, 4.0), "lgamma": (0.2, 4.0), "pow": (0.1, 3.0),
           "fmod": (0.5, 3.0)}


def python_math_kernel(name: str):
    function = getattr(math, name)
    arity = MATH_FUNCTIONS[name].arity

    @kk.kernel
    def apply_python_math(y, a: kk.Const, b: kk.Const):
        i = kk.index(kk.Global)
        kernel_of = name  # the name keeps kernels of different functions apart
        if arity == 1:
            y[i] = function(a[i])
        else:
            y[i] = function(a[i], b[i])
    return apply_python_math


@pytest.mark.parametrize("name", PYTHON_MATH)
def test_python_math_functions_compute_in_float64(backend, name):
    rng = np.random.default_rng(7)
    a = rng.uniform(*DOMAINS.get(name, (-2.0, 2.0)), 16).astype(np.float32)
    b = rng.uniform(*DOMAINS.get(name, (-2.0, 2.0)), 16).astype(np.float32)
    if MATH_FUNCTIONS[name].predicate:
        a[:3] = [np.nan, np.inf, -np.inf]
    (y,) = launch(backend, python_math_kernel(name), [np.zeros(16, np.float64)], a, b)
    function = getattr(math, name)
    arity = MATH_FUNCTIONS[name].arity
    expected = np.array([function(*(float(v) for v in args[:arity])) for args in zip(a, b)],
                        np.float64)
    # float64 to an ulp or two (a GPU's math library), far from float32's 1e-7.
    np.testing.assert_allclose(y, expected, rtol=4e-15, atol=1e-15)


@kk.kernel
def square_roots(out64, out32, n: kk.Const, x: kk.Const, f: kk.Const):
    i = kk.index(kk.Global)
    out64[0, i] = math.sqrt(x[i])
    out64[1, i] = kk.sqrt(x[i])
    out64[2, i] = math.sqrt(n[i]) * f[i]
    out64[3, i] = math.degrees(x[i])
    out32[i] = math.sqrt(x[i])


def test_math_sqrt_of_a_float32_is_a_python_float_and_kk_sqrt_keeps_float32(backend):
    x = np.array([2.0, 3.0, 10.0, 0.1], np.float32)
    n = np.array([2, 3, 5, 7], np.int32)
    f = np.array([0.1, 0.3, 1.7, 2.9], np.float32)
    out64, out32 = launch(backend, square_roots, [np.zeros((4, 4)), np.zeros(4, np.float32)],
                          n, x, f)
    in_float64 = np.array([math.sqrt(float(v)) for v in x])
    np.testing.assert_array_equal(out64[0], in_float64)
    np.testing.assert_array_equal(out64[1], np.sqrt(x))
    # A Python float times a float32 is a float32 (NEP 50).
    weak = np.array([np.float32(math.sqrt(int(v))) * w for v, w in zip(n, f)], np.float32)
    np.testing.assert_array_equal(out64[2], weak)
    np.testing.assert_array_equal(out64[3], [math.degrees(float(v)) for v in x])
    np.testing.assert_array_equal(out32, in_float64.astype(np.float32))
    assert not np.array_equal(in_float64, np.sqrt(x).astype(np.float64))
    assert not np.array_equal(weak, np.sqrt(n.astype(np.float64)) * f.astype(np.float64))
