"""Reverse mode of kernels with local memory and barriers: the reverse of a barrier is a
barrier, local arrays get zeroed shadows, and a partial last work-group (an ndrange that
is not a multiple of the group) differentiates like the others, with no work-item left
out of a barrier and none outside the ndrange touching the tape."""
import numpy as np

import kernelkit as kk
from enzyme_ext import Active, Duplicated, Reverse, autodiff

GROUP = 64
TILE = 8


@kk.kernel
def group_sums_of_squares(sums, x):
    """A tree reduction in local memory. Work-items outside the ndrange do not run, so in
    a partial last group the tree adds only the entries the group's work-items wrote."""
    i = kk.index(kk.Global)
    li = kk.index(kk.Local)
    (n,) = kk.ndrange()
    valid = min(64, n - kk.index(kk.Group) * 64)
    scratch = kk.localmem(np.float64, 64)
    scratch[li] = x[i] * x[i]
    kk.synchronize()
    stride = 32
    while stride > 0:
        if li < stride and li + stride < valid:
            scratch[li] += scratch[li + stride]
        kk.synchronize()
        stride //= 2
    if li == 0:
        sums[kk.index(kk.Group)] = scratch[0]


@kk.kernel
def tiled_matmul(c, a, b):
    i, j = kk.index(kk.Global, kk.NTuple)
    li, lj = kk.index(kk.Local, kk.NTuple)
    tile_a = kk.localmem(np.float64, (TILE, TILE))
    tile_b = kk.localmem(np.float64, (TILE, TILE))
    total = 0.0
    for t in range(a.shape[1] // TILE):
        tile_a[li, lj] = a[i, t * TILE + lj]
        tile_b[li, lj] = b[t * TILE + li, j]
        kk.synchronize()
        for k in range(TILE):
            total += tile_a[li, k] * tile_b[k, lj]
        kk.synchronize()
    c[i, j] = total


def test_a_tree_reduction_in_local_memory_with_a_partial_last_group(backend):
    for n in (256, 100):
        groups = -(-n // GROUP)
        x = np.random.default_rng(n).uniform(-1, 1, n)
        seed = np.arange(1.0, groups + 1)
        sums = kk.zeros(backend, np.float64, groups)
        dx = kk.zeros(backend, np.float64, n)
        autodiff(Reverse, group_sums_of_squares(backend, GROUP),
                 Duplicated(sums, kk.to_backend(backend, seed.copy())),
                 Duplicated(kk.to_backend(backend, x), dx), ndrange=n)
        padded = np.zeros(groups * GROUP)
        padded[:n] = x * x
        np.testing.assert_allclose(kk.to_numpy(sums), padded.reshape(groups, GROUP).sum(1))
        np.testing.assert_allclose(kk.to_numpy(dx), 2 * x * np.repeat(seed, GROUP)[:n])


def test_a_tiled_matmul_in_local_memory(backend):
    rng = np.random.default_rng(5)
    n = 16
    a, b = rng.random((n, n)), rng.random((n, n))
    seed = rng.random((n, n))
    c = kk.zeros(backend, np.float64, (n, n))
    da, db = kk.zeros(backend, np.float64, (n, n)), kk.zeros(backend, np.float64, (n, n))
    autodiff(Reverse, tiled_matmul(backend, (TILE, TILE)),
             Duplicated(c, kk.to_backend(backend, seed.copy())),
             Duplicated(kk.to_backend(backend, a), da), Duplicated(kk.to_backend(backend, b), db),
             ndrange=(n, n))
    np.testing.assert_allclose(kk.to_numpy(c), a @ b)
    np.testing.assert_allclose(kk.to_numpy(da), seed @ b.T)
    np.testing.assert_allclose(kk.to_numpy(db), a.T @ seed)


@kk.kernel
def scaled_2d(y, a, x: kk.Const):
    i, j = kk.index(kk.Global, kk.NTuple)
    y[i, j] = a * x[i, j] * x[i, j]


def test_an_active_scalar_is_summed_over_partial_work_groups_in_two_dimensions(backend):
    """The reverse kernel sums an Active scalar's shares per work-group; groups that reach
    past the ndrange on either axis have work-items that do not run."""
    shape = (21, 13)
    x = np.random.default_rng(9).uniform(-1, 1, shape)
    seed = np.random.default_rng(10).uniform(-1, 1, shape)
    y = kk.zeros(backend, np.float64, shape)
    dx = kk.zeros(backend, np.float64, shape)
    _, da, _ = autodiff(Reverse, scaled_2d(backend, (8, 4)),
                        Duplicated(y, kk.to_backend(backend, seed.copy())), Active(1.5),
                        Duplicated(kk.to_backend(backend, x), dx), ndrange=shape)
    np.testing.assert_allclose(da, np.sum(seed * x * x), rtol=1e-12)
    np.testing.assert_allclose(kk.to_numpy(dx), 3.0 * seed * x, rtol=1e-12)
