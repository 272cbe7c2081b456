"""`kk.ngroups()` and `kk.ndrange()`: the number of work-groups and the global size along
each dimension, as tuples (KernelAbstractions' group count and `@ndrange()`), on every
backend; a last work-group that sticks out of the ndrange counts."""
import numpy as np
import pytest

import kernelkit as kk


@kk.kernel
def record_group_counts_1d(out):
    if kk.index(kk.Global) == 0:
        (groups,) = kk.ngroups()
        (size,) = kk.ndrange()
        out[0] = groups
        out[1] = size


@kk.kernel
def record_group_counts_2d(out):
    i, j = kk.index(kk.Global, kk.NTuple)
    rows, columns = kk.ngroups()
    global_rows, global_columns = kk.ndrange()
    out[i, j, 0] = rows
    out[i, j, 1] = columns
    out[i, j, 2] = global_rows * global_columns


@pytest.mark.parametrize("ndrange, workgroupsize, groups", [(64, 16, 4), (70, 16, 5),
                                                            (5, 8, 1)])
def test_ngroups_counts_the_work_groups_of_a_one_dimensional_launch(backend, ndrange,
                                                                     workgroupsize, groups):
    out = kk.zeros(backend, np.int64, 2)
    record_group_counts_1d(backend, workgroupsize)(out, ndrange=ndrange)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(out), [groups, ndrange])


def test_every_work_item_sees_the_group_counts_and_global_size_of_its_launch(backend):
    # (13, 7) in groups of (4, 2): 4 rows of groups (the last one sticks out) by 4 columns.
    out = kk.zeros(backend, np.int64, (13, 7, 3))
    record_group_counts_2d(backend, (4, 2))(out, ndrange=(13, 7))
    kk.synchronize(backend)
    expected = np.broadcast_to(np.array([4, 4, 13 * 7]), (13, 7, 3))
    np.testing.assert_array_equal(kk.to_numpy(out), expected)


def test_ngroups_keeps_the_group_shape_a_cpu_would_otherwise_choose():
    # A kernel blind to its groups runs in the CPU's own group shape; kk.ngroups() must
    # still count the groups of the shape it was launched with.
    backend = kk.CPU(threads=2)
    out = np.zeros((8, 40, 3), np.int64)
    record_group_counts_2d(backend, (1, 1))(out, ndrange=(8, 40))
    kk.synchronize(backend)
    np.testing.assert_array_equal(out[..., :2], np.broadcast_to([8, 40], (8, 40, 2)))


def test_ngroups_takes_no_arguments(backend):
    @kk.kernel
    def asks_with_an_argument(out):
        out[0] = kk.ngroups(0)[0]

    with pytest.raises(kk.CompileError, match=r"kk.ngroups\(\) takes 0 arguments"):
        asks_with_an_argument(backend, 4)(kk.zeros(backend, np.int64, 1), ndrange=4)
