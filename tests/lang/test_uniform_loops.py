"""Loops whose trip count is the same for every work-item of a group (uniform loops):
a backend may run them with the work-items innermost (the CPU does), so every shape of
such a loop is checked here against NumPy: per-item branches inside, nested loops,
break/continue/return on uniform conditions, loop-carried tuples, private arrays,
barriers inside, atomics inside, partial groups, 1-D to 3-D ranges, device functions."""
import numpy as np
import pytest

import kernelkit as kk


def launch(backend, kernel, group, ndrange, *args):
    moved = [kk.to_backend(backend, a) if isinstance(a, np.ndarray) else a for a in args]
    kernel(backend, group)(*moved, ndrange=ndrange)
    kk.synchronize(backend)
    return [kk.to_numpy(m) if isinstance(a, np.ndarray) else m for a, m in zip(args, moved)]


@kk.kernel
def matvec_rows(y, a: kk.Const, x: kk.Const, k):
    i = kk.index(kk.Global)
    acc = 0.0
    for p in range(k):
        acc += a[i, p] * x[p]
    y[i] = acc


@pytest.mark.parametrize("n, group", [(64, 16), (37, 16), (5, 8), (100, 1)])
def test_uniform_loop_with_a_runtime_trip_count_matches_numpy(backend, n, group):
    rng = np.random.default_rng(0)
    a = rng.integers(-3, 4, (n, 45)).astype(np.float32)
    x = rng.integers(-3, 4, 45).astype(np.float32)
    (y, *_) = launch(backend, matvec_rows, group, n, np.zeros(n, np.float32), a, x, 45)
    np.testing.assert_array_equal(y, a @ x)


def test_uniform_loop_that_runs_zero_times_leaves_its_initial_value(backend):
    a = np.ones((8, 1), np.float32)
    (y, *_) = launch(backend, matvec_rows, 4, 8, np.full(8, 7, np.float32), a,
                     np.ones(1, np.float32), 0)
    np.testing.assert_array_equal(y, np.zeros(8))


@kk.kernel
def conditional_sum(out, a: kk.Const, k, threshold):
    i, j = kk.index(kk.Global, kk.NTuple)
    positives = 0.0
    count = 0
    for p in range(k):
        value = a[i, j, p]
        if value > threshold:
            positives += value
            count += 1
        elif value < -threshold:
            continue
        else:
            positives -= 1.0
    out[i, j] = positives + count


def test_per_item_branches_and_continue_inside_a_uniform_loop(backend):
    rng = np.random.default_rng(1)
    a = rng.integers(-5, 6, (13, 9, 20)).astype(np.float32)
    (out, *_) = launch(backend, conditional_sum, (4, 4), (13, 9), np.zeros((13, 9), np.float32),
                       a, 20, 2.0)
    expected = np.where(a > 2, a + 1, np.where(a < -2, 0, -1)).sum(axis=2)
    np.testing.assert_array_equal(out, expected)


@kk.kernel
def nested_uniform_loops(out, a: kk.Const, rows, cols):
    i = kk.index(kk.Global)
    total = 0.0
    for r in range(rows):
        row = 0.0
        for c in range(cols):
            row += a[r, c] * (i + 1)
        total += row * row
    out[i] = total


def test_nested_uniform_loops_keep_each_items_values(backend):
    a = np.arange(35, dtype=np.float32).reshape(5, 7) % 4
    (out, *_) = launch(backend, nested_uniform_loops, 8, 19, np.zeros(19, np.float32), a, 5, 7)
    expected = np.array([((a * (i + 1)).sum(axis=1) ** 2).sum() for i in range(19)])
    np.testing.assert_array_equal(out, expected)


@kk.kernel
def uniform_while_with_break(out, limit, stop_after):
    i = kk.index(kk.Global)
    value = i
    steps = 0
    while steps < limit:
        steps += 1
        if steps > stop_after:
            break
        if steps % 3 == 0:
            continue
        value = value * 2 % 1000 + steps
    out[i] = value * 100 + steps


@pytest.mark.parametrize("limit, stop_after", [(10, 100), (10, 4), (0, 3)])
def test_uniform_while_loop_with_break_and_continue(backend, limit, stop_after):
    def reference(i):
        value, steps = i, 0
        while steps < limit:
            steps += 1
            if steps > stop_after:
                break
            if steps % 3 == 0:
                continue
            value = value * 2 % 1000 + steps
        return value * 100 + steps

    (out, *_) = launch(backend, uniform_while_with_break, 16, 40, np.zeros(40, np.int64),
                       limit, stop_after)
    np.testing.assert_array_equal(out, [reference(i) for i in range(40)])


@kk.kernel
def return_from_inside_uniform_loop(out, k, stop_at):
    i = kk.index(kk.Global)
    out[i] = -1
    for p in range(k):
        out[i] = p * 10 + i
        if p == stop_at:
            return
    out[i] = 1000 + i


@pytest.mark.parametrize("stop_at, expected_tail", [(3, 30), (50, None)])
def test_uniform_return_inside_a_loop_ends_every_work_item(backend, stop_at, expected_tail):
    (out, *_) = launch(backend, return_from_inside_uniform_loop, 8, 20, np.zeros(20, np.int64),
                       10, stop_at)
    if expected_tail is None:
        np.testing.assert_array_equal(out, 1000 + np.arange(20))
    else:
        np.testing.assert_array_equal(out, expected_tail + np.arange(20))


@kk.kernel
def fibonacci_pairs(out, k):
    i = kk.index(kk.Global)
    a, b = i, 1
    last = 0
    for p in range(k):
        a, b = b, (a + b) % 10007
        last = p
    out[i, 0] = a
    out[i, 1] = b
    out[i, 2] = last


def test_loop_carried_tuples_and_the_last_counter_survive_the_loop(backend):
    def reference(i):
        a, b = i, 1
        for _ in range(25):
            a, b = b, (a + b) % 10007
        return a, b, 24

    (out, *_) = launch(backend, fibonacci_pairs, 4, 10, np.zeros((10, 3), np.int64), 25)
    np.testing.assert_array_equal(out, [reference(i) for i in range(10)])


@kk.kernel
def private_window(out, x: kk.Const, k):
    i = kk.index(kk.Global)
    window = kk.private(np.float32, 4)
    for p in range(4):
        window[p] = 0.0
    for p in range(k):
        window[p % 4] += x[i + p]
    out[i] = window[0] * 1000 + window[1] * 100 + window[2] * 10 + window[3]


def test_private_arrays_written_in_a_uniform_loop_stay_per_work_item(backend):
    x = (np.arange(60) % 3).astype(np.float32)
    (out, *_) = launch(backend, private_window, 16, 50, np.zeros(50, np.float32), x, 10)
    expected = []
    for i in range(50):
        window = [0.0] * 4
        for p in range(10):
            window[p % 4] += x[i + p]
        expected.append(window[0] * 1000 + window[1] * 100 + window[2] * 10 + window[3])
    np.testing.assert_array_equal(out, expected)


@kk.kernel
def prefix_sums_in_steps(out, x: kk.Const, steps):
    i = kk.index(kk.Global)
    li = kk.index(kk.Local)
    scratch = kk.localmem(np.int64, 32)
    carry = 0
    for s in range(steps):
        scratch[li] = x[s, i]
        kk.synchronize()
        total = 0
        for q in range(li + 1):
            total += scratch[q]
        kk.synchronize()
        carry += total
        out[s, i] = carry


def test_uniform_loop_around_barriers_and_a_varying_inner_loop(backend):
    rng = np.random.default_rng(2)
    x = rng.integers(0, 10, (6, 64)).astype(np.int64)
    (out, *_) = launch(backend, prefix_sums_in_steps, 32, 64, np.zeros((6, 64), np.int64), x, 6)
    per_group = np.concatenate([np.cumsum(x[:, g:g + 32], axis=1) for g in (0, 32)], axis=1)
    np.testing.assert_array_equal(out, np.cumsum(per_group, axis=0))


@kk.kernel
def uniform_loop_with_atomics(counts, k, buckets):
    i = kk.index(kk.Global)
    for p in range(k):
        kk.atomic_add(counts, (i * 7 + p) % buckets, 1)


def test_atomics_inside_a_uniform_loop_count_every_update(backend):
    (counts, *_) = launch(backend, uniform_loop_with_atomics, 64, 1000,
                          np.zeros(13, np.int64), 40, 13)
    expected = np.bincount([(i * 7 + p) % 13 for i in range(1000) for p in range(40)],
                           minlength=13)
    np.testing.assert_array_equal(counts, expected)


@kk.kernel
def uniform_loop_in_3d(out, k):
    i, j, l = kk.index(kk.Global, kk.NTuple)
    acc = 0
    for p in range(k):
        acc += (i * 100 + j * 10 + l) * p
    out[i, j, l] = acc


def test_uniform_loop_over_a_3d_range_with_partial_groups(backend):
    (out, *_) = launch(backend, uniform_loop_in_3d, (2, 3, 4), (5, 7, 6),
                       np.zeros((5, 7, 6), np.int64), 9)
    i, j, l = np.indices((5, 7, 6))
    np.testing.assert_array_equal(out, (i * 100 + j * 10 + l) * 36)


def weighted_sum(a, row, k):
    acc = 0.0
    for p in range(k):
        acc += a[row, p] * (p + 1)
    return acc


@kk.kernel
def calls_device_loop(out, a: kk.Const, k):
    i = kk.index(kk.Global)
    out[i] = weighted_sum(a, i, k)


def test_uniform_loop_in_a_device_function(backend):
    a = (np.arange(12 * 9) % 5).astype(np.float32).reshape(12, 9)
    (out, *_) = launch(backend, calls_device_loop, 4, 12, np.zeros(12, np.float32), a, 9)
    np.testing.assert_array_equal(out, a @ np.arange(1, 10, dtype=np.float32))


@kk.kernel
def loop_under_varying_branch(out, k):
    i = kk.index(kk.Global)
    acc = 0
    if i % 2 == 0:
        for p in range(k):
            acc += p
    else:
        for p in range(i):
            acc += 2
    out[i] = acc


def test_loops_under_a_per_item_branch_and_with_per_item_trip_counts(backend):
    (out, *_) = launch(backend, loop_under_varying_branch, 8, 21, np.zeros(21, np.int64), 6)
    expected = [15 if i % 2 == 0 else 2 * i for i in range(21)]
    np.testing.assert_array_equal(out, expected)


@kk.kernel
def bound_read_from_memory(out, sizes: kk.Const, x: kk.Const):
    i = kk.index(kk.Global)
    acc = 0.0
    for p in range(sizes[0]):
        acc += x[p] * i
    out[i] = acc


def test_uniform_loop_whose_bound_is_read_from_an_array(backend):
    x = np.arange(10, dtype=np.float32)
    (out, *_) = launch(backend, bound_read_from_memory, 4, 9, np.zeros(9, np.float32),
                       np.array([7], np.int64), x)
    np.testing.assert_array_equal(out, x[:7].sum() * np.arange(9))


@kk.kernel
def strided_descending(out, start, stop, step):
    i = kk.index(kk.Global)
    acc = 0
    for p in range(start, stop, step):
        acc = acc * 3 % 101 + p + i
    out[i] = acc


@pytest.mark.parametrize("start, stop, step", [(20, -7, -3), (0, 30, 4), (5, 5, 1)])
def test_uniform_loops_with_runtime_and_negative_steps(backend, start, stop, step):
    def reference(i):
        acc = 0
        for p in range(start, stop, step):
            acc = acc * 3 % 101 + p + i
        return acc

    (out, *_) = launch(backend, strided_descending, 8, 12, np.zeros(12, np.int64),
                       start, stop, step)
    np.testing.assert_array_equal(out, [reference(i) for i in range(12)])


# --- uniform loops under per-item guards (a second, guard-free version for groups whose
# work-items all pass the guards) ----------------------------------------------------------


@kk.kernel
def guarded_matmul(c, a: kk.Const, b: kk.Const, k):
    i, j = kk.index(kk.Global, kk.NTuple)
    if i < c.shape[0] and j < c.shape[1]:
        acc = 0.0
        for p in range(k):
            acc += a[i, p] * b[p, j]
        c[i, j] = acc


@kk.kernel
def early_return_matvec(y, a: kk.Const, x: kk.Const, k):
    i = kk.index(kk.Global)
    if i >= y.shape[0]:
        return
    acc = 0.0
    for p in range(k):
        acc += a[i, p] * x[p]
    y[i] = acc


@kk.kernel
def every_third_item(y, x: kk.Const, k):
    i = kk.index(kk.Global)
    if i % 3 != 0:
        total = 0.0
        for p in range(k):
            total += x[p] * i
        y[i] = total


@pytest.mark.parametrize("m, n", [(32, 48), (37, 21), (5, 70)])
def test_guarded_loops_match_numpy_in_whole_and_cut_groups(backend, m, n):
    rng = np.random.default_rng(3)
    a = rng.integers(-3, 4, (m, 40)).astype(np.float32)
    b = rng.integers(-3, 4, (40, n)).astype(np.float32)
    groups = (-(-m // 16) * 16, -(-n // 16) * 16)
    (c, *_) = launch(backend, guarded_matmul, (16, 16), groups, np.zeros((m, n), np.float32),
                     a, b, 40)
    np.testing.assert_array_equal(c, a @ b)


def test_early_return_guard_with_a_loop_matches_numpy(backend):
    a = (np.arange(45 * 33) % 7 - 3).astype(np.float32).reshape(45, 33)
    x = (np.arange(33) % 5).astype(np.float32)
    (y, *_) = launch(backend, early_return_matvec, 16, 48, np.zeros(45, np.float32), a, x, 33)
    np.testing.assert_array_equal(y, a @ x)


def test_groups_where_some_items_fail_the_guard_run_the_kernel_as_written(backend):
    x = np.arange(12, dtype=np.float32)
    (y, *_) = launch(backend, every_third_item, 8, 40, np.full(40, -1, np.float32), x, 12)
    expected = np.where(np.arange(40) % 3 != 0, x.sum() * np.arange(40), -1)
    np.testing.assert_array_equal(y, expected)


# --- loops whose only per-item difference is their exit condition (kept together until
# every work-item is done) -----------------------------------------------------------------


@kk.kernel
def grid_stride_sum(partial, x: kk.Const, n):
    i = kk.index(kk.Global)
    stride = kk.ndrange()[0]
    acc = 0.0
    for p in range(i, n, stride):
        acc += x[p]
    partial[i] = acc


@kk.kernel
def countdown_from_memory(out, limits: kk.Const):
    i = kk.index(kk.Global)
    k = 0
    while k < limits[i]:
        out[i, k] = k * 10 + i
        k += 1


@pytest.mark.parametrize("n, items, group", [(1000, 64, 16), (37, 64, 32), (5, 48, 16),
                                             (4096, 256, 256)])
def test_grid_stride_loops_match_numpy(backend, n, items, group):
    x = (np.arange(n) % 11).astype(np.float32)
    (partial, *_) = launch(backend, grid_stride_sum, group, items, np.zeros(items, np.float32),
                           x, n)
    expected = [x[i::items].sum() for i in range(items)]
    np.testing.assert_array_equal(partial, expected)


def test_per_item_loops_store_only_their_own_iterations(backend):
    limits = np.array([0, 3, 1, 5, 2, 0, 4], np.int64)
    (out, *_) = launch(backend, countdown_from_memory, 4, 7, np.full((7, 5), -1, np.int64),
                       limits)
    expected = np.full((7, 5), -1)
    for i, limit in enumerate(limits):
        expected[i, :limit] = np.arange(limit) * 10 + i
    np.testing.assert_array_equal(out, expected)


@kk.kernel
def step_read_in_the_loop(out, steps: kk.Const, n):
    i = kk.index(kk.Global)
    p = i
    total = 0
    while p < n:
        total += p
        p += steps[0]
    out[i] = total


def test_a_per_item_loop_whose_step_is_read_inside_it(backend):
    (out, *_) = launch(backend, step_read_in_the_loop, 8, 16, np.zeros(16, np.int64),
                       np.array([16], np.int64), 100)
    np.testing.assert_array_equal(out, [sum(range(i, 100, 16)) for i in range(16)])
