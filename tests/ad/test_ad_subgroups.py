"""Derivatives through subgroup operations (`enzyme_ext/transform/derivatives.py`'s
subgroup rules), in both modes: sums, shuffles (several lanes reading one, sources out of
range or not members, shuffle_down/up/xor, shuffles in a loop), and max / min. Each is
checked against central differences of the kernel itself, and the two modes against
each other, on groups that end inside a subgroup and an ndrange that ends inside a group.
Where max / min have ties (or nan), the derivative goes to the lowest lane holding the
result, checked against that convention lane by lane."""
import numpy as np
import pytest

import kernelkit as kk
from enzyme_ext import Duplicated, Forward, Reverse, autodiff

N = 100
SUBGROUP = 32
# (ndrange, group): subgroups of 32, 32, 32 and 4 members; or of 32, 16, 32, 16 and 4.
GEOMETRIES = [pytest.param((N, 64), id="groups-of-64"), pytest.param((N, 48), id="groups-of-48")]


@kk.kernel
def weighted_subgroup_sums(y, x, w: kk.Const):
    i = kk.index(kk.Global)
    v = x[i]
    y[i] = w[i] * kk.subgroup_sum(v * v) + kk.sin(v)


@kk.kernel
def neighbour_products(y, x):
    i = kk.index(kk.Global)
    v = x[i]
    y[i] = v * kk.shuffle_down(v, 1) + kk.shuffle(v * v, 3)


@kk.kernel
def chosen_lanes(y, x, source: kk.Const):
    i = kk.index(kk.Global)
    v = x[i]
    y[i] = v * kk.shuffle(v * v, source[i]) + kk.shuffle_up(kk.sin(v), 2) \
        + kk.shuffle_xor(v, 5) * kk.shuffle_down(kk.cos(v), 7)


@kk.kernel
def butterfly_sums(y, x):
    i = kk.index(kk.Global)
    v = x[i]
    s = v * v
    mask = 16
    while mask > 0:
        s = s + 0.5 * kk.shuffle_xor(s, mask) * kk.cos(s)
        mask = mask // 2
    y[i] = s * v


@kk.kernel
def extremes(y, x):
    i = kk.index(kk.Global)
    v = x[i]
    # An integer's max carries no derivative, and does not stop the others.
    y[i] = kk.subgroup_max(v * v) * v + kk.subgroup_min(kk.sin(v)) \
        + v * kk.subgroup_max(i % 7)


KERNELS = [weighted_subgroup_sums, neighbour_products, chosen_lanes, butterfly_sums, extremes]


def constants_for(kernel, rng):
    """The kernel's Const arguments: weights, or sources of which many lanes read one,
    some outside 0..31 and some lanes that are not members of a short subgroup."""
    if kernel is weighted_subgroup_sums:
        return (rng.uniform(0.5, 2, N),)
    if kernel is chosen_lanes:
        return (rng.choice([-3, 0, 2, 2, 5, 9, 17, 31, 36], N).astype(np.int64),)
    return ()


def evaluate(backend, kernel, geometry, x, constants):
    ndrange, group = geometry
    y = kk.zeros(backend, np.float64, ndrange)
    kernel(backend, group)(y, kk.to_backend(backend, x),
                           *(kk.to_backend(backend, c) for c in constants), ndrange=ndrange)
    kk.synchronize(backend)
    return kk.to_numpy(y)


def central_jacobian_vector(backend, kernel, geometry, x, direction, constants, h=1e-6):
    """The kernel's Jacobian times `direction`, from central differences."""
    return (evaluate(backend, kernel, geometry, x + h * direction, constants)
            - evaluate(backend, kernel, geometry, x - h * direction, constants)) / (2 * h)


def assert_reverse_matches_central_differences(backend, kernel, geometry, x, seed,
                                               gradient, constants, rng):
    # The reverse gives g = seed J: along any direction d, g . d is seed . (J d).
    for direction in rng.uniform(-1, 1, (3, *x.shape)):
        along = central_jacobian_vector(backend, kernel, geometry, x, direction, constants)
        np.testing.assert_allclose(np.vdot(gradient, direction), np.vdot(seed, along),
                                   rtol=1e-6)


def forward(backend, kernel, geometry, x, direction, constants):
    """J @ direction, from forward mode."""
    ndrange, group = geometry
    dy = kk.zeros(backend, np.float64, ndrange)
    autodiff(Forward, kernel(backend, group),
             Duplicated(kk.zeros(backend, np.float64, ndrange), dy),
             Duplicated(kk.to_backend(backend, x), kk.to_backend(backend, direction)),
             *(kk.to_backend(backend, c) for c in constants), ndrange=ndrange)
    kk.synchronize(backend)
    return kk.to_numpy(dy)


def reverse(backend, kernel, geometry, x, seed, constants):
    """seed @ J, from reverse mode."""
    ndrange, group = geometry
    dx = kk.zeros(backend, np.float64, ndrange)
    autodiff(Reverse, kernel(backend, group),
             Duplicated(kk.zeros(backend, np.float64, ndrange),
                        kk.to_backend(backend, seed.copy())),
             Duplicated(kk.to_backend(backend, x), dx),
             *(kk.to_backend(backend, c) for c in constants), ndrange=ndrange)
    kk.synchronize(backend)
    return kk.to_numpy(dx)


@pytest.mark.parametrize("geometry", GEOMETRIES)
@pytest.mark.parametrize("kernel", KERNELS)
def test_forward_mode_through_subgroup_operations_matches_central_differences(
        backend, kernel, geometry):
    rng = np.random.default_rng(1)
    x, direction = rng.uniform(-1, 1, N), rng.uniform(-1, 1, N)
    constants = constants_for(kernel, rng)
    tangent = forward(backend, kernel, geometry, x, direction, constants)
    np.testing.assert_allclose(tangent, central_jacobian_vector(
        backend, kernel, geometry, x, direction, constants), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("geometry", GEOMETRIES)
@pytest.mark.parametrize("kernel", KERNELS)
def test_reverse_mode_through_subgroup_operations_matches_central_differences(
        backend, kernel, geometry):
    rng = np.random.default_rng(2)
    x, seed = rng.uniform(-1, 1, N), rng.uniform(-1, 1, N)
    constants = constants_for(kernel, rng)
    gradient = reverse(backend, kernel, geometry, x, seed, constants)
    assert_reverse_matches_central_differences(backend, kernel, geometry, x, seed, gradient,
                                               constants, rng)


def test_a_shuffle_that_many_lanes_read_sums_their_adjoints_into_the_lane_read(backend):
    # Lanes read 2 or 5 (or themselves, from -3 or a lane a short subgroup lacks): the
    # adjoint of x at lane 2 is the sum of its readers' seeds times their v.
    rng = np.random.default_rng(3)
    source = rng.choice([-3, 2, 5, 36], N).astype(np.int64)
    source[96:] = [2, 17, 2, 1]    # the last subgroup has lanes 0..3 only
    x, seed = rng.uniform(-1, 1, N), rng.uniform(-1, 1, N)
    gradient = reverse(backend, chosen_lanes, (N, 64), x, seed, (source,))
    assert_reverse_matches_central_differences(backend, chosen_lanes, (N, 64), x, seed,
                                               gradient, (source,), rng)


@kk.kernel
def rows_of_lanes(y, x):
    i, j = kk.index(kk.Global, kk.NTuple)
    v = x[i, j]
    y[i, j] = v * kk.shuffle_xor(v, 3) + kk.subgroup_max(v * v) + kk.shuffle(kk.sin(v), 7)


# Groups of 6 x 8 cut by the ndrange on both axes: a subgroup (a run of 32 by linear local
# index) whose lanes 5, 6, 7, 13, 14, 15 ... have no work-item, so are not members.
TWO_DIMENSIONS = ((10, 13), (6, 8))


def test_forward_mode_through_subgroup_operations_of_two_dimensional_groups(backend):
    rng = np.random.default_rng(7)
    x, direction = rng.uniform(-1, 1, (2, *TWO_DIMENSIONS[0]))
    tangent = forward(backend, rows_of_lanes, TWO_DIMENSIONS, x, direction, ())
    np.testing.assert_allclose(tangent, central_jacobian_vector(
        backend, rows_of_lanes, TWO_DIMENSIONS, x, direction, ()), rtol=1e-6, atol=1e-8)


def test_reverse_mode_through_subgroup_operations_of_two_dimensional_groups(backend):
    rng = np.random.default_rng(8)
    x, seed = rng.uniform(-1, 1, (2, *TWO_DIMENSIONS[0]))
    gradient = reverse(backend, rows_of_lanes, TWO_DIMENSIONS, x, seed, ())
    assert_reverse_matches_central_differences(backend, rows_of_lanes, TWO_DIMENSIONS, x,
                                               seed, gradient, (), rng)


def result_lanes(x, ndrange, group, reduce):
    """For each work-item, the index of the work-item its subgroup's `reduce` (np.max or
    np.min) took its derivative from: the lowest lane holding the result, or the lowest
    holding a nan."""
    chosen = np.empty(ndrange, dtype=np.int64)
    for group_start in range(0, ndrange, group):
        for start in range(group_start, min(group_start + group, ndrange), SUBGROUP):
            members = np.arange(start, min(start + SUBGROUP, group_start + group, ndrange))
            values = x[members]
            result = reduce(values)
            holds = np.isnan(values) if np.isnan(result) else values == result
            chosen[members] = members[np.argmax(holds)]
    return chosen


@kk.kernel
def max_plus_twice_min(y, x):
    i = kk.index(kk.Global)
    v = x[i]
    y[i] = kk.subgroup_max(v) + 2.0 * kk.subgroup_min(v)


def tied_values(rng, with_nan: bool):
    """Values from a few levels, so each subgroup's max and min are held by several
    lanes (and, `with_nan`, a subgroup with nans at two lanes)."""
    x = rng.choice([-1.0, 0.0, -0.0, 0.5, 2.0], N)
    if with_nan:
        x[[39, 45, 50]] = np.nan
    return x


@pytest.mark.parametrize("with_nan", [False, True], ids=["ties", "nan"])
@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_reverse_max_and_min_give_the_adjoint_to_the_lowest_lane_holding_the_result(
        backend, geometry, with_nan):
    rng = np.random.default_rng(4)
    x, seed = tied_values(rng, with_nan), rng.uniform(-1, 1, N)
    gradient = reverse(backend, max_plus_twice_min, geometry, x, seed, ())
    expected = np.zeros(N)
    np.add.at(expected, result_lanes(x, *geometry, np.max), seed)
    np.add.at(expected, result_lanes(x, *geometry, np.min), 2.0 * seed)
    np.testing.assert_allclose(gradient, expected, rtol=1e-12)


@pytest.mark.parametrize("with_nan", [False, True], ids=["ties", "nan"])
@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_forward_max_and_min_take_the_tangent_of_the_lowest_lane_holding_the_result(
        backend, geometry, with_nan):
    rng = np.random.default_rng(5)
    x, direction = tied_values(rng, with_nan), rng.uniform(-1, 1, N)
    tangent = forward(backend, max_plus_twice_min, geometry, x, direction, ())
    expected = direction[result_lanes(x, *geometry, np.max)] \
        + 2.0 * direction[result_lanes(x, *geometry, np.min)]
    np.testing.assert_allclose(tangent, expected, rtol=1e-12)


@pytest.mark.parametrize("kernel", [chosen_lanes, butterfly_sums, max_plus_twice_min])
def test_forward_and_reverse_mode_agree_through_subgroup_operations(backend, kernel):
    # seed . (J d) from forward mode is (seed J) . d from reverse mode, ties included.
    rng = np.random.default_rng(6)
    x = tied_values(rng, False) if kernel is max_plus_twice_min else rng.uniform(-1, 1, N)
    direction, seed = rng.uniform(-1, 1, N), rng.uniform(-1, 1, N)
    constants = constants_for(kernel, rng)
    gradient = reverse(backend, kernel, (N, 48), x, seed, constants)
    tangent = forward(backend, kernel, (N, 48), x, direction, constants)
    assert np.any(gradient != 0)
    np.testing.assert_allclose(gradient @ direction, seed @ tangent, rtol=1e-12)
