"""What users of KernelAbstractions and Warp write first, with Python's meaning: the loop
variable (and what a loop assigns) after the loop, default and keyword arguments of
device functions, reversed(range(...)), and a tuple indexed by the variable of a loop
over a constant range. Each device function here is plain Python: the expected result is
what Python computes when it calls the same function on the host."""
import functools

import numpy as np
import pytest

import kernelkit as kk

import source_lines

line_starting_with = functools.partial(source_lines.line_starting_with, __file__)
assert_points_at = functools.partial(source_lines.assert_points_at, path=__file__)

WORKGROUP = 8


def launch(backend, kernel, *args, ndrange):
    kernel(backend, WORKGROUP)(*args, ndrange=ndrange)
    kk.synchronize(backend)


def compile_error(backend, kernel, *args, ndrange=1) -> kk.CompileError:
    with pytest.raises(kk.CompileError) as info:
        kernel(backend, WORKGROUP)(*args, ndrange=ndrange)
    return info.value


# --- the loop variable after the loop ----------------------------------------------------


def values_left_by_loops(x, threshold, n):
    for i in range(2):
        pass
    for j in range(9, 0, -4):
        last = x[j] * 2
    for k in range(10):
        if x[k] > threshold:
            break
    for m in range(3):
        first = m + 10
        break
    p = -7
    for p in range(n):
        pass
    return i, j, last, k, m, first, p


@kk.kernel
def write_values_left_by_loops(out, x: kk.Const, thresholds: kk.Const, counts: kk.Const):
    w = kk.index(kk.Global)
    values = values_left_by_loops(x, thresholds[w], counts[w])
    for position in range(7):
        out[w, position] = values[position]
    for position in range(2):
        pass
    out[w, 7] = position


def test_a_loop_leaves_its_variable_and_what_it_assigned_at_their_last_values(backend):
    x = np.array([1.0, 3.0, 2.0, 8.0, 5.0, 7.0, 9.0, 4.0, 6.0, 0.5], np.float64)
    thresholds = np.array([0.0, 2.5, 6.5, 100.0])
    counts = np.array([0, 1, 5, 0], np.int64)
    out = kk.zeros(backend, np.float64, (len(thresholds), 8))
    launch(backend, write_values_left_by_loops, out, kk.to_backend(backend, x),
           kk.to_backend(backend, thresholds), kk.to_backend(backend, counts),
           ndrange=len(thresholds))
    expected = [values_left_by_loops(x, t, int(n)) + (1,) for t, n in zip(thresholds, counts)]
    assert expected[0][:2] == (1, 1) and expected[3][3] == 9 and expected[0][6] == -7
    np.testing.assert_array_equal(kk.to_numpy(out), expected)


def test_reading_a_variable_only_a_loop_of_unknown_length_assigns_is_an_error(backend):
    @kk.kernel
    def read_after_runtime_loop(out, n):
        for i in range(n):
            pass
        out[0] = i  # read-after-runtime-loop

    error = compile_error(backend, read_after_runtime_loop, kk.zeros(backend, np.int64, 1), 3)
    assert_points_at(error, "read_after_runtime_loop", "out[0] = i  # read-after-runtime-loop")
    assert "'i' may be undefined" in str(error)
    assert "zero times" in str(error) and "assign 'i' before the loop" in str(error)


def value_after_a_break(c):
    for _ in range(2):
        for i in range(3):
            w = i
        if c > 0:
            break
        w = 5
    return w


@kk.kernel
def write_value_after_a_break(out, c):
    out[0] = value_after_a_break(c)


@pytest.mark.parametrize("c", [1, 0])
def test_a_value_assigned_in_a_loop_left_by_break_is_read_after_it(backend, c):
    out = kk.zeros(backend, np.int64, 1)
    launch(backend, write_value_after_a_break, out, c, ndrange=1)
    assert kk.to_numpy(out)[0] == value_after_a_break(c)


def test_reading_the_variable_of_an_empty_loop_is_an_error(backend):
    @kk.kernel
    def read_after_empty_loop(out):
        for i in range(5, 5):
            pass
        out[0] = i  # read-after-empty-loop

    error = compile_error(backend, read_after_empty_loop, kk.zeros(backend, np.int64, 1))
    assert_points_at(error, "read_after_empty_loop", "out[0] = i  # read-after-empty-loop")
    assert "'i' may be undefined" in str(error) and "assign 'i' before the loop" in str(error)


# --- default and keyword arguments ---------------------------------------------------------


def pair(a=123, b=234):
    return a * 1000 + b


def affine(x, scale=2, offset=0.5):
    return x * scale + offset


def clamp(v, *, low=0.0, high=1.0):
    return min(max(v, low), high)


def scaled(v, factor=None):
    if factor is None:
        factor = 3.0
    return v * factor


def calls_with_defaults_and_keywords(v):
    return (pair(), pair(b=1), pair(1, b=2), pair(b=5, a=6),
            affine(v), affine(v, offset=1.0), affine(v, 3, offset=-1.0), affine(offset=4.0, x=v),
            clamp(v), clamp(v, high=0.25), clamp(v, low=-1.0, high=2.0),
            scaled(v), scaled(v, 0.5), scaled(v, factor=None))


@kk.kernel
def write_calls_with_defaults_and_keywords(out, x: kk.Const):
    i = kk.index(kk.Global)
    results = calls_with_defaults_and_keywords(x[i])
    for position in range(14):
        out[i, position] = results[position]


def test_device_functions_take_defaults_and_keyword_arguments_as_python_binds_them(backend):
    x = np.array([-1.5, 0.125, 0.75, 3.0], np.float64)
    out = kk.zeros(backend, np.float64, (len(x), 14))
    launch(backend, write_calls_with_defaults_and_keywords, out, kk.to_backend(backend, x),
           ndrange=len(x))
    expected = [calls_with_defaults_and_keywords(v) for v in x]
    assert expected[0][:4] == (123234, 123001, 1002, 6005)
    np.testing.assert_array_equal(kk.to_numpy(out), expected)


def scaler_kernel(scale):
    """A kernel calling a device function whose default a factory sets."""
    def times(v, s=scale):
        return v * s

    @kk.kernel
    def apply_scale(out):
        i = kk.index(kk.Global)
        out[i] = times(out[i])
    return apply_scale


def test_defaults_set_by_a_factory_compile_into_their_own_kernels(backend):
    results = []
    for scale in (2.0, 3.0):
        out = kk.ones(backend, np.float64, 4)
        launch(backend, scaler_kernel(scale), out, ndrange=4)
        results.append(kk.to_numpy(out)[0])
    assert results == [2.0, 3.0]


def unknown_keyword():
    return pair(c=1)


def duplicate_argument():
    return pair(1, a=2)


def missing_argument():
    return affine(offset=1.0)


def too_many_arguments():
    return pair(1, 2, 3)


def list_default(v, weights=[1.0, 2.0]):
    return v * weights[0]


def unfoldable_default():
    return list_default(1.0)


def kernel_calling(caller):
    @kk.kernel
    def call_refused_by_python(out):
        out[0] = caller()

    return call_refused_by_python


@pytest.mark.parametrize("caller, line, message", [
    (unknown_keyword, "return pair(c=1)", "pair() got an unexpected keyword argument 'c'"),
    (duplicate_argument, "return pair(1, a=2)", "pair() got multiple values for argument 'a'"),
    (missing_argument, "return affine(offset=1.0)", "affine() missing 1 required argument: 'x'"),
    (too_many_arguments, "return pair(1, 2, 3)",
     "pair() takes 2 positional arguments but 3 were given"),
    (unfoldable_default, "return list_default(1.0)",
     "the default value of 'weights' in list_default() is [1.0, 2.0]"),
], ids=["unknown-keyword", "duplicate", "missing", "too-many", "unfoldable-default"])
def test_a_call_python_would_refuse_is_an_error_naming_the_function_and_line(backend, caller,
                                                                              line, message):
    error = compile_error(backend, kernel_calling(caller), kk.zeros(backend, np.float64, 1))
    assert_points_at(error, "call_refused_by_python", line)
    assert f"device function '{caller.__name__}'" in str(error)
    assert message in str(error) and "hint:" in str(error)


# --- reversed(range(...)) ------------------------------------------------------------------


def digits_of_reversed_range(start, stop, step):
    """The values of reversed(range(...)) in order, as the digits of one number."""
    number, count = 0, 0
    for k in reversed(range(start, stop, step)):
        number = number * 100 + k + 50
        count += 1
    return number, count


@kk.kernel
def write_reversed_ranges(out, bounds: kk.Const):
    i = kk.index(kk.Global)
    number, count = digits_of_reversed_range(bounds[i, 0], bounds[i, 1], bounds[i, 2])
    out[i, 0] = number
    out[i, 1] = count


REVERSED_RANGES = [(0, 5, 1), (5, 0, -1), (10, -5, -3), (0, 10, 3), (-3, -20, -4), (2, 9, 2),
                   (5, 5, 1), (5, 0, 1), (0, 5, -1), (7, 8, 5)]


def test_reversed_range_counts_down_over_the_values_of_the_range(backend):
    bounds = np.array(REVERSED_RANGES, np.int64)
    out = kk.zeros(backend, np.int64, (len(bounds), 2))
    launch(backend, write_reversed_ranges, out, kk.to_backend(backend, bounds),
           ndrange=len(bounds))
    expected = [digits_of_reversed_range(*b) for b in REVERSED_RANGES]
    assert expected[1][1] == 5 and expected[6] == (0, 0)
    np.testing.assert_array_equal(kk.to_numpy(out), expected)


def constant_reversed_ranges():
    first = 0
    for k in reversed(range(10)):
        first = first * 10 + k
    odd = 0
    for k in reversed(range(9, -1, -2)):
        odd = odd * 10 + k
    empty = 0
    for k in reversed(range(3, 3)):
        empty += 1
    narrow = 0
    for k in reversed(range(np.uint8(4))):
        narrow = narrow * 10 + int(k)
    elements = 0
    for v in reversed((1, 2, 3)):
        elements = elements * 10 + v
    return first, odd, empty, narrow, elements


@kk.kernel
def write_constant_reversed_ranges(out):
    values = constant_reversed_ranges()
    for position in range(5):
        out[position] = values[position]


def test_reversed_range_with_constant_bounds_and_a_reversed_tuple(backend):
    out = kk.zeros(backend, np.int64, 5)
    launch(backend, write_constant_reversed_ranges, out, ndrange=1)
    expected = constant_reversed_ranges()
    assert expected == (9876543210, 13579, 0, 3210, 321)
    np.testing.assert_array_equal(kk.to_numpy(out), expected)


# --- a tuple indexed by a loop variable --------------------------------------------------


def tuple_sums(v, n):
    t = (1.0, 2.0, 3.0)
    acc = 0.0
    for j in range(3):
        acc += t[j] * v
    mixed = (2, 0.5, np.float32(4.0), True)
    product = 1.0
    for j in range(len(mixed)):
        product *= mixed[j]
    pairs = 0.0
    for a in range(2):
        for b in range(2):
            pairs = pairs * 10 + t[a + b]
    next_index = 0
    picked = 0.0
    for _ in range(4):
        picked += t[next_index % 3]
        next_index += 2
    skipped = 0.0
    for j in reversed(range(len(t))):
        if j == 1:
            continue
        if t[j] < v:
            break
        skipped += t[j]
    counted = 0.0
    for j in range(3):
        for _ in range(n):
            counted += t[j]
    return acc, product, pairs, picked, skipped, counted


@kk.kernel
def write_tuple_sums(out, x: kk.Const, n):
    i = kk.index(kk.Global)
    values = tuple_sums(x[i], n)
    for position in range(6):
        out[i, position] = values[position]


def test_a_tuple_indexed_by_the_variable_of_a_loop_over_a_constant_range(backend):
    x = np.array([0.5, 1.5, 2.5, 4.0], np.float64)
    out = kk.zeros(backend, np.float64, (len(x), 6))
    launch(backend, write_tuple_sums, out, kk.to_backend(backend, x), 2, ndrange=len(x))
    expected = [tuple_sums(v, 2) for v in x]
    assert expected[0][:3] == (3.0, 4.0, 1000 * 1 + 100 * 2 + 10 * 2 + 3)
    np.testing.assert_array_equal(kk.to_numpy(out), expected)


def test_a_tuple_indexed_by_the_variable_of_a_loop_of_unknown_length_is_an_error(backend):
    @kk.kernel
    def tuple_indexed_in_runtime_loop(out, n):
        t = (1.0, 2.0, 3.0)
        for j in range(n):
            out[j] = t[j]  # tuple-indexed-in-runtime-loop

    error = compile_error(backend, tuple_indexed_in_runtime_loop,
                          kk.zeros(backend, np.float64, 3), 3)
    assert_points_at(error, "tuple_indexed_in_runtime_loop",
                     "out[j] = t[j]  # tuple-indexed-in-runtime-loop")
    assert "the loop 'for j in range(n)'" in str(error)
    assert "constant bounds" in str(error)


@kk.kernel
def nested_tuple_loops(out):
    t = (1.0, 2.0, 3.0)
    total = 0.0
    for i in range(64):
        for j in range(64):
            total += t[(i + j) % 3]
    out[0] = total


def test_nested_loops_whose_unrolled_copies_would_be_too_many_are_an_error(backend):
    error = compile_error(backend, nested_tuple_loops, kk.zeros(backend, np.float64, 1))
    assert "each holding 64 unrolled copies of the code here, are too many to unroll" \
        in str(error)
