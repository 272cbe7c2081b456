"""Reverse mode sums the adjoints of an element that every work-item of a group reads
(`w[0]`, `w[k]` for an argument k, `w[group]`) over the group first, and adds the sum to
the shadow once per group, instead of one atomic per work-item on one address."""
import numpy as np

import kernelkit as kk
from enzyme_ext import Duplicated, Reverse, autodiff

GROUP = 64


@kk.kernel
def broadcast(y, w: kk.Const, x: kk.Const, k):
    i = kk.index(kk.Global)
    y[i] = w[0] * x[i] + w[k] * x[i] * x[i] + w[kk.index(kk.Group)]


@kk.kernel
def add_one_each(y, w: kk.Const):
    i = kk.index(kk.Global)
    y[i] = w[0]


@kk.kernel
def broadcast_then_overwritten(y, w):
    i = kk.index(kk.Global)
    y[i] = w[0] * w[0]
    if i == 0:
        w[1] = 3.0 * y[i]      # w is written: its reads keep their atomics


def test_the_gradient_of_broadcast_reads(backend):
    n = 1000
    rng = np.random.default_rng(0)
    x, w, dy = rng.standard_normal(n), rng.standard_normal(20), rng.standard_normal(n)
    y, dw, dx = (kk.zeros(backend, np.float64, shape) for shape in (n, 20, n))
    autodiff(Reverse, broadcast(backend, GROUP), Duplicated(y, kk.to_backend(backend, dy.copy())),
             Duplicated(kk.to_backend(backend, w), dw), Duplicated(kk.to_backend(backend, x), dx),
             3, ndrange=n)
    expected = np.zeros(20)
    expected[0] += np.sum(dy * x)
    expected[3] += np.sum(dy * x * x)
    for group in range(-(-n // GROUP)):
        expected[group] += np.sum(dy[group * GROUP:(group + 1) * GROUP])
    np.testing.assert_allclose(kk.to_numpy(dw), expected, rtol=1e-12)
    np.testing.assert_allclose(kk.to_numpy(dx), dy * (w[0] + 2.0 * w[3] * x), rtol=1e-13)


def test_a_group_s_adjoints_reach_the_shadow_as_one_sum(backend):
    """float32: 64 adjoints of 1.0 added one by one to a shadow holding 1e8 would each
    be lost (float32's spacing there is 8); their sum, 64, is not."""
    w = kk.to_backend(backend, np.ones(1, np.float32))
    dw = kk.to_backend(backend, np.full(1, 1e8, np.float32))
    y = kk.zeros(backend, np.float32, GROUP)
    autodiff(Reverse, add_one_each(backend, GROUP),
             Duplicated(y, kk.to_backend(backend, np.ones(GROUP, np.float32))),
             Duplicated(w, dw), ndrange=GROUP)
    assert kk.to_numpy(dw)[0] == np.float32(1e8 + GROUP)


def test_an_array_the_kernel_writes_keeps_its_updates_in_order(backend):
    n = 200
    w0 = np.array([1.5, 0.25])
    w, dw = kk.to_backend(backend, w0.copy()), kk.to_backend(backend, np.array([0.0, 0.5]))
    dy = np.random.default_rng(1).standard_normal(n)
    y = kk.zeros(backend, np.float64, n)
    autodiff(Reverse, broadcast_then_overwritten(backend, GROUP),
             Duplicated(y, kk.to_backend(backend, dy.copy())), Duplicated(w, dw), ndrange=n)
    # w[1]'s final adjoint 0.5 flows into y[0] (times 3), then into w[0] with the rest.
    expected = 2.0 * w0[0] * (np.sum(dy) + 3.0 * 0.5)
    np.testing.assert_allclose(kk.to_numpy(dw), [expected, 0.0], rtol=1e-12)
