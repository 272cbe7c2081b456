"""`autodiff(Reverse, ...)` runs one kernel, the primal and then its reverse in each
work-item, where the reverse needs no tape and no gather kernel; otherwise the augmented
forward and reverse kernels, as `ReverseSplit` always does. Both give the same
derivatives, bit for bit, and the same primal results."""
import numpy as np
import pytest

import kernelkit as kk
from enzyme_ext import (Active, Const, Duplicated, Reverse, ReverseSplit, autodiff,
                        autodiff_thunk, compiler_job_from_backend, tape_type)
from enzyme_ext.activities import Activity

WORKGROUP = 64


@kk.kernel
def sin_times_x(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = kk.sin(x[i]) * x[i]


@kk.kernel
def saxpy(y, a, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = a * x[i] + y[i]


@kk.kernel
def square_in_place(y):
    i = kk.index(kk.Global)
    y[i] = y[i] * y[i]     # the reverse needs the y[i] the primal overwrites: taped


@kk.kernel
def neighbours(y, x: kk.Const):
    i = kk.index(kk.Global) + 1
    y[i] = x[i - 1] - 2.0 * x[i] + x[i + 1]    # transposed by a gather kernel


@kk.kernel
def guarded(y, x: kk.Const):
    i = kk.index(kk.Global)
    if x[i] > 0.0:                 # which way each work-item went is taped
        y[i] = y[i] * kk.exp(x[i])  # and so is the y[i] it overwrites
    else:
        y[i] = x[i] * x[i]


@kk.kernel
def running_product(y, x: kk.Const, steps):
    i = kk.index(kk.Global)
    for _ in range(steps):         # a tape that grows with the loop
        y[i] = y[i] * x[i]


class Launches:
    """Counts the kernels a backend launches, by name."""

    def __init__(self, backend):
        self.names = []
        launch = backend.launch

        def counting(prepared, *args, **kwargs):
            self.names.append(getattr(prepared, "name", None) or str(prepared))
            return launch(prepared, *args, **kwargs)
        backend.launch = counting


def arguments(backend, n, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n)
    y, dy, dx = rng.standard_normal(n), rng.standard_normal(n), rng.standard_normal(n)
    return [kk.to_backend(backend, a) for a in (y, dy, x, dx)]


def reverse_both_ways(backend, kernel, activities_of, n, ndrange=None):
    """(derivatives, final arrays) from autodiff(Reverse) and from ReverseSplit's two
    halves, on copies of the same arguments."""
    results = []
    for split in (False, True):
        arrays = arguments(backend, n)
        activities = activities_of(*arrays)
        launch = kernel(backend, WORKGROUP)
        if split:
            forward, reverse = autodiff_thunk(ReverseSplit, launch,
                                              *(type(a) if isinstance(a, Activity) else Const
                                                for a in activities))
            tape = forward(*activities, ndrange=ndrange or n)
            derivatives = reverse(*activities, tape=tape, ndrange=ndrange or n)
        else:
            derivatives = autodiff(Reverse, launch, *activities, ndrange=ndrange or n)
        kk.synchronize(backend)
        results.append((derivatives, [kk.to_numpy(a) for a in arrays]))
    return results


CASES = {
    # kernel, activities, ndrange, launches of autodiff(Reverse)
    "sin_times_x": (sin_times_x, lambda y, dy, x, dx: (Duplicated(y, dy), Duplicated(x, dx)),
                    None, 1),
    "saxpy": (saxpy, lambda y, dy, x, dx: (Duplicated(y, dy), Active(0.75),
                                           Duplicated(x, dx)), None, 1),
    "overwritten": (square_in_place, lambda y, dy, x, dx: (Duplicated(y, dy),), None, 1),
    "guarded": (guarded, lambda y, dy, x, dx: (Duplicated(y, dy), Duplicated(x, dx)), None, 1),
    "gathered": (neighbours, lambda y, dy, x, dx: (Duplicated(y, dy), Duplicated(x, dx)),
                 998, 2),
    "loop": (running_product, lambda y, dy, x, dx: (Duplicated(y, dy), Duplicated(x, dx), 3),
             None, 2),
}


@pytest.mark.parametrize("case", CASES)
def test_one_kernel_and_two_give_the_same_bits(backend, case):
    """One launch (the combined kernel, after its gather kernel if it has one) where the
    tape is a constant size, the augmented forward and reverse kernels where it grows
    with a loop; the same derivatives and final arrays as ReverseSplit's, bit for bit."""
    kernel, activities_of, ndrange, launches = CASES[case]
    counter = Launches(backend)
    (combined, combined_arrays), (split, split_arrays) = reverse_both_ways(
        backend, kernel, activities_of, 1000, ndrange)
    split_launches = 3 if case == "gathered" else 2
    assert len(counter.names) == launches + split_launches, counter.names
    for ours, theirs in zip(combined_arrays, split_arrays):
        np.testing.assert_array_equal(ours, theirs)
    assert combined == split


def test_one_launch_leaves_the_primal_results_and_the_gradient_of_sin_times_x(backend):
    n = 1000
    y, dy, x, dx = arguments(backend, n, seed=3)
    x_host, dy_host, dx_host = (np.array(kk.to_numpy(a)) for a in (x, dy, dx))
    autodiff(Reverse, sin_times_x(backend, WORKGROUP), Duplicated(y, dy), Duplicated(x, dx),
             ndrange=n)
    np.testing.assert_allclose(kk.to_numpy(y), np.sin(x_host) * x_host, rtol=1e-14)
    np.testing.assert_allclose(kk.to_numpy(dx), dx_host + dy_host * (np.cos(x_host) * x_host
                                                                     + np.sin(x_host)),
                               rtol=1e-13)
    assert not np.any(kk.to_numpy(dy))


def test_a_guarded_kernel_s_gradient_in_one_launch_matches_the_analytic_one(backend):
    n = 1000
    y, dy, x, dx = arguments(backend, n, seed=4)
    y0, x0, dy0, dx0 = (np.array(kk.to_numpy(a)) for a in (y, x, dy, dx))
    autodiff(Reverse, guarded(backend, WORKGROUP), Duplicated(y, dy), Duplicated(x, dx),
             ndrange=n)
    positive = x0 > 0
    np.testing.assert_allclose(kk.to_numpy(y), np.where(positive, y0 * np.exp(x0), x0 * x0),
                               rtol=1e-14)
    np.testing.assert_allclose(kk.to_numpy(dy), np.where(positive, dy0 * np.exp(x0), 0.0),
                               rtol=1e-14)
    np.testing.assert_allclose(kk.to_numpy(dx), dx0 + dy0 * np.where(
        positive, y0 * np.exp(x0), 2.0 * x0), rtol=1e-13)


TILE = 4


@kk.kernel
def tiled_matmul(c, a: kk.Const, b: kk.Const, k):
    i, j = kk.index(kk.Global, kk.NTuple)
    li, lj = kk.index(kk.Local, kk.NTuple)
    a_tile = kk.localmem(np.float64, (TILE, TILE))
    b_tile = kk.localmem(np.float64, (TILE, TILE))
    acc = 0.0
    for start in range(0, k, TILE):
        a_tile[li, lj] = a[i, start + lj]
        b_tile[li, lj] = b[start + li, j]
        kk.synchronize()
        for p in range(TILE):
            acc += a_tile[li, p] * b_tile[p, lj]
        kk.synchronize()
    c[i, j] = acc


@kk.kernel
def sum_until_negative(y, x: kk.Const, n):
    i = kk.index(kk.Global)
    total = 0.0
    for k in range(i, n):
        if x[k] < 0.0:
            break                  # left anywhere: where it ended is taped
        total += x[k] * x[k]
    y[i] = total


def test_counted_loops_tape_nothing_for_their_counters(backend):
    """A loop over tiles up to an argument, and one of constant length inside it: the
    reverse works out where each ended. (Their counters were taped, one per tile, so the
    tiled matmul's tape grew as edge ** 3.) Its gradient takes one launch."""
    edge = 8
    rng = np.random.default_rng(0)
    a, b, seed = (rng.standard_normal((edge, edge)) for _ in range(3))
    arguments = tuple(kk.to_backend(backend, array) for array in
                      (np.zeros((edge, edge)), a, b)) + (edge,)
    job = compiler_job_from_backend(backend, tiled_matmul(backend, (TILE, TILE)), arguments)
    record = tape_type(job, ReverseSplit, (Duplicated, Duplicated, Duplicated, Const),
                       arguments=arguments)
    assert record["tape_floats"].shape == (0,) and record["tape_integers"].shape == (0,)
    counter = Launches(backend)
    c, da, db = (kk.zeros(backend, np.float64, (edge, edge)) for _ in range(3))
    autodiff(Reverse, tiled_matmul(backend, (TILE, TILE)),
             Duplicated(c, kk.to_backend(backend, seed.copy())),
             Duplicated(kk.to_backend(backend, a), da),
             Duplicated(kk.to_backend(backend, b), db), edge, ndrange=(edge, edge))
    assert len(counter.names) == 1
    np.testing.assert_allclose(kk.to_numpy(c), a @ b, rtol=1e-13)
    np.testing.assert_allclose(kk.to_numpy(da), seed @ b.T, rtol=1e-13)
    np.testing.assert_allclose(kk.to_numpy(db), a.T @ seed, rtol=1e-13)


def test_a_loop_left_by_break_still_tapes_where_it_ended(backend):
    n = 200
    x = np.random.default_rng(1).standard_normal(n)
    y, dy, dx = np.zeros(n), np.random.default_rng(2).standard_normal(n), np.zeros(n)
    arrays = [kk.to_backend(backend, a.copy()) for a in (y, dy, x, dx)]
    autodiff(Reverse, sum_until_negative(backend, WORKGROUP),
             Duplicated(arrays[0], arrays[1]), Duplicated(arrays[2], arrays[3]), n,
             ndrange=n)
    expected = np.zeros(n)
    for i in range(n):
        for k in range(i, n):
            if x[k] < 0.0:
                break
            expected[k] += dy[i] * 2.0 * x[k]
    np.testing.assert_allclose(kk.to_numpy(arrays[3]), expected, rtol=1e-12, atol=1e-12)
    assert not np.any(kk.to_numpy(arrays[1]))


def test_a_guard_on_what_the_kernel_never_writes_is_not_taped(backend):
    """Which way `if x[i] > 0.0:` went, x never written, the reverse works out again;
    only the overwritten y[i] is taped."""
    n = 64
    arguments = tuple(kk.to_backend(backend, np.ones(n)) for _ in range(2))
    job = compiler_job_from_backend(backend, guarded(backend, WORKGROUP), arguments)
    record = tape_type(job, ReverseSplit, (Duplicated, Duplicated), arguments=arguments)
    assert record["tape_integers"].shape == (0,) and record["tape_floats"].shape == (1,)
