"""Launch geometry as users write it: any integer (NumPy's too) for an ndrange or a
work-group size, alone or in a tuple; a work-group size of fewer dimensions than the
ndrange is padded with ones, as in KernelAbstractions."""
import numpy as np
import pytest

import kernelkit as kk
from kernelkit.runtime.geometry import as_sizes, fit_workgroupsize


@kk.kernel
def record_geometry(sizes):
    groupsize = kk.groupsize()
    ndrange = kk.ndrange()
    sizes[0] = groupsize[0]
    sizes[1] = groupsize[1]
    sizes[2] = ndrange[0]
    sizes[3] = ndrange[1]


@kk.kernel
def iota(y):
    i = kk.index(kk.Global)
    y[i] = i


def test_numpy_integers_are_taken_as_ndrange_and_workgroupsize_alone_and_in_tuples(backend):
    y = kk.zeros(backend, np.int64, 16)
    iota(backend, np.int64(4))(y, ndrange=np.int64(12))
    iota(backend, np.uint8(4), np.int32(4))(y[12:])
    sizes = kk.zeros(backend, np.int64, 4)
    record_geometry(backend, (np.int64(4), np.int32(2)))(
        sizes, ndrange=(np.int64(8), np.uint16(6)))
    static = kk.zeros(backend, np.int64, 4)
    record_geometry(backend, (np.int8(2), 3), (np.int64(4), 9))(static)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(y), [*range(12), *range(4)])
    np.testing.assert_array_equal(kk.to_numpy(sizes), [4, 2, 8, 6])
    np.testing.assert_array_equal(kk.to_numpy(static), [2, 3, 4, 9])
    assert type(as_sizes(np.uint32(16), "workgroupsize", "k")[0]) is int


@pytest.mark.parametrize("size", [(4, 4.0), (np.float64(2.0),), (np.int64(2), np.float32(1))])
def test_a_float_in_a_tuple_of_sizes_is_refused_as_a_float_alone_is(size):
    with pytest.raises(kk.LaunchError, match="workgroupsize must be an int or a tuple"):
        as_sizes(size, "workgroupsize", "k")
    with pytest.raises(kk.LaunchError, match="ndrange must be an int or a tuple"):
        as_sizes(2.0, "ndrange", "k")


def test_a_workgroupsize_of_fewer_dimensions_than_the_ndrange_is_padded_with_ones():
    assert fit_workgroupsize((8,), (16, 16), "k") == (8, 1)
    assert fit_workgroupsize((8,), (16, 16, 16), "k") == (8, 1, 1)
    assert fit_workgroupsize((4, 2), (16, 16, 16), "k") == (4, 2, 1)
    assert fit_workgroupsize((4, 2), (16, 16), "k") == (4, 2)


def test_a_workgroupsize_of_more_dimensions_than_the_ndrange_is_a_launch_error():
    with pytest.raises(kk.LaunchError, match=r"kernel 'k': ndrange \(16,\) has 1 dimensions "
                                             r"but workgroupsize \(4, 4\) has 2"):
        fit_workgroupsize((4, 4), (16,), "k")


def test_an_integer_workgroupsize_with_a_2d_ndrange_runs_as_a_column_of_groups(backend):
    sizes = kk.zeros(backend, np.int64, 4)
    record_geometry(backend, 8)(sizes, ndrange=(16, 16))
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(sizes), [8, 1, 16, 16])
