"""What autodiff refuses in a launch's arguments before it launches anything
(enzyme_ext/rules.py): arrays that share memory where the kernel writes one of them,
whatever their activities (the derivative kernels take each argument for memory of its
own: a value re-read after another argument overwrote it would give a wrong derivative
silently), and Duplicated integers (which have no derivative). Arrays that are only read
may share memory."""
import numpy as np
import pytest

import kernelkit as kk
from enzyme_ext import (Const, Duplicated, DuplicatedNoNeed, Forward, Reverse, autodiff)
from kernelkit.errors import LaunchError

N = 32


@kk.kernel
def weigh_then_clear(y, x, w, scratch):
    i = kk.index(kk.Global)
    y[i] = x[i] * w[i]
    scratch[i] = 0.0


@kk.kernel
def weigh_then_count(y, x, w, hits):
    i = kk.index(kk.Global)
    y[i] = x[i] * w[i]
    kk.atomic_add(hits, i, 1.0)


@kk.kernel
def weigh_and_shift(y, x, a: kk.Const, b: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i] * a[i] + b[i]


@kk.kernel
def product(y, x, z):
    i = kk.index(kk.Global)
    y[i] = x[i] * z[i]


@kk.kernel
def scaled_by_count(y, x, counts):
    i = kk.index(kk.Global)
    y[i] = x[i] * counts[i]


def on(backend, array):
    return kk.to_backend(backend, np.array(array, copy=True))


@pytest.mark.parametrize("kernel, written", [(weigh_then_clear, "scratch"),
                                             (weigh_then_count, "hits")],
                         ids=["stored", "updated atomically"])
@pytest.mark.parametrize("mode", [Reverse, Forward], ids=["reverse", "forward"])
def test_a_const_array_sharing_memory_with_one_the_kernel_writes_is_refused(
        backend, kernel, written, mode):
    weights = np.linspace(1.0, 2.0, N)
    shared = on(backend, weights)
    with pytest.raises(LaunchError, match=rf"'{kernel.__name__}': 'w' and '{written}' share "
                                          rf"memory, and the kernel writes '{written}'.*"
                                          rf"pass arrays of their own"):
        autodiff(mode, kernel(backend, N), Duplicated(on(backend, np.zeros(N)),
                                                      on(backend, np.ones(N))),
                 Duplicated(on(backend, np.ones(N)), on(backend, np.zeros(N))),
                 Const(shared), Const(shared), ndrange=N)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(shared), weights)   # nothing ran


def test_const_arrays_that_are_only_read_may_share_memory(backend):
    rng = np.random.default_rng(1)
    x, weights, seed = rng.uniform(-1, 1, N), rng.uniform(-1, 1, N), rng.uniform(-1, 1, N)
    shared, dx = on(backend, weights), kk.zeros(backend, np.float64, N)
    y = on(backend, np.zeros(N))
    autodiff(Reverse, weigh_and_shift(backend, N), Duplicated(y, on(backend, seed)),
             Duplicated(on(backend, x), dx), shared, Const(shared), ndrange=N)
    kk.synchronize(backend)
    np.testing.assert_allclose(kk.to_numpy(y), x * weights + weights, rtol=1e-15)
    np.testing.assert_allclose(kk.to_numpy(dx), seed * weights, rtol=1e-15)


def test_differentiated_arrays_that_are_only_read_may_share_memory(backend):
    # Each has a shadow of its own; neither is written, so both are re-read safely.
    rng = np.random.default_rng(2)
    x, seed = rng.uniform(-1, 1, N), rng.uniform(-1, 1, N)
    shared = on(backend, x)
    dx, dz = kk.zeros(backend, np.float64, N), kk.zeros(backend, np.float64, N)
    autodiff(Reverse, product(backend, N), Duplicated(on(backend, np.zeros(N)),
                                                      on(backend, seed)),
             Duplicated(shared, dx), Duplicated(shared, dz), ndrange=N)
    kk.synchronize(backend)
    np.testing.assert_allclose(kk.to_numpy(dx), seed * x, rtol=1e-15)
    np.testing.assert_allclose(kk.to_numpy(dz), seed * x, rtol=1e-15)


@pytest.mark.parametrize("activity", [Duplicated, DuplicatedNoNeed])
@pytest.mark.parametrize("mode", [Reverse, Forward], ids=["reverse", "forward"])
def test_a_duplicated_integer_array_is_refused_naming_the_argument(backend, activity, mode):
    counts = on(backend, np.arange(N, dtype=np.int64))
    with pytest.raises(LaunchError, match=r"'scaled_by_count': argument 'counts' is "
                                          rf"{activity.__name__}, but it is an array of "
                                          r"int64.*pass it as Const\(counts\)"):
        autodiff(mode, scaled_by_count(backend, N),
                 Duplicated(on(backend, np.zeros(N)), on(backend, np.ones(N))),
                 Duplicated(on(backend, np.ones(N)), on(backend, np.zeros(N))),
                 activity(counts, kk.zeros(backend, np.int64, N)), ndrange=N)


def test_arguments_checked_once_are_checked_again_where_anything_changes(backend):
    """A loop of launches of the same arrays is checked once (the rule keeps what it found
    for those array objects, shapes and strides); new arrays, an array reshaped in place,
    or a number of another type are checked afresh, and refused as before."""
    launch = weigh_and_shift(backend, 8)
    x, a, b = (kk.to_backend(backend, np.full(N, v)) for v in (1.0, 2.0, 3.0))
    y, dy, dx = (kk.zeros(backend, np.float64, N) for _ in range(3))

    def gradient(y, dy, x, dx):
        autodiff(Reverse, launch, Duplicated(y, dy), Duplicated(x, dx), a, b, ndrange=N)
        kk.synchronize(backend)

    for _ in range(3):
        gradient(y, dy, x, dx)
    # The same x, with y now a view of it: refused, though x was checked before.
    with pytest.raises(LaunchError, match="share memory"):
        gradient(x, dy, x[:], dx)
    # The shadow of x given as x itself, after the same arguments passed.
    gradient(y, dy, x, dx)
    with pytest.raises(LaunchError, match="itself"):
        gradient(y, dy, x, x)
    # An array reshaped in place is a new one to check: its shadow no longer matches.
    if isinstance(y, np.ndarray):
        gradient(y, dy, x, dx)
        x.shape = (N // 2, 2)
        with pytest.raises(LaunchError, match="shape"):
            gradient(y, dy, x, dx)
        x.shape = (N,)
        # An array made read-only in place (the same object, shape and strides) is of
        # another kind: the kernel writes y.
        gradient(y, dy, x, dx)
        y.flags.writeable = False
        with pytest.raises(LaunchError, match="read-only"):
            gradient(y, dy, x, dx)


@pytest.mark.parametrize("mode", ["reverse", "split", "forward"])
def test_a_loop_of_launches_plans_them_once(backend, mode, monkeypatch):
    """Launches of arguments of the kinds of one of the last few, in the same geometry,
    reuse its plan: the arguments are not checked again nor the derivative kernels
    looked up; two buffers swapped each step (a time loop's) are two plans."""
    from enzyme_ext import ReverseSplit, autodiff_thunk
    from enzyme_ext.rules import Rule
    looked_up = []
    derivatives = Rule.derivatives
    monkeypatch.setattr(Rule, "derivatives", lambda self, modes, *rest: (
        looked_up.append(modes), derivatives(self, modes, *rest))[1])
    launch = weigh_and_shift(backend, 8)
    x, a, b = (kk.to_backend(backend, np.full(N, v)) for v in (1.0, 2.0, 3.0))
    buffers = [(kk.zeros(backend, np.float64, N), kk.zeros(backend, np.float64, N))
               for _ in range(2)]
    dx = kk.zeros(backend, np.float64, N)
    forward, reverse = autodiff_thunk(ReverseSplit, launch, Duplicated, Duplicated, Const,
                                      Const)
    for step in range(6):
        y, dy = buffers[step % 2]
        arguments = (Duplicated(y, dy), Duplicated(x, dx), a, b)
        if mode == "reverse":
            autodiff(Reverse, launch, *arguments, ndrange=N)
        elif mode == "split":
            reverse(*arguments, tape=forward(*arguments, ndrange=N), ndrange=N)
        else:
            autodiff(Forward, launch, *arguments, ndrange=N)
    kk.synchronize(backend)
    calls = {"reverse": 1, "split": 2, "forward": 1}[mode]
    assert 0 < len(looked_up) <= 2 * calls * 2, looked_up   # two buffers, each planned once
