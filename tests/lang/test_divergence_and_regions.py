"""Kernels that once gave wrong answers, hung or failed to compile on the CPU, where a
group's work-items run one after another: loops that work-items leave at different
iterations followed by code the CPU turns inside out, values assigned between barriers,
barriers under branches inside short loops, and regions that wrap around a loop. Each
result is checked against the same function run per work-item in plain Python."""
import numpy as np
import pytest

import kernelkit as kk

FLAGS = np.array([True, True, True, False, True, True, False, True])


def run(backend, kernel, *args, ndrange, workgroupsize=4):
    kernel(backend, workgroupsize)(*args, ndrange=ndrange)
    return args[0]


def counted(backend, kernel, flags, n, m):
    out = kk.zeros(backend, np.int64, len(flags))
    run(backend, kernel, out, kk.to_backend(backend, flags), n, m, ndrange=len(flags))
    return kk.to_numpy(out)


def steps_until_false(flags, n):
    return np.array([n if flag else 0 for flag in flags])


# --- a loop work-items leave at different iterations, then a loop all run alike ------


@kk.kernel
def break_then_branching_loop(out, a: kk.Const, n, m):
    i = kk.index(kk.Global)
    w = 0
    for q in range(n):
        if not a[i]:
            break
        w += 1
    for j in range(m):
        if a[i]:
            pass
    out[i] = w


@kk.kernel
def while_break_then_branching_loop(out, a: kk.Const, n, m):
    i = kk.index(kk.Global)
    w = 0
    while w < n:
        if not a[i]:
            break
        w += 1
    for j in range(m):
        if a[i]:
            pass
    out[i] = w


@kk.kernel
def while_condition_then_branching_loop(out, a: kk.Const, n, m):
    i = kk.index(kk.Global)
    w = 0
    while w < n and a[i]:
        w += 1
    for j in range(m):
        if a[i]:
            pass
    out[i] = w


@kk.kernel
def while_true_holding_branching_loop(out, a: kk.Const, n, m):
    i = kk.index(kk.Global)
    w = 0
    while True:
        for j in range(m):
            if a[i]:
                pass
        if not a[i] or w >= n:
            break
        w += 1
    out[i] = w


@pytest.mark.parametrize("kernel", [break_then_branching_loop,
                                    while_break_then_branching_loop,
                                    while_condition_then_branching_loop,
                                    while_true_holding_branching_loop],
                         ids=lambda k: k.__name__)
def test_a_loop_left_at_different_iterations_keeps_each_work_items_count(backend, kernel):
    assert counted(backend, kernel, FLAGS, 7, 3).tolist() == \
        steps_until_false(FLAGS, 7).tolist()


@kk.kernel
def last_value_before_break_then_uniform_loop(out, a: kk.Const, n, m):
    i = kk.index(kk.Global)
    last = -1
    for q in range(n):
        last = q * 10
        if q >= a[i]:
            break
    total = 0
    for j in range(m):
        total += j
    out[i] = last + total


def test_a_value_set_in_the_iteration_a_work_item_leaves_at_is_its_own(backend):
    stops = np.array([0, 5, 2, 9, 1, 1, 7, 3, 4, 0, 6], dtype=np.int64)
    out = kk.zeros(backend, np.int64, len(stops))
    run(backend, last_value_before_break_then_uniform_loop, out, kk.to_backend(backend, stops),
        8, 40, ndrange=len(stops))
    expected = [min(s, 7) * 10 + sum(range(40)) for s in stops]
    assert kk.to_numpy(out).tolist() == expected


# --- values assigned under a vote, read after a later barrier ------------------------


@kk.kernel
def reassigned_under_vote(out, a: kk.Const):
    i = kk.index(kk.Global)
    c = 100 + i
    if kk.synchronize_any(a[i] > 5):
        c = 200 + i
    kk.synchronize()
    out[i] = c


@kk.kernel
def constant_under_vote(out, a: kk.Const):
    i = kk.index(kk.Global)
    c = 100 + i
    if kk.synchronize_any(a[i] > 5):
        c = 7
    kk.synchronize()
    out[i] = c


def test_a_value_assigned_under_synchronize_any_survives_the_next_barrier(backend):
    a = kk.to_backend(backend, np.array([0, 0, 0, 0, 0, 10, 0, 0], dtype=np.int64))
    out = kk.zeros(backend, np.int64, 8)
    run(backend, reassigned_under_vote, out, a, ndrange=8)
    assert kk.to_numpy(out).tolist() == [100, 101, 102, 103, 204, 205, 206, 207]
    run(backend, constant_under_vote, out, a, ndrange=8)
    assert kk.to_numpy(out).tolist() == [100, 101, 102, 103, 7, 7, 7, 7]


# --- barriers under a branch inside a loop, and regions that wrap around a loop ------


@kk.kernel
def barrier_every_other_iteration(A):
    I = kk.index(kk.Global)
    for m in range(1, 4):
        A[I] = m
        if m % 2 == 0:
            kk.synchronize()


@kk.kernel
def barrier_every_other_iteration_to(A, end):
    I = kk.index(kk.Global)
    for m in range(1, end):
        A[I] = m
        if m % 2 == 0:
            kk.synchronize()


def test_a_barrier_under_a_branch_in_a_short_loop_returns(backend):
    A = kk.zeros(backend, np.int64, 16)
    run(backend, barrier_every_other_iteration, A, ndrange=16)
    assert kk.to_numpy(A).tolist() == [3] * 16
    run(backend, barrier_every_other_iteration_to, A, 7, ndrange=16)
    assert kk.to_numpy(A).tolist() == [6] * 16


@kk.kernel
def neighbours_every_other_round(out, x: kk.Const, rounds):
    i = kk.index(kk.Global)
    li = kk.index(kk.Local)
    shared = kk.localmem(np.int64, 4)
    value = x[i]
    for r in range(rounds):
        value = (value * 3 + r) % 1001
        if r % 2 == 1:
            shared[li] = value
            kk.synchronize()
            value += shared[(li + 1) % 4]
            kk.synchronize()
    out[i] = value


def neighbours_reference(x, rounds, group=4):
    values = list(x)
    for r in range(rounds):
        values = [(v * 3 + r) % 1001 for v in values]
        if r % 2 == 1:
            shared = list(values)
            values = [v + shared[(k // group) * group + (k % group + 1) % group]
                      for k, v in enumerate(values)]
    return values


@pytest.mark.parametrize("rounds", [3, 4, 40])
def test_values_carried_around_a_loop_with_barriers_on_some_iterations(backend, rounds):
    x = np.arange(12, dtype=np.int64) % 5 - 2
    out = kk.zeros(backend, np.int64, 12)
    run(backend, neighbours_every_other_round, out, kk.to_backend(backend, x), rounds,
        ndrange=12)
    assert kk.to_numpy(out).tolist() == neighbours_reference(x.tolist(), rounds)


# --- code that once failed to compile ("does not dominate all uses") -----------------


@kk.kernel
def inner_loop_then_return(out, k):
    i = kk.index(kk.Global)
    for p in range(3):
        if k > p:
            for q in range(i):
                pass
        if k < 100:
            out[i] = p
            return


@kk.kernel
def inner_loop_then_break(out, k):
    i = kk.index(kk.Global)
    p = 0
    for p in range(3):
        if k > p:
            for q in range(i):
                pass
        if k < 100:
            break
    out[i] = p + 10


@kk.kernel
def empty_loops_then_break(out, a: kk.Const):
    i = kk.index(kk.Global)
    w = 0
    while w < 10:
        for _ in range(2):
            pass
        for _ in range(2):
            pass
        if a[w % 4] < a[i]:
            break
        w += 1
    out[i] = w


def test_kernels_once_rejected_by_llvm_compile_and_run(backend):
    out = kk.to_backend(backend, np.full(8, -1, dtype=np.int64))
    run(backend, inner_loop_then_return, out, 5, ndrange=8)
    assert kk.to_numpy(out).tolist() == [0] * 8
    run(backend, inner_loop_then_break, out, 5, ndrange=8)
    assert kk.to_numpy(out).tolist() == [10] * 8
    a = np.arange(8, dtype=np.int64) % 3
    run(backend, empty_loops_then_break, out, kk.to_backend(backend, a), ndrange=8)
    expected = []
    for i in range(8):
        w = 0
        while w < 10 and not a[w % 4] < a[i]:
            w += 1
        expected.append(w)
    assert kk.to_numpy(out).tolist() == expected


@kk.kernel
def remainder_before_barrier_in_loop(out, step):
    i = kk.index(kk.Global)
    li = kk.index(kk.Local)
    v0 = 0
    v1 = 3
    for p in range(1, 40, 2):
        v0 = v1 % (li + 1)
        kk.synchronize()
        v1 = (v1 + step) % 1009
    out[i] = v0 * 10000 + v1


def test_a_per_item_value_handed_around_a_loop_is_taken_before_the_loop_moves_on(backend):
    out = kk.zeros(backend, np.int64, 7)
    run(backend, remainder_before_barrier_in_loop, out, 1, ndrange=7)
    assert kk.to_numpy(out).tolist() == [22 % (i % 4 + 1) * 10000 + 23 for i in range(7)]
