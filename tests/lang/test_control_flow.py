"""Python control flow inside kernels: branches, comparison chains, short-circuit
evaluation (checked with side effects and with a bounds-checking backend), every form
of range, while/break/continue, early return, variables whose type is settled by what
a loop adds to them, and tuples with unpacking."""
import numpy as np
import pytest

import kernelkit as kk

WORKGROUP = 8


def launch(backend, kernel, *args, ndrange):
    kernel(backend, WORKGROUP)(*args, ndrange=ndrange)
    kk.synchronize(backend)


# --- branches ------------------------------------------------------------------------


@kk.kernel
def classify(out, x: kk.Const):
    i = kk.index(kk.Global)
    v = x[i]
    if v < -1.0:
        out[i] = -2
    elif v < 0.0:
        out[i] = -1
    elif v == 0.0:
        out[i] = 0
    else:
        out[i] = 1


def test_if_elif_else_picks_the_first_true_branch(backend):
    x = np.array([-3.0, -1.0, -0.5, 0.0, 0.25, 7.0, -1.5, 0.0, 2.0], np.float32)
    out = kk.zeros(backend, np.int32, len(x))
    launch(backend, classify, out, kk.to_backend(backend, x), ndrange=len(x))
    expected = np.select([x < -1.0, x < 0.0, x == 0.0], [-2, -1, 0], default=1)
    np.testing.assert_array_equal(kk.to_numpy(out), expected)


@kk.kernel
def in_half_open_interval(out, x: kk.Const, low, high):
    i = kk.index(kk.Global)
    out[i] = low < x[i] <= high


def test_comparison_chain_means_every_comparison_holds(backend):
    x = np.arange(-3, 12, dtype=np.int64)
    out = kk.zeros(backend, np.bool_, len(x))
    launch(backend, in_half_open_interval, out, kk.to_backend(backend, x), 0, 9, ndrange=len(x))
    np.testing.assert_array_equal(kk.to_numpy(out), (0 < x) & (x <= 9))


@kk.kernel
def chain_with_side_effect(hits, counter):
    i = kk.index(kk.Global)
    if 0 <= kk.atomic_add(counter, 0, 1) < 1000000:
        hits[i] = 1


def test_comparison_chain_evaluates_its_middle_operand_once(backend):
    n = 20
    hits = kk.zeros(backend, np.int32, n)
    counter = kk.zeros(backend, np.int64, 1)
    launch(backend, chain_with_side_effect, hits, counter, ndrange=n)
    assert kk.to_numpy(counter)[0] == n
    np.testing.assert_array_equal(kk.to_numpy(hits), np.ones(n))


@kk.kernel
def negate_condition(out, x: kk.Const):
    i = kk.index(kk.Global)
    out[i] = not (x[i] > 0)


def test_not_inverts_a_condition(backend):
    x = np.array([-2, 0, 3, 5, -1], np.int32)
    out = kk.zeros(backend, np.bool_, len(x))
    launch(backend, negate_condition, out, kk.to_backend(backend, x), ndrange=len(x))
    np.testing.assert_array_equal(kk.to_numpy(out), ~(x > 0))


@kk.kernel
def absolute_by_conditional_expression(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i] if x[i] > 0 else -2 * x[i]


def test_conditional_expression_selects_by_condition(backend):
    x = np.array([-2.5, 0.0, 3.25, 5.0, -1.0], np.float32)
    y = kk.zeros(backend, np.float32, len(x))
    launch(backend, absolute_by_conditional_expression, y, kk.to_backend(backend, x), ndrange=len(x))
    np.testing.assert_array_equal(kk.to_numpy(y), np.where(x > 0, x, -2 * x))


# --- short-circuit evaluation --------------------------------------------------------


@kk.kernel
def positive_prefix_with_and(out, a: kk.Const, n):
    i = kk.index(kk.Global)
    if i < n and a[i] > 0:
        out[i] = 1
    else:
        out[i] = 0


@kk.kernel
def outside_or_negative_with_or(out, a: kk.Const, n):
    i = kk.index(kk.Global)
    if i >= n or a[i] < 0:
        out[i] = 1
    else:
        out[i] = 0


@kk.kernel
def guarded_read_with_conditional_expression(out, a: kk.Const, n):
    i = kk.index(kk.Global)
    out[i] = a[i] if i < n else -1.0


SHORT_A = np.array([3.0, -1.0, 0.0, 2.0, -5.0], np.float32)
SHORT_TOTAL = 16


def test_and_does_not_evaluate_its_right_side_when_the_left_is_false(debug_backend):
    out = kk.zeros(debug_backend, np.int32, SHORT_TOTAL)
    a = kk.to_backend(debug_backend, SHORT_A)
    launch(debug_backend, positive_prefix_with_and, out, a, len(SHORT_A), ndrange=SHORT_TOTAL)
    expected = np.zeros(SHORT_TOTAL, np.int32)
    expected[: len(SHORT_A)] = SHORT_A > 0
    np.testing.assert_array_equal(kk.to_numpy(out), expected)


def test_or_does_not_evaluate_its_right_side_when_the_left_is_true(debug_backend):
    out = kk.zeros(debug_backend, np.int32, SHORT_TOTAL)
    a = kk.to_backend(debug_backend, SHORT_A)
    launch(debug_backend, outside_or_negative_with_or, out, a, len(SHORT_A), ndrange=SHORT_TOTAL)
    expected = np.ones(SHORT_TOTAL, np.int32)
    expected[: len(SHORT_A)] = SHORT_A < 0
    np.testing.assert_array_equal(kk.to_numpy(out), expected)


def test_conditional_expression_evaluates_only_the_chosen_branch(debug_backend):
    out = kk.zeros(debug_backend, np.float32, SHORT_TOTAL)
    a = kk.to_backend(debug_backend, SHORT_A)
    launch(debug_backend, guarded_read_with_conditional_expression, out, a, len(SHORT_A), ndrange=SHORT_TOTAL)
    expected = np.full(SHORT_TOTAL, -1.0, np.float32)
    expected[: len(SHORT_A)] = SHORT_A
    np.testing.assert_array_equal(kk.to_numpy(out), expected)


@kk.kernel
def count_calls_behind_and(marks, counter, flags: kk.Const):
    i = kk.index(kk.Global)
    if flags[i] > 0 and kk.atomic_add(counter, 0, 1) >= 0:
        marks[i] = 1


@kk.kernel
def count_calls_behind_or(marks, counter, flags: kk.Const):
    i = kk.index(kk.Global)
    if flags[i] > 0 or kk.atomic_add(counter, 0, 1) >= 0:
        marks[i] = 1


FLAGS = np.array([1, 0, 0, 1, 1, 0, 1, 1, 0, 0, 0, 1, 1], np.int32)


def test_and_skips_side_effects_of_its_right_side(backend):
    marks = kk.zeros(backend, np.int32, len(FLAGS))
    counter = kk.zeros(backend, np.int32, 1)
    launch(backend, count_calls_behind_and, marks, counter, kk.to_backend(backend, FLAGS), ndrange=len(FLAGS))
    assert kk.to_numpy(counter)[0] == np.count_nonzero(FLAGS > 0)
    np.testing.assert_array_equal(kk.to_numpy(marks), FLAGS > 0)


def test_or_skips_side_effects_of_its_right_side(backend):
    marks = kk.zeros(backend, np.int32, len(FLAGS))
    counter = kk.zeros(backend, np.int32, 1)
    launch(backend, count_calls_behind_or, marks, counter, kk.to_backend(backend, FLAGS), ndrange=len(FLAGS))
    assert kk.to_numpy(counter)[0] == np.count_nonzero(FLAGS <= 0)
    np.testing.assert_array_equal(kk.to_numpy(marks), np.ones(len(FLAGS)))


# --- for loops over ranges -----------------------------------------------------------


@kk.kernel
def sum_of_range(out, start, stop, step):
    i = kk.index(kk.Global)
    acc = 0
    for k in range(start + i, stop, step):
        acc += k
    out[i] = acc


@pytest.mark.parametrize(
    "start, stop, step",
    [(0, 10, 1), (10, 0, -1), (10, -5, -3), (0, 10, 3), (5, 5, 1), (5, 0, 1), (0, 5, -1), (-3, -20, -4)],
)
def test_range_with_runtime_start_stop_and_step_of_either_sign(backend, start, stop, step):
    n = 8
    out = kk.zeros(backend, np.int64, n)
    launch(backend, sum_of_range, out, start, stop, step, ndrange=n)
    expected = [sum(range(start + i, stop, step)) for i in range(n)]
    np.testing.assert_array_equal(kk.to_numpy(out), expected)


@kk.kernel
def constant_ranges(out):
    a = 0
    for k in range(5):
        a += k
    b = 0
    for k in range(2, 7):
        b += k * k
    c = 0
    for k in range(9, -1, -2):
        c = c * 10 + k
    out[0] = a
    out[1] = b
    out[2] = c


def test_ranges_with_one_two_and_three_constant_arguments_iterate_in_order(backend):
    out = kk.zeros(backend, np.int64, 3)
    launch(backend, constant_ranges, out, ndrange=1)
    np.testing.assert_array_equal(kk.to_numpy(out), [10, 4 + 9 + 16 + 25 + 36, 97531])


@kk.kernel
def suffix_sums(out, x: kk.Const):
    i = kk.index(kk.Global)
    acc = 0
    for j in range(len(x) - 1, i - 1, -1):
        acc += x[j]
    out[i] = acc


def test_loop_with_negative_step_down_to_the_work_item_index(backend):
    x = np.random.default_rng(0).integers(-20, 20, 29).astype(np.int64)
    out = kk.zeros(backend, np.int64, len(x))
    launch(backend, suffix_sums, out, kk.to_backend(backend, x), ndrange=len(x))
    np.testing.assert_array_equal(kk.to_numpy(out), np.cumsum(x[::-1])[::-1])


# --- while, break, continue, return --------------------------------------------------


@kk.kernel
def collatz_steps(out, x: kk.Const):
    i = kk.index(kk.Global)
    v = x[i]
    steps = 0
    while v != 1:
        if v % 2 == 0:
            v = v // 2
        else:
            v = 3 * v + 1
        steps += 1
    out[i] = steps


def reference_collatz_steps(v):
    steps = 0
    while v != 1:
        v = v // 2 if v % 2 == 0 else 3 * v + 1
        steps += 1
    return steps


def test_while_loop_with_data_dependent_trip_count(backend):
    x = np.arange(1, 41, dtype=np.int64)
    out = kk.zeros(backend, np.int64, len(x))
    launch(backend, collatz_steps, out, kk.to_backend(backend, x), ndrange=len(x))
    np.testing.assert_array_equal(kk.to_numpy(out), [reference_collatz_steps(int(v)) for v in x])


@kk.kernel
def smallest_root_above(out, x: kk.Const):
    i = kk.index(kk.Global)
    r = 0
    while True:
        r += 1
        if r * r > x[i]:
            break
    out[i] = r


def test_while_true_ends_at_break(backend):
    x = np.array([0, 1, 3, 4, 15, 16, 99, 100], np.int64)
    out = kk.zeros(backend, np.int64, len(x))
    launch(backend, smallest_root_above, out, kk.to_backend(backend, x), ndrange=len(x))
    np.testing.assert_array_equal(kk.to_numpy(out), [int(np.sqrt(v)) + 1 for v in x])


@kk.kernel
def first_index_above(out, x: kk.Const, thresholds: kk.Const):
    i = kk.index(kk.Global)
    found = -1
    for j in range(len(x)):
        if x[j] > thresholds[i]:
            found = j
            break
    out[i] = found


def test_break_leaves_a_for_loop_at_the_first_match(backend):
    x = np.array([1, 4, 2, 8, 5, 7, 9, 3], np.int32)
    thresholds = np.array([0, 3, 4, 7, 8, 9, 100], np.int32)
    out = kk.zeros(backend, np.int64, len(thresholds))
    launch(backend, first_index_above, out, kk.to_backend(backend, x), kk.to_backend(backend, thresholds),
           ndrange=len(thresholds))
    expected = [next((j for j, v in enumerate(x) if v > t), -1) for t in thresholds]
    assert expected == [0, 1, 3, 3, 6, -1, -1]
    np.testing.assert_array_equal(kk.to_numpy(out), expected)


@kk.kernel
def sum_of_odd_prefix(out, x: kk.Const):
    i = kk.index(kk.Global)
    acc = 0
    for j in range(i + 1):
        if x[j] % 2 == 0:
            continue
        acc += x[j]
    out[i] = acc


def test_continue_skips_the_rest_of_one_iteration(backend):
    x = np.random.default_rng(1).integers(-30, 30, 23).astype(np.int64)
    out = kk.zeros(backend, np.int64, len(x))
    launch(backend, sum_of_odd_prefix, out, kk.to_backend(backend, x), ndrange=len(x))
    np.testing.assert_array_equal(kk.to_numpy(out), np.cumsum(np.where(x % 2 != 0, x, 0)))


@kk.kernel
def nested_loops_with_inner_break(out):
    i = kk.index(kk.Global)
    count = 0
    for a in range(i + 1):
        for b in range(10):
            if b > a:
                break
            count += 1
    out[i] = count


def test_break_in_an_inner_loop_leaves_only_the_inner_loop(backend):
    n = 15
    out = kk.zeros(backend, np.int64, n)
    launch(backend, nested_loops_with_inner_break, out, ndrange=n)
    expected = [sum(min(a + 1, 10) for a in range(i + 1)) for i in range(n)]
    np.testing.assert_array_equal(kk.to_numpy(out), expected)


@kk.kernel
def square_below_n(y, x: kk.Const, n):
    i = kk.index(kk.Global)
    if i >= n:
        return
    y[i] = x[i] * x[i]


def test_early_return_stops_the_work_item(backend):
    n = 13
    x = np.arange(n, dtype=np.float64) - 4.5
    buffer = kk.zeros(backend, np.float64, n + 11)
    y = buffer[:n]
    launch(backend, square_below_n, y, kk.to_backend(backend, x), n, ndrange=n + 11)
    expected = np.zeros(n + 11)
    expected[:n] = x * x
    np.testing.assert_array_equal(kk.to_numpy(buffer), expected)


@kk.kernel
def first_index_below(out, x: kk.Const, thresholds: kk.Const):
    i = kk.index(kk.Global)
    for j in range(len(x)):
        if x[j] < thresholds[i]:
            out[i] = j
            return
    out[i] = -1


def test_return_from_inside_a_loop_skips_the_code_after_it(backend):
    x = np.array([5, 4, 7, 2, 9, 1], np.int32)
    thresholds = np.array([6, 5, 3, 2, 1, 0], np.int32)
    out = kk.zeros(backend, np.int64, len(thresholds))
    launch(backend, first_index_below, out, kk.to_backend(backend, x), kk.to_backend(backend, thresholds),
           ndrange=len(thresholds))
    expected = [next((j for j, v in enumerate(x) if v < t), -1) for t in thresholds]
    assert expected == [0, 1, 3, 5, -1, -1]
    np.testing.assert_array_equal(kk.to_numpy(out), expected)


# --- types settled by a loop ---------------------------------------------------------


@kk.kernel
def row_sums(out, x: kk.Const):
    i = kk.index(kk.Global)
    acc = 0
    for j in range(x.shape[1]):
        acc += x[i, j]
    out[i] = acc


def sequential_row_sums(x):
    acc = np.zeros(x.shape[0], x.dtype)
    for j in range(x.shape[1]):
        acc += x[:, j]
    return acc


def test_accumulator_started_at_python_zero_takes_the_float32_type_of_what_it_adds(backend):
    x = np.random.default_rng(2).uniform(0, 1, (6, 50)).astype(np.float32)
    out = kk.zeros(backend, np.float64, 6)
    launch(backend, row_sums, out, kk.to_backend(backend, x), ndrange=6)
    expected = sequential_row_sums(x).astype(np.float64)
    assert not np.array_equal(expected, sequential_row_sums(x.astype(np.float64)))
    np.testing.assert_array_equal(kk.to_numpy(out), expected)


def test_accumulator_started_at_python_zero_takes_the_int32_type_of_what_it_adds(backend):
    x = np.array([[2**30, 2**30, 2**30], [1, 2, 3]], np.int32)
    out = kk.zeros(backend, np.int64, 2)
    launch(backend, row_sums, out, kk.to_backend(backend, x), ndrange=2)
    np.testing.assert_array_equal(kk.to_numpy(out), sequential_row_sums(x).astype(np.int64))
    assert kk.to_numpy(out)[0] == -(2**30)


@kk.kernel
def one_or_two_and_a_half(out, x: kk.Const):
    i = kk.index(kk.Global)
    v = 1
    if x[i] > 0:
        v = 2.5
    out[i] = v * 3


def test_variable_assigned_int_and_float_on_different_paths(backend):
    x = np.array([-1, 1, 0, 5], np.int32)
    out = kk.zeros(backend, np.float64, len(x))
    launch(backend, one_or_two_and_a_half, out, kk.to_backend(backend, x), ndrange=len(x))
    np.testing.assert_array_equal(kk.to_numpy(out), np.where(x > 0, 7.5, 3.0))


@kk.kernel
def sixteen_row_sums(out, x: kk.Const):
    """Sixteen accumulators started at Python 0.0, each widened by the loop it is in."""
    i = kk.index(kk.Global)
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = 0.0
    s8 = s9 = s10 = s11 = s12 = s13 = s14 = s15 = 0.0
    for j in range(0, x.shape[1], 16):
        s0 += x[i, j]
        s1 += x[i, j + 1]
        s2 += x[i, j + 2]
        s3 += x[i, j + 3]
        s4 += x[i, j + 4]
        s5 += x[i, j + 5]
        s6 += x[i, j + 6]
        s7 += x[i, j + 7]
        s8 += x[i, j + 8]
        s9 += x[i, j + 9]
        s10 += x[i, j + 10]
        s11 += x[i, j + 11]
        s12 += x[i, j + 12]
        s13 += x[i, j + 13]
        s14 += x[i, j + 14]
        s15 += x[i, j + 15]
    out[i] = (s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7 + s8 + s9 + s10 + s11 + s12 + s13
              + s14 + s15)


def test_many_accumulators_each_widened_by_its_loop_settle(backend):
    # Each accumulator's type is widened by one retranslation: sixteen of them once
    # exhausted a fixed number of tries ("the types of the variables do not settle").
    x = np.arange(3 * 32, dtype=np.int64).reshape(3, 32)
    out = kk.zeros(backend, np.float64, 3)
    launch(backend, sixteen_row_sums, out, kk.to_backend(backend, x), ndrange=3)
    np.testing.assert_array_equal(kk.to_numpy(out), x.sum(axis=1).astype(np.float64))


# --- tuples --------------------------------------------------------------------------


@kk.kernel
def swap_with_tuple_assignment(out_a, out_b, a: kk.Const, b: kk.Const):
    i = kk.index(kk.Global)
    first, second = a[i], b[i]
    first, second = second, first
    out_a[i] = first
    out_b[i] = second


def test_tuple_assignment_swaps_values(backend):
    a = np.arange(9, dtype=np.int32)
    b = np.arange(100, 109, dtype=np.int32)
    out_a, out_b = kk.zeros(backend, np.int32, 9), kk.zeros(backend, np.int32, 9)
    launch(backend, swap_with_tuple_assignment, out_a, out_b, kk.to_backend(backend, a), kk.to_backend(backend, b),
           ndrange=9)
    np.testing.assert_array_equal(kk.to_numpy(out_a), b)
    np.testing.assert_array_equal(kk.to_numpy(out_b), a)


@kk.kernel
def nested_unpacking(out, a: kk.Const, b: kk.Const):
    i = kk.index(kk.Global)
    t = (a[i], b[i], i)
    (p, q), r = (t[0], t[1]), t[2]
    out[i] = p * 100 + q * 10 + r


def test_tuple_indexing_and_nested_unpacking(backend):
    a = np.array([1, 2, 3, 4], np.int64)
    b = np.array([5, 6, 7, 8], np.int64)
    out = kk.zeros(backend, np.int64, 4)
    launch(backend, nested_unpacking, out, kk.to_backend(backend, a), kk.to_backend(backend, b), ndrange=4)
    np.testing.assert_array_equal(kk.to_numpy(out), a * 100 + b * 10 + np.arange(4))


@kk.kernel
def fibonacci(out):
    i = kk.index(kk.Global)
    f0, f1 = 0, 1
    for _ in range(i):
        f0, f1 = f1, f0 + f1
    out[i] = f0


def test_tuple_assignment_in_a_loop_evaluates_the_right_side_first(backend):
    n = 30
    out = kk.zeros(backend, np.int64, n)
    launch(backend, fibonacci, out, ndrange=n)
    expected = [0, 1]
    while len(expected) < n:
        expected.append(expected[-1] + expected[-2])
    np.testing.assert_array_equal(kk.to_numpy(out), expected)
