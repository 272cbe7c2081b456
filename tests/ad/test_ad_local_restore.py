"""Reverse mode of kernels that read local memory other work-items stored: where the
element's value can be computed again from its storer's position (a tile loaded from an
array the kernel never writes), the reverse kernel computes it instead of the tape
holding every load (enzyme_ext/transform/restore.py). Each gradient is checked against
central differences or closed forms, in float64, and the tape record shows whether the
loads were taped: kernels whose local values cannot be computed again (read before they
are stored in an iteration, stored by some work-items only, stored in a loop the load is
not in, made of values the work-item carries) still tape them, and stay correct."""
import numpy as np
import pytest

import kernelkit as kk
from enzyme_ext import Const, Duplicated, Reverse, autodiff, compiler_job_from_backend, tape_type

TILE = 4


@kk.kernel
def tiled_product(c, a, b, k):
    """C = A @ sin(B) through TILE x TILE tiles, every work-item storing its element of
    both tiles. The ndrange is C's shape rounded up to whole tiles: the indices are
    clamped and only work-items inside C write it."""
    i, j = kk.index(kk.Global, kk.NTuple)
    li, lj = kk.index(kk.Local, kk.NTuple)
    rows, cols = c.shape
    tile_a = kk.localmem(np.float64, (TILE, TILE))
    tile_b = kk.localmem(np.float64, (TILE, TILE))
    total = 0.0
    for start in range(0, k, TILE):
        tile_a[li, lj] = a[min(i, rows - 1), min(start + lj, k - 1)]
        tile_b[li, lj] = b[min(start + li, k - 1), min(j, cols - 1)]
        kk.synchronize()
        for p in range(TILE):
            if start + p < k:
                total += tile_a[li, p] * kk.sin(tile_b[p, lj])
        kk.synchronize()
    if i < rows and j < cols:
        c[i, j] = total


@kk.kernel
def previous_tile(y, x):
    """Each iteration reads the tile stored in the iteration before: not computable from
    this iteration's store."""
    i = kk.index(kk.Global)
    li = kk.index(kk.Local)
    tile = kk.localmem(np.float64, (TILE,))
    total = 0.0
    for t in range(3):
        if t > 0:
            total += tile[(li + 1) % TILE] * tile[li]
        kk.synchronize()
        tile[li] = x[i] * (t + 1.0)
        kk.synchronize()
    y[i] = total


@kk.kernel
def alternating_storers(y, x):
    """Every other work-item stores, alternating by iteration: half the elements read
    hold the value stored an iteration earlier."""
    i = kk.index(kk.Global)
    li = kk.index(kk.Local)
    tile = kk.localmem(np.float64, (TILE,))
    total = 0.0
    for t in range(3):
        if (li + t) % 2 == 0:
            tile[li] = x[i] * (t + 1.0)
        kk.synchronize()
        if t > 0:
            total += tile[li ^ 1] * x[i]
        kk.synchronize()
    y[i] = total


@kk.kernel
def carried_value(y, x):
    """The stored value is a loop-carried product of the work-item's: computed again only
    from the tape."""
    i = kk.index(kk.Global)
    li = kk.index(kk.Local)
    tile = kk.localmem(np.float64, (TILE,))
    product = 1.0
    for t in range(3):
        product *= x[i] + t
    tile[li] = product
    kk.synchronize()
    y[i] = tile[(li + 3) % TILE] + tile[li]


def float_slots(backend, kernel, workgroupsize, arguments, activities):
    arguments = tuple(kk.to_backend(backend, a) if isinstance(a, np.ndarray) else a
                      for a in arguments)
    job = compiler_job_from_backend(backend, kernel(backend, workgroupsize), arguments)
    record = tape_type(job, Reverse, activities, arguments=arguments)
    return record["tape_floats"].shape[0]


def gradient(backend, kernel, workgroupsize, ndrange, arrays, seed, differentiated):
    """(the output's adjoint seeded with `seed`, pulled back to each array in
    `differentiated`), arrays[0] being the output."""
    shadows = [kk.to_backend(backend, seed.copy())] + \
        [kk.zeros(backend, np.float64, a.shape) for a in arrays[1:]]
    annotated = [Duplicated(kk.to_backend(backend, a.copy()), s) if k in differentiated
                 or k == 0 else kk.to_backend(backend, a.copy())
                 for k, (a, s) in enumerate(zip(arrays, shadows))]
    extra = [a for a in arrays if not isinstance(a, np.ndarray)]
    autodiff(Reverse, kernel(backend, workgroupsize), *annotated, *extra, ndrange=ndrange)
    kk.synchronize(backend)
    return {k: kk.to_numpy(shadows[k]) for k in differentiated}


def finite_differences(backend, kernel, workgroupsize, ndrange, arrays, extra, seed, k,
                       step=1e-6):
    def loss(values):
        copies = [kk.to_backend(backend, v.copy()) for v in values]
        kernel(backend, workgroupsize)(*copies, *extra, ndrange=ndrange)
        kk.synchronize(backend)
        return float(np.sum(seed * kk.to_numpy(copies[0])))
    result = np.zeros(arrays[k].shape)
    for index in np.ndindex(arrays[k].shape):
        plus, minus = [a.copy() for a in arrays], [a.copy() for a in arrays]
        plus[k][index] += step
        minus[k][index] -= step
        result[index] = (loss(plus) - loss(minus)) / (2 * step)
    return result


@pytest.mark.parametrize("shape, k", [((8, 8), 8), ((7, 6), 10)],
                         ids=["whole tiles", "rounded up to whole tiles"])
def test_a_tiled_product_computes_its_tiles_again_instead_of_taping_them(backend, shape, k):
    rows, cols = shape
    rng = np.random.default_rng(1)
    a, b = rng.uniform(-1, 1, (rows, k)), rng.uniform(-1, 1, (k, cols))
    c, seed = np.zeros(shape), rng.uniform(-1, 1, shape)
    slots = float_slots(backend, tiled_product, (TILE, TILE), (c, a, b, k),
                        (Duplicated, Duplicated, Duplicated, Const))
    assert slots < k          # not two floats for each of the k inner iterations
    shadows = [kk.to_backend(backend, seed.copy()), kk.zeros(backend, np.float64, a.shape),
               kk.zeros(backend, np.float64, b.shape)]
    autodiff(Reverse, tiled_product(backend, (TILE, TILE)),
             *(Duplicated(kk.to_backend(backend, v.copy()), s)
               for v, s in zip((c, a, b), shadows)), k,
             ndrange=tuple(-(-n // TILE) * TILE for n in shape))
    kk.synchronize(backend)
    # C = A @ sin(B): dA = seed @ sin(B).T, dB = cos(B) * (A.T @ seed).
    np.testing.assert_allclose(kk.to_numpy(shadows[1]), seed @ np.sin(b).T, rtol=1e-12)
    np.testing.assert_allclose(kk.to_numpy(shadows[2]), np.cos(b) * (a.T @ seed),
                               rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("kernel", [previous_tile, alternating_storers, carried_value],
                         ids=lambda k: k.name)
def test_local_values_that_cannot_be_computed_again_are_taped(backend, kernel):
    n = 12
    rng = np.random.default_rng(2)
    x, y, seed = rng.uniform(0.5, 1.5, n), np.zeros(n), rng.uniform(-1, 1, n)
    assert float_slots(backend, kernel, TILE, (y, x), (Duplicated, Duplicated)) > 0
    got = gradient(backend, kernel, TILE, n, [y, x], seed, {1})[1]
    expected = finite_differences(backend, kernel, TILE, n, [y, x], [], seed, 1)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-8)
