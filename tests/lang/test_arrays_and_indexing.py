"""Launch geometry and array access: 1-D/2-D/3-D ndranges that are not multiples of the
work-group size, every index kind agreeing with every other, the launch forms, views
with any strides, integer and bool arrays, and a.shape / a.ndim / len(a)."""
import numpy as np
import pytest

import kernelkit as kk

# --- index kinds ---------------------------------------------------------------------


@kk.kernel
def record_indices_1d(coords, local, group, linear, local_linear, group_linear):
    (i,) = kk.index(kk.Global, kk.NTuple)
    (li,) = kk.index(kk.Local, kk.NTuple)
    (gi,) = kk.index(kk.Group, kk.NTuple)
    coords[i, 0] = i
    local[i, 0] = li
    group[i, 0] = gi
    linear[i] = kk.index(kk.Global)
    local_linear[i] = kk.index(kk.Local)
    group_linear[i] = kk.index(kk.Group)


@kk.kernel
def record_indices_2d(coords, local, group, linear, local_linear, group_linear):
    I = kk.index(kk.Global, kk.NTuple)
    L = kk.index(kk.Local, kk.NTuple)
    G = kk.index(kk.Group, kk.NTuple)
    i, j = I
    coords[i, j, 0] = I[0]
    coords[i, j, 1] = I[1]
    local[i, j, 0] = L[0]
    local[i, j, 1] = L[1]
    group[i, j, 0] = G[0]
    group[i, j, 1] = G[1]
    linear[I] = kk.index(kk.Global, kk.Linear)
    local_linear[I] = kk.index(kk.Local, kk.Linear)
    group_linear[I] = kk.index(kk.Group, kk.Linear)


@kk.kernel
def record_indices_3d(coords, local, group, linear, local_linear, group_linear):
    i, j, k = kk.index(kk.Global, kk.NTuple)
    li, lj, lk = kk.index(kk.Local, kk.NTuple)
    gi, gj, gk = kk.index(kk.Group, kk.NTuple)
    coords[i, j, k, 0] = i
    coords[i, j, k, 1] = j
    coords[i, j, k, 2] = k
    local[i, j, k, 0] = li
    local[i, j, k, 1] = lj
    local[i, j, k, 2] = lk
    group[i, j, k, 0] = gi
    group[i, j, k, 1] = gj
    group[i, j, k, 2] = gk
    linear[i, j, k] = kk.index(kk.Global)
    local_linear[i, j, k] = kk.index(kk.Local)
    group_linear[i, j, k] = kk.index(kk.Group)


INDEX_CASES = [
    pytest.param(record_indices_1d, (37,), (8,), id="1d"),
    pytest.param(record_indices_2d, (13, 7), (4, 4), id="2d"),
    pytest.param(record_indices_3d, (5, 6, 7), (2, 3, 4), id="3d"),
]


def recorded_indices(backend, kernel, ndrange, workgroupsize):
    """Launch a record_indices kernel; return (coords, local, group, linear, local_linear, group_linear)."""
    dims = len(ndrange)
    arrays = [kk.zeros(backend, np.int64, ndrange + (dims,)) for _ in range(3)]
    arrays += [kk.zeros(backend, np.int64, ndrange) for _ in range(3)]
    kernel(backend, workgroupsize)(*arrays, ndrange=ndrange)
    kk.synchronize(backend)
    return [kk.to_numpy(a) for a in arrays]


def positions(ndrange):
    return np.stack(np.indices(ndrange), axis=-1)


@pytest.mark.parametrize("kernel, ndrange, workgroupsize", INDEX_CASES)
def test_global_tuple_index_is_the_position_of_the_work_item(backend, kernel, ndrange, workgroupsize):
    coords, *_ = recorded_indices(backend, kernel, ndrange, workgroupsize)
    np.testing.assert_array_equal(coords, positions(ndrange))


@pytest.mark.parametrize("kernel, ndrange, workgroupsize", INDEX_CASES)
def test_global_index_is_group_times_groupsize_plus_local_in_every_dimension(backend, kernel, ndrange, workgroupsize):
    _, local, group, *_ = recorded_indices(backend, kernel, ndrange, workgroupsize)
    assert (local >= 0).all() and (local < np.array(workgroupsize)).all()
    np.testing.assert_array_equal(group * np.array(workgroupsize) + local, positions(ndrange))


@pytest.mark.parametrize("kernel, ndrange, workgroupsize", INDEX_CASES)
def test_linear_global_index_is_the_c_order_flattening(backend, kernel, ndrange, workgroupsize):
    *_, linear, _, _ = recorded_indices(backend, kernel, ndrange, workgroupsize)
    np.testing.assert_array_equal(linear, np.arange(np.prod(ndrange)).reshape(ndrange))


@pytest.mark.parametrize("kernel, ndrange, workgroupsize", INDEX_CASES)
def test_linear_local_and_group_indices_are_c_order_flattenings(backend, kernel, ndrange, workgroupsize):
    _, local, group, _, local_linear, group_linear = recorded_indices(backend, kernel, ndrange, workgroupsize)
    dims = len(ndrange)
    groups_per_dim = tuple(-(-n // w) for n, w in zip(ndrange, workgroupsize))
    np.testing.assert_array_equal(
        local_linear, np.ravel_multi_index(tuple(local[..., d] for d in range(dims)), workgroupsize)
    )
    np.testing.assert_array_equal(
        group_linear, np.ravel_multi_index(tuple(group[..., d] for d in range(dims)), groups_per_dim)
    )


@kk.kernel
def cartesian_and_ntuple(from_cartesian, from_ntuple):
    ci, cj = kk.index(kk.Global, kk.Cartesian)
    ni, nj = kk.index(kk.Global, kk.NTuple)
    li, lj = kk.index(kk.Local, kk.Cartesian)
    from_cartesian[ni, nj, 0] = ci
    from_cartesian[ni, nj, 1] = cj
    from_cartesian[ni, nj, 2] = li
    from_ntuple[ni, nj, 0] = ni
    from_ntuple[ni, nj, 1] = nj
    from_ntuple[ni, nj, 2] = kk.index(kk.Local, kk.NTuple)[0]


def test_cartesian_index_equals_ntuple_index(backend):
    ndrange = (9, 5)
    from_cartesian = kk.zeros(backend, np.int64, ndrange + (3,))
    from_ntuple = kk.zeros(backend, np.int64, ndrange + (3,))
    cartesian_and_ntuple(backend, (4, 2))(from_cartesian, from_ntuple, ndrange=ndrange)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(from_cartesian), kk.to_numpy(from_ntuple))
    np.testing.assert_array_equal(kk.to_numpy(from_cartesian)[..., :2], positions(ndrange))


@kk.kernel
def record_geometry_2d(sizes):
    groupsize = kk.groupsize()
    ndrange = kk.ndrange()
    sizes[0] = groupsize[0]
    sizes[1] = groupsize[1]
    sizes[2] = ndrange[0]
    sizes[3] = ndrange[1]


@kk.kernel
def record_geometry_3d(sizes):
    gi, gj, gk = kk.groupsize()
    ni, nj, nk = kk.ndrange()
    sizes[0] = gi
    sizes[1] = gj
    sizes[2] = gk
    sizes[3] = ni
    sizes[4] = nj
    sizes[5] = nk


def test_groupsize_and_ndrange_return_the_launch_geometry_as_tuples(backend):
    sizes = kk.zeros(backend, np.int64, 4)
    record_geometry_2d(backend, (4, 2))(sizes, ndrange=(13, 7))
    sizes_3d = kk.zeros(backend, np.int64, 6)
    record_geometry_3d(backend, (2, 3, 4))(sizes_3d, ndrange=(5, 6, 7))
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(sizes), [4, 2, 13, 7])
    np.testing.assert_array_equal(kk.to_numpy(sizes_3d), [2, 3, 4, 5, 6, 7])


# --- masking of the last work-group --------------------------------------------------


@kk.kernel
def count_visits_1d(visits):
    i = kk.index(kk.Global)
    visits[i] += 1


@kk.kernel
def count_visits_2d(visits):
    I = kk.index(kk.Global, kk.NTuple)
    visits[I] += 1


@kk.kernel
def count_visits_3d(visits):
    i, j, k = kk.index(kk.Global, kk.NTuple)
    visits[i, j, k] += 1


MASKING_CASES = [
    pytest.param(count_visits_1d, 37, 8, (40,), id="1d"),
    pytest.param(count_visits_1d, 5, 64, (70,), id="1d-group-larger-than-ndrange"),
    pytest.param(count_visits_2d, (13, 7), (4, 4), (16, 8), id="2d"),
    pytest.param(count_visits_3d, (5, 6, 7), (2, 4, 4), (6, 8, 8), id="3d"),
]


@pytest.mark.parametrize("kernel, ndrange, workgroupsize, padded_shape", MASKING_CASES)
def test_every_work_item_in_the_ndrange_runs_once_and_none_outside_it(backend, kernel, ndrange, workgroupsize,
                                                                     padded_shape):
    visits = kk.zeros(backend, np.int32, padded_shape)
    kernel(backend, workgroupsize)(visits, ndrange=ndrange)
    kk.synchronize(backend)
    expected = np.zeros(padded_shape, np.int32)
    expected[tuple(slice(0, n) for n in np.atleast_1d(ndrange))] = 1
    np.testing.assert_array_equal(kk.to_numpy(visits), expected)


# --- launch forms --------------------------------------------------------------------

LAUNCH_N = 29

LAUNCH_FORMS = [
    pytest.param(lambda k, b, y: k(b)(y, ndrange=LAUNCH_N), id="dynamic-default-workgroupsize"),
    pytest.param(lambda k, b, y: k(b)(y, ndrange=LAUNCH_N, workgroupsize=7), id="dynamic-workgroupsize-at-call"),
    pytest.param(lambda k, b, y: k(b, 7)(y, ndrange=LAUNCH_N), id="static-workgroupsize"),
    pytest.param(lambda k, b, y: k(b, 7, LAUNCH_N)(y), id="static-workgroupsize-and-ndrange"),
    pytest.param(lambda k, b, y: k(b, (7,), (LAUNCH_N,))(y), id="static-one-tuples"),
    pytest.param(lambda k, b, y: k(b, 7, LAUNCH_N)(y, ndrange=LAUNCH_N, workgroupsize=7), id="static-repeated-at-call"),
]


@pytest.mark.parametrize("launch", LAUNCH_FORMS)
def test_every_launch_form_runs_each_work_item_once(backend, launch):
    y = kk.zeros(backend, np.int64, LAUNCH_N)
    launch(count_visits_1d, backend, y)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(y), np.ones(LAUNCH_N))


def test_one_launcher_runs_again_with_a_different_ndrange(backend):
    y = kk.zeros(backend, np.int64, 30)
    launcher = count_visits_1d(backend, 8)
    launcher(y, ndrange=10)
    launcher(y, ndrange=20)
    kk.synchronize(backend)
    expected = np.zeros(30)
    expected[:20] = 1
    expected[:10] = 2
    np.testing.assert_array_equal(kk.to_numpy(y), expected)


@kk.kernel
def add_one(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i] + 1


@kk.kernel
def double(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = 2 * x[i]


def test_launches_on_one_backend_run_in_order_without_synchronizing_between(backend):
    n = 1000
    x = kk.to_backend(backend, np.arange(n, dtype=np.float64))
    y = kk.zeros(backend, np.float64, n)
    z = kk.zeros(backend, np.float64, n)
    add_one(backend, 64)(y, x, ndrange=n)
    double(backend, 64)(z, y, ndrange=n)
    add_one(backend, 64)(y, z, ndrange=n)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(z), 2 * (np.arange(n) + 1))
    np.testing.assert_array_equal(kk.to_numpy(y), 2 * (np.arange(n) + 1) + 1)


# --- multi-dimensional arrays and tuple indices --------------------------------------


@kk.kernel
def scale_1d(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = 3 * x[i]


@kk.kernel
def scale_2d(y, x: kk.Const):
    i, j = kk.index(kk.Global, kk.NTuple)
    y[i, j] = 3 * x[i, j]


@kk.kernel
def scale_3d(y, x: kk.Const):
    i, j, k = kk.index(kk.Global, kk.NTuple)
    y[i, j, k] = 3 * x[i, j, k]


@kk.kernel
def scale_by_tuple_index(y, x: kk.Const):
    I = kk.index(kk.Global, kk.NTuple)
    y[I] = 3 * x[I]


@kk.kernel
def transpose_by_built_tuple(y, x: kk.Const):
    i, j = kk.index(kk.Global, kk.NTuple)
    J = (j, i)
    y[J] = x[(i, j)]


def test_two_and_three_dimensional_arrays_indexed_with_separate_indices(backend):
    host_2d = np.random.default_rng(0).normal(size=(13, 7))
    host_3d = np.random.default_rng(1).normal(size=(5, 6, 7))
    y_2d = kk.zeros(backend, np.float64, host_2d.shape)
    y_3d = kk.zeros(backend, np.float64, host_3d.shape)
    scale_2d(backend, (4, 4))(y_2d, kk.to_backend(backend, host_2d), ndrange=host_2d.shape)
    scale_3d(backend, (2, 2, 4))(y_3d, kk.to_backend(backend, host_3d), ndrange=host_3d.shape)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(y_2d), 3 * host_2d)
    np.testing.assert_array_equal(kk.to_numpy(y_3d), 3 * host_3d)


@pytest.mark.parametrize("shape, workgroupsize", [((11,), (4,)), ((13, 7), (4, 4)), ((5, 6, 7), (2, 3, 4))],
                         ids=["1d", "2d", "3d"])
def test_array_indexed_by_the_tuple_index_of_any_dimension(backend, shape, workgroupsize):
    host = np.random.default_rng(2).normal(size=shape)
    y = kk.zeros(backend, np.float64, shape)
    scale_by_tuple_index(backend, workgroupsize)(y, kk.to_backend(backend, host), ndrange=shape)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(y), 3 * host)


def test_array_indexed_by_a_tuple_built_in_the_kernel(backend):
    host = np.random.default_rng(3).normal(size=(9, 5))
    y = kk.zeros(backend, np.float64, (5, 9))
    transpose_by_built_tuple(backend, (4, 4))(y, kk.to_backend(backend, host), ndrange=host.shape)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(y), host.T)


# --- views with any strides ----------------------------------------------------------

VIEWS_1D = [
    pytest.param(lambda a: a[::2], id="every-second"),
    pytest.param(lambda a: a[3:30:3], id="offset-and-stride"),
    pytest.param(lambda a: a[::-1], id="reversed"),
]


@pytest.mark.parametrize("view", VIEWS_1D)
def test_strided_one_dimensional_input_view(backend, view):
    host = np.arange(41, dtype=np.float64) * 1.5
    x = view(kk.to_backend(backend, host))
    expected = 3 * view(host)
    y = kk.zeros(backend, np.float64, len(expected))
    scale_1d(backend, 8)(y, x, ndrange=len(expected))
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(y), expected)


def test_strided_output_view_writes_only_its_own_elements(backend):
    host = np.arange(21, dtype=np.float32)
    out_base = kk.zeros(backend, np.float32, 42)
    scale_1d(backend, 8)(out_base[1::2], kk.to_backend(backend, host), ndrange=21)
    kk.synchronize(backend)
    expected = np.zeros(42, np.float32)
    expected[1::2] = 3 * host
    np.testing.assert_array_equal(kk.to_numpy(out_base), expected)


VIEWS_2D = [
    pytest.param(lambda a: a.T, id="transposed"),
    pytest.param(lambda a: a[:, 1:], id="columns-from-one"),
    pytest.param(lambda a: a[1:4, ::2], id="rows-and-every-second-column"),
    pytest.param(lambda a: a[::-1, :], id="rows-reversed"),
]


@pytest.mark.parametrize("view", VIEWS_2D)
def test_strided_two_dimensional_input_view(backend, view):
    host = np.arange(5 * 9, dtype=np.float64).reshape(5, 9)
    x = view(kk.to_backend(backend, host))
    expected = 3 * view(host)
    y = kk.zeros(backend, np.float64, expected.shape)
    scale_2d(backend, (4, 4))(y, x, ndrange=expected.shape)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(y), expected)


def test_transposed_output_view(backend):
    host = np.arange(5 * 9, dtype=np.float64).reshape(5, 9)
    out_base = kk.zeros(backend, np.float64, (9, 5))
    scale_2d(backend, (4, 4))(out_base.T, kk.to_backend(backend, host), ndrange=(5, 9))
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(out_base), 3 * host.T)


def test_strided_three_dimensional_input_view(backend):
    host = np.arange(4 * 6 * 5, dtype=np.float64).reshape(4, 6, 5)
    x = kk.to_backend(backend, host)[:, ::2, 1:]
    expected = 3 * host[:, ::2, 1:]
    y = kk.zeros(backend, np.float64, expected.shape)
    scale_3d(backend, (2, 2, 2))(y, x, ndrange=expected.shape)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(y), expected)


# --- integer and bool arrays ---------------------------------------------------------

INTEGER_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


@kk.kernel
def copy_2d(y, x: kk.Const):
    I = kk.index(kk.Global, kk.NTuple)
    y[I] = x[I]


@pytest.mark.parametrize("dtype", INTEGER_DTYPES + [np.bool_], ids=lambda d: np.dtype(d).name)
def test_integer_and_bool_arrays_copy_exactly_in_two_dimensions(backend, dtype):
    rng = np.random.default_rng(4)
    if dtype is np.bool_:
        host = rng.random((9, 11)) < 0.5
    else:
        info = np.iinfo(dtype)
        host = rng.integers(info.min, info.max, (9, 11), dtype=dtype, endpoint=True)
    y = kk.zeros(backend, dtype, host.shape)
    copy_2d(backend, (4, 4))(y, kk.to_backend(backend, host), ndrange=host.shape)
    kk.synchronize(backend)
    result = kk.to_numpy(y)
    assert result.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(result, host)


@kk.kernel
def store_index_mod_100(out):
    i = kk.index(kk.Global)
    out[i] = i % 100


@pytest.mark.parametrize("dtype", INTEGER_DTYPES, ids=lambda d: np.dtype(d).name)
def test_index_values_stored_into_arrays_of_every_integer_dtype(backend, dtype):
    n = 250
    out = kk.zeros(backend, dtype, n)
    store_index_mod_100(backend, 32)(out, ndrange=n)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(out), (np.arange(n) % 100).astype(dtype))


@kk.kernel
def gather(y, x: kk.Const, positions: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[positions[i]]


@pytest.mark.parametrize("dtype", INTEGER_DTYPES, ids=lambda d: np.dtype(d).name)
def test_elements_of_any_integer_dtype_index_arrays(backend, dtype):
    x = np.arange(100, dtype=np.float32) * 0.5
    positions = np.random.default_rng(5).integers(0, 100, 37).astype(dtype)
    y = kk.zeros(backend, np.float32, len(positions))
    gather(backend, 16)(y, kk.to_backend(backend, x), kk.to_backend(backend, positions), ndrange=len(positions))
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(y), x[positions])


@kk.kernel
def pick_shifted(y, x: kk.Const, offset):
    i = kk.index(kk.Global)
    y[i] = x[offset + i]


@pytest.mark.parametrize("offset", [3, np.int32(3), np.uint8(3), np.int64(3)], ids=["int", "int32", "uint8", "int64"])
def test_scalar_integer_arguments_of_any_kind_index_arrays(backend, offset):
    x = np.arange(20, dtype=np.int64) * 7
    y = kk.zeros(backend, np.int64, 10)
    pick_shifted(backend, 4)(y, kk.to_backend(backend, x), offset, ndrange=10)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(y), x[3:13])


@kk.kernel
def flag_positive_then_count(flags, counts, x: kk.Const):
    i = kk.index(kk.Global)
    flags[i] = x[i] > 0
    if flags[i]:
        counts[i] = 10
    else:
        counts[i] = 20


def test_bool_array_written_by_a_comparison_and_read_as_a_condition(backend):
    x = np.array([-1, 2, 0, 5, -7, 3, 3], np.int32)
    flags = kk.zeros(backend, np.bool_, len(x))
    counts = kk.zeros(backend, np.int32, len(x))
    flag_positive_then_count(backend, 4)(flags, counts, kk.to_backend(backend, x), ndrange=len(x))
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(flags), x > 0)
    np.testing.assert_array_equal(kk.to_numpy(counts), np.where(x > 0, 10, 20))


# --- shape, ndim, len ----------------------------------------------------------------


@kk.kernel
def describe_3d(out, a: kk.Const):
    p, q, r = a.shape
    out[0] = a.ndim
    out[1] = len(a)
    out[2] = a.shape[0]
    out[3] = a.shape[1]
    out[4] = a.shape[2]
    out[5] = p * q * r


@kk.kernel
def describe_1d(out, a: kk.Const):
    out[0] = a.ndim
    out[1] = len(a)
    out[2] = a.shape[0]


@pytest.mark.parametrize("view", [lambda a: a, lambda a: a[:, ::2, 1:], lambda a: a[1:, :, ::-1]],
                         ids=["contiguous", "strided", "reversed-last-axis"])
def test_shape_ndim_and_len_of_a_three_dimensional_array(backend, view):
    base = kk.zeros(backend, np.float32, (4, 6, 5))
    a = view(base)
    expected_shape = view(np.zeros((4, 6, 5))).shape
    out = kk.zeros(backend, np.int64, 6)
    describe_3d(backend, 1)(out, a, ndrange=1)
    kk.synchronize(backend)
    p, q, r = expected_shape
    np.testing.assert_array_equal(kk.to_numpy(out), [3, p, p, q, r, p * q * r])


def test_shape_ndim_and_len_of_a_one_dimensional_view(backend):
    a = kk.zeros(backend, np.int8, 41)[::3]
    out = kk.zeros(backend, np.int64, 3)
    describe_1d(backend, 1)(out, a, ndrange=1)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(out), [1, 14, 14])


@kk.kernel
def column_sums(out, x: kk.Const):
    j = kk.index(kk.Global)
    rows, cols = x.shape
    acc = 0.0
    for i in range(rows):
        acc += x[i, j]
    out[j] = acc


def test_loop_bounds_from_the_shape_of_a_transposed_view(backend):
    host = np.arange(6 * 4, dtype=np.float64).reshape(6, 4)
    x = kk.to_backend(backend, host).T
    out = kk.zeros(backend, np.float64, 6)
    column_sums(backend, 4)(out, x, ndrange=6)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(out), host.T.sum(axis=0))


# --- negative indices ----------------------------------------------------------------


@kk.kernel
def previous_element(out, a: kk.Const):
    i = kk.index(kk.Global)
    out[i] = a[i - 1]


def test_a_negative_index_computed_at_run_time_counts_from_the_end(backend):
    a = np.arange(10, 20, dtype=np.int32)
    out = kk.zeros(backend, np.int32, 10)
    previous_element(backend, 4)(out, kk.to_backend(backend, a), ndrange=10)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(out), np.roll(a, 1))  # out[0] is a[-1]


@kk.kernel
def shifted_2d(out, x: kk.Const):
    i, j = kk.index(kk.Global, kk.NTuple)
    out[i - 2, j] = x[i, j - 3]


def test_negative_indices_count_from_the_end_of_each_axis_for_loads_and_stores(backend):
    x = np.arange(5 * 7, dtype=np.float64).reshape(5, 7)
    out = kk.zeros(backend, np.float64, (5, 7))
    shifted_2d(backend, (2, 4))(out, kk.to_backend(backend, x), ndrange=(5, 7))
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(out), np.roll(np.roll(x, 3, axis=1), -2, axis=0))


@kk.kernel
def sum_backwards_from_the_end(out, a: kk.Const, weights: kk.Const):
    i = kk.index(kk.Global)
    total = 0
    for k in range(-1, -len(a) - 1, -1):
        total = total * 10 + a[k] * weights[i]
    out[i] = total


def test_a_loop_counting_down_through_negative_indices_reads_from_the_end(backend):
    a = np.array([1, 2, 3, 4], np.int64)
    weights = np.array([1, 2], np.int64)
    out = kk.zeros(backend, np.int64, 2)
    sum_backwards_from_the_end(backend, 2)(out, kk.to_backend(backend, a),
                                           kk.to_backend(backend, weights), ndrange=2)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(out), [4321, 8642])


@kk.kernel
def neighbours_in_local_and_private_memory(out, a: kk.Const):
    i = kk.index(kk.Global)
    li = kk.index(kk.Local)
    shared = kk.localmem(np.int64, 4)
    shared[li] = a[i]
    kk.synchronize()
    mine = kk.private(np.int64, 3)
    for k in range(3):
        mine[k] = (k + 1) * 1000
    out[i] = shared[li - 1] + mine[li % 3 - 3]


def test_negative_indices_count_from_the_end_in_local_and_private_memory(backend):
    a = np.arange(8, dtype=np.int64)
    out = kk.zeros(backend, np.int64, 8)
    neighbours_in_local_and_private_memory(backend, 4)(out, kk.to_backend(backend, a), ndrange=8)
    kk.synchronize(backend)
    groups = a.reshape(2, 4)
    expected = np.roll(groups, 1, axis=1).ravel() + np.tile([1000, 2000, 3000, 1000], 2)
    np.testing.assert_array_equal(kk.to_numpy(out), expected)


@kk.kernel
def count_into_the_last_bins(bins):
    i = kk.index(kk.Global)
    kk.atomic_add(bins, i % 2 - 2, 1)


def test_atomics_at_negative_indices_update_elements_from_the_end(backend):
    bins = kk.zeros(backend, np.int32, 5)
    count_into_the_last_bins(backend, 4)(bins, ndrange=12)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(bins), [0, 0, 0, 6, 6])


def test_a_debug_backend_accepts_negative_indices_down_to_minus_the_extent(debug_backend):
    a = np.arange(10, 20, dtype=np.int32)
    out = kk.zeros(debug_backend, np.int32, 10)
    previous_element(debug_backend, 4)(out, kk.to_backend(debug_backend, a), ndrange=10)
    kk.synchronize(debug_backend)
    np.testing.assert_array_equal(kk.to_numpy(out), np.roll(a, 1))


@kk.kernel
def read_before_the_start(out, a: kk.Const, offset):
    i = kk.index(kk.Global)
    out[i] = a[i - offset]


def test_a_debug_backend_reports_an_index_below_minus_the_extent_as_written(debug_backend):
    a = kk.to_backend(debug_backend, np.arange(8, dtype=np.int32))
    out = kk.zeros(debug_backend, np.int32, 8)
    with pytest.raises(IndexError) as info:
        read_before_the_start(debug_backend, 4)(out, a, 9, ndrange=8)
        kk.synchronize(debug_backend)
    message = str(info.value)
    assert "read_before_the_start" in message and "(8,)" in message
    assert "index -9 " in message  # as written, not after adding the extent


@kk.kernel
def read_at_unsigned_index(out, a: kk.Const, position):
    i = kk.index(kk.Global)
    out[i] = a[position - np.uint8(1)]


def test_an_unsigned_index_never_counts_from_the_end(debug_backend):
    a = kk.to_backend(debug_backend, np.arange(8, dtype=np.int32))
    out = kk.zeros(debug_backend, np.int32, 1)
    read_at_unsigned_index(debug_backend, 1)(out, a, np.uint8(3), ndrange=1)
    kk.synchronize(debug_backend)
    np.testing.assert_array_equal(kk.to_numpy(out), [2])
    with pytest.raises(IndexError) as info:
        # uint8 0 - 1 is 255: past the end, not the last element.
        read_at_unsigned_index(debug_backend, 1)(out, a, np.uint8(0), ndrange=1)
        kk.synchronize(debug_backend)
    assert "index 255 " in str(info.value)


@kk.kernel
def indices_of_every_kind(out, a: kk.Const, n):
    i = kk.index(kk.Global)
    li = kk.index(kk.Local)
    total = a[i] + a[i + 1] + a[li * 2] + a[i // 2] + a[i % 4] + a[len(a) - 1]
    for k in range(len(a)):
        total += a[k]
    for k in range(n, -1, -1):
        total += a[k]
    r = i + 1
    out[i] = total + a[i - 1] + a[n] + a[r - 1] + a[r - 2]


def test_only_indices_that_may_be_negative_are_wrapped():
    from kernelkit.analysis.bounds import NonNegative
    from kernelkit.frontend.specialize import translate_kernel
    from kernelkit.ir import types as T

    array = T.ArrayType(T.int64, 1, "C")
    kernel = translate_kernel(indices_of_every_kind.function,
                              (array, T.ArrayType(T.int64, 1, "C", const=True), T.weak_int), (4,))
    function = kernel.kernel
    non_negative = NonNegative(function)
    loads = [op for block in function.blocks for op in block.ops if op.opcode == "load"]
    # a[i], a[i + 1], a[li * 2], a[i // 2], a[i % 4], a[k] counting up: never negative;
    # a[len(a) - 1], a[k] counting down, a[i - 1], a[n], a[i + 1 - 2]: may be; a[i + 1 - 1]
    # is never negative.
    assert [non_negative(op.operands[1]) for op in loads] == \
        [True, True, True, True, True, False, True, False, False, False, True, False]
