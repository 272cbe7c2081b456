"""Reverse mode sums the adjoints of an element that every work-item of a group reads
(`w[0]`, `w[k]` for an argument k, `w[group]`) over the group first, and adds the sum to
the shadow once per group, instead of one atomic per work-item on one address."""
import numpy as np
import pytest

import kernelkit as kk
from enzyme_ext import Active, Duplicated, Reverse, autodiff

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


@kk.kernel
def scaled_squares(y, a, x: kk.Const):
    i, j = kk.index(kk.Global, kk.NTuple)
    y[i, j] = a * x[i, j] * x[i, j]


def _active_derivative(backend, shape, workgroupsize, x, dy):
    y = kk.zeros(backend, np.float64, shape)
    _, da, _ = autodiff(Reverse, scaled_squares(backend, workgroupsize),
                        Duplicated(y, kk.to_backend(backend, dy.copy())), Active(0.5),
                        kk.to_backend(backend, x), ndrange=shape)
    return da


@pytest.mark.parametrize("shape, workgroupsize", [
    ((64, 40), (16, 16)), ((37, 53), (16, 16)), ((9, 100), (2, 48)), ((30, 7), (5, 7)),
    ((3, 300), (1, 256))],
    ids=["whole groups", "partial groups", "runs across subgroups", "tiny groups",
         "one row"])
def test_a_group_sum_has_the_same_bits_by_shuffles_as_by_one_work_item(
        shape, workgroupsize, monkeypatch):
    """A GPU sums a group's shares by subgroups (`subgroup.sum`, then the subgroups' sums
    in order), the CPU by one work-item; the order is the same, and so are the bits. The
    subgroup form runs here on the CPU (its subgroup operations in local memory), for
    groups cut short by the ndrange in the middle of a subgroup, and groups whose size is
    not a multiple of 32."""
    from backends.cpu.target import CPUTarget
    backend = kk.CPU()
    rng = np.random.default_rng(7)
    # Values spread over many magnitudes: a different order of the additions would give
    # different bits.
    x = rng.standard_normal(shape) * 10.0 ** rng.integers(-8, 8, shape)
    dy = rng.standard_normal(shape)
    by_one_item = _active_derivative(backend, shape, workgroupsize, x, dy)
    monkeypatch.setattr(CPUTarget, "subgroups_in_hardware", True, raising=False)
    by_subgroups = _active_derivative(kk.CPU(), shape, workgroupsize, x, dy)
    assert by_subgroups == by_one_item      # bit for bit (floats compare exactly)
    assert by_one_item == pytest.approx(np.sum(dy * x * x), rel=1e-12)


def test_a_group_sum_adds_each_subgroup_along_its_tree_then_the_subgroups_in_order():
    """One group of 64 work-items: the first subgroup's shares are 2**60 and -2**60 in
    lanes 0 and 1 and 1.0 in lane 2; the second subgroup's a 1.0. Along the tree, lanes
    0 and 1 cancel before lane 2's 1.0 is added: 1.0, then 1.0 + 1.0 = 2.0; adding the
    64 shares one after another (or in eight interleaved sums) would lose lane 2's 1.0
    to 2**60 first."""
    backend = kk.CPU()
    shape = (1, 64)
    x = np.zeros(shape)
    x[0, :3] = (2.0 ** 30, 2.0 ** 30, 1.0)
    x[0, 32] = 1.0
    dy = np.zeros(shape)
    dy[0, :3] = (1.0, -1.0, 1.0)
    dy[0, 32] = 1.0
    assert _active_derivative(backend, shape, (1, 64), x, dy) == 2.0
