"""Launch grids of four dimensions, as KernelAbstractions and Warp allow: the positions
`kk.index` gives (global, local, group; linear and per axis), `kk.ndrange`, `kk.groupsize`
and `kk.ngroups`, with partial work-groups and work-group sizes of fewer dimensions;
local memory and barriers in a four-dimensional work-group; derivatives of a
four-dimensional launch; and the error for five dimensions. On CUDA, whose grids have
three axes, the first two axes share one."""
import numpy as np
import pytest

import kernelkit as kk
from enzyme_ext import Active, Duplicated, Forward, Reverse, autodiff

SHAPE = (3, 5, 4, 7)


@kk.kernel
def positions(where, linear, sizes):
    i, j, k, l = kk.index(kk.Global, kk.NTuple)
    gi, gj, gk, gl = kk.index(kk.Group, kk.NTuple)
    li, lj, lk, ll = kk.index(kk.Local, kk.Cartesian)
    where[i, j, k, l, 0] = i * 1000 + j * 100 + k * 10 + l
    where[i, j, k, l, 1] = gi * 1000 + gj * 100 + gk * 10 + gl
    where[i, j, k, l, 2] = li * 1000 + lj * 100 + lk * 10 + ll
    linear[i, j, k, l, 0] = kk.index(kk.Global)
    linear[i, j, k, l, 1] = kk.index(kk.Group)
    linear[i, j, k, l, 2] = kk.index(kk.Local)
    if kk.index(kk.Global) == 0:
        for axis in range(4):
            sizes[0, axis] = kk.ndrange()[axis]
            sizes[1, axis] = kk.groupsize()[axis]
            sizes[2, axis] = kk.ngroups()[axis]


def expected_positions(shape, group):
    index = np.indices(shape)
    groups = index // np.reshape(group, (4, 1, 1, 1, 1))
    local = index % np.reshape(group, (4, 1, 1, 1, 1))
    counts = [-(-n // g) for n, g in zip(shape, group)]

    def digits(parts):
        return parts[0] * 1000 + parts[1] * 100 + parts[2] * 10 + parts[3]

    def row_major(parts, extents):
        return ((parts[0] * extents[1] + parts[1]) * extents[2] + parts[2]) * extents[3] + \
            parts[3]
    where = np.stack([digits(index), digits(groups), digits(local)], axis=-1)
    linear = np.stack([row_major(index, shape), row_major(groups, counts),
                       row_major(local, group)], axis=-1)
    return where, linear, np.array([shape, group, counts])


@pytest.mark.parametrize("workgroupsize, group", [
    ((2, 2, 3, 4), (2, 2, 3, 4)),     # partial groups along every axis
    ((1, 5, 4, 7), (1, 5, 4, 7)),     # one group per first index
    ((2, 8), (2, 8, 1, 1)),           # fewer dimensions: padded with ones
])
def test_positions_and_sizes_of_a_four_dimensional_launch(backend, workgroupsize, group):
    where = kk.zeros(backend, np.int64, SHAPE + (3,))
    linear = kk.zeros(backend, np.int64, SHAPE + (3,))
    sizes = kk.zeros(backend, np.int64, (3, 4))
    positions(backend, workgroupsize)(where, linear, sizes, ndrange=SHAPE)
    kk.synchronize(backend)
    expected_where, expected_linear, expected_sizes = expected_positions(SHAPE, group)
    np.testing.assert_array_equal(kk.to_numpy(where), expected_where)
    np.testing.assert_array_equal(kk.to_numpy(linear), expected_linear)
    np.testing.assert_array_equal(kk.to_numpy(sizes), expected_sizes)


@kk.kernel
def every_item_once(counts):
    i, j, k, l = kk.index(kk.Global, kk.NTuple)
    kk.atomic_add(counts, (i, j, k, l), 1)


def test_the_default_work_group_covers_a_four_dimensional_ndrange_once(backend):
    shape = (2, 3, 9, 70)
    counts = kk.zeros(backend, np.int32, shape)
    every_item_once(backend)(counts, ndrange=shape)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(counts), np.ones(shape, np.int32))


@kk.kernel
def group_sums(out, x: kk.Const):
    i, j, k, l = kk.index(kk.Global, kk.NTuple)
    tile = kk.localmem(np.float64, kk.groupsize())
    li, lj, lk, ll = kk.index(kk.Local, kk.NTuple)
    tile[li, lj, lk, ll] = x[i, j, k, l]
    kk.synchronize()
    total = 0.0
    for a in range(2):
        for b in range(2):
            total += tile[a, b, lk, ll]
    out[i, j, k, l] = total


def test_local_memory_and_barriers_in_a_four_dimensional_work_group(backend):
    shape = (4, 2, 3, 8)
    x = np.random.default_rng(0).uniform(-1, 1, shape)
    out = kk.zeros(backend, np.float64, shape)
    group_sums(backend, (2, 2, 3, 4))(out, kk.to_backend(backend, x), ndrange=shape)
    kk.synchronize(backend)
    sums = x.reshape(2, 2, 1, 2, 3, 8).sum(axis=(1, 3), keepdims=True)
    np.testing.assert_allclose(kk.to_numpy(out),
                               np.broadcast_to(sums, (2, 2, 1, 2, 3, 8)).reshape(shape),
                               rtol=1e-15)


@kk.kernel
def stencil(out, x: kk.Const, scale):
    i, j, k, l = kk.index(kk.Global, kk.NTuple)
    left = x[i, j, k, l - 1] if l > 0 else 0.0
    out[i, j, k, l] = scale * x[i, j, k, l] * x[i, j, k, l] + left * x[(i + 1) % 3, j, k, l]


def test_derivatives_of_a_four_dimensional_launch_match_finite_differences(backend):
    shape = (3, 2, 3, 5)
    rng = np.random.default_rng(1)
    x, seed, tangent = (rng.uniform(-1, 1, shape) for _ in range(3))

    def run(at, scale=0.75):
        out = kk.zeros(backend, np.float64, shape)
        stencil(backend, (2, 2, 2, 4))(out, kk.to_backend(backend, at), scale, ndrange=shape)
        kk.synchronize(backend)
        return kk.to_numpy(out)

    gradient = kk.zeros(backend, np.float64, shape)
    _, _, d_scale = autodiff(Reverse, stencil(backend, (2, 2, 2, 4)),
                             Duplicated(kk.zeros(backend, np.float64, shape),
                                        kk.to_backend(backend, seed.copy())),
                             Duplicated(kk.to_backend(backend, x), gradient), Active(0.75),
                             ndrange=shape)
    t_out = kk.zeros(backend, np.float64, shape)
    autodiff(Forward, stencil(backend, (2, 2, 2, 4)), Duplicated(kk.zeros(
        backend, np.float64, shape), t_out), Duplicated(kk.to_backend(backend, x),
                                                        kk.to_backend(backend, tangent)),
        0.75, ndrange=shape)
    kk.synchronize(backend)
    h = 1e-6
    numeric = np.zeros(shape)
    for index in np.ndindex(shape):
        up, down = x.copy(), x.copy()
        up[index] += h
        down[index] -= h
        numeric[index] = np.sum(seed * (run(up) - run(down))) / (2 * h)
    np.testing.assert_allclose(kk.to_numpy(gradient), numeric, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(d_scale, np.sum(seed * x * x), rtol=1e-12)
    np.testing.assert_allclose(kk.to_numpy(t_out),
                               (run(x + h * tangent) - run(x - h * tangent)) / (2 * h),
                               rtol=1e-6, atol=1e-9)


def test_an_ndrange_of_five_dimensions_is_an_error_saying_four_is_the_most(backend):
    with pytest.raises(kk.LaunchError, match="a tuple of 1 to 4 ints"):
        every_item_once(backend)(kk.zeros(backend, np.int32, (1,) * 5), ndrange=(1,) * 5)
