"""Guards on the last axis (`if 0 < j < cols - 1:`, `if i < n:`, `if i >= n: return`):
the CPU runs the piece of each row where they do not change with a version of the
kernel that knows their values (backends/cpu/item_split.py), the rest as written. The
results must be those of the kernel as written, on every backend, wherever the guards
change (in the middle of a group, at its edges, nowhere, at every work-item), whatever
the comparison (<, <=, >, >=, ==, !=, the moving side on either side, growing or
shrinking) and where the moving side wraps around within a row."""
import re

import numpy as np
import pytest

import kernelkit as kk
from launched import run
from backends.cpu.item_split import row_comparisons, row_split
from kernelkit.ir.parser import parse_module

INT64 = np.iinfo(np.int64)
EDGES = [-10, 0, 1, 3, 100, 255, 256, 257, 299, 300, 301, 2**62, -2**62,
         int(INT64.max), int(INT64.min)]


@kk.kernel
def below(out, k):
    i = kk.index(kk.Global)
    if i < k:
        out[i] = 1


@kk.kernel
def at_most(out, k):
    i = kk.index(kk.Global)
    if i <= k:
        out[i] = 1


@kk.kernel
def above(out, k):
    i = kk.index(kk.Global)
    if i > k:
        out[i] = 1


@kk.kernel
def at_least(out, k):
    i = kk.index(kk.Global)
    if i >= k:
        out[i] = 1


@kk.kernel
def equal(out, k):
    i = kk.index(kk.Global)
    if i == k:
        out[i] = 1


@kk.kernel
def unequal(out, k):
    i = kk.index(kk.Global)
    if i != k + 1:
        out[i] = 1


@kk.kernel
def shrinking(out, k):
    i = kk.index(kk.Global)
    if k - i > 3:
        out[i] = 1


@kk.kernel
def on_the_right(out, k):
    i = kk.index(kk.Global)
    if 5 > i - k:
        out[i] = 1


@kk.kernel
def negated(out, k):
    i = kk.index(kk.Global)
    if -i <= -k:
        out[i] = 1


@kk.kernel
def both_ways(out, k):
    i = kk.index(kk.Global)
    code = 0
    if i < k:
        code += 1
    if i >= k:
        code += 2
    out[i] = code


SINGLE_GUARDS = {  # kernel: where it writes 1, as NumPy computes it (k within int64 / 2)
    below: lambda i, k: i < k, at_most: lambda i, k: i <= k, above: lambda i, k: i > k,
    at_least: lambda i, k: i >= k, equal: lambda i, k: i == k,
    unequal: lambda i, k: i != k + 1, shrinking: lambda i, k: k - i > 3,
    on_the_right: lambda i, k: 5 > i - k, negated: lambda i, k: -i <= -k,
}


@pytest.mark.parametrize("k", [k for k in EDGES if abs(k) < 2**62])
@pytest.mark.parametrize("workgroupsize", [256, 7, 1])
@pytest.mark.parametrize("kernel", list(SINGLE_GUARDS), ids=lambda kernel: kernel.name)
def test_a_guard_holds_where_it_does_in_python(backend, kernel, k, workgroupsize):
    n = 300
    got = run(backend, kernel, np.zeros(n, np.int64), k, ndrange=n,
              workgroupsize=workgroupsize)
    expected = SINGLE_GUARDS[kernel](np.arange(n, dtype=np.int64), np.int64(k))
    np.testing.assert_array_equal(got, expected.astype(np.int64))


@pytest.mark.parametrize("k", EDGES)
def test_guards_of_any_value_and_their_opposites_hold_where_they_do_in_python(backend, k):
    n = 300
    got = run(backend, below, np.zeros(n, np.int64), k, ndrange=n, workgroupsize=256)
    np.testing.assert_array_equal(got, np.arange(n) < k)
    got = run(backend, both_ways, np.zeros(n, np.int64), k, ndrange=n, workgroupsize=256)
    np.testing.assert_array_equal(got, np.where(np.arange(n) < k, 1, 2))


@kk.kernel
def window(out, low, high):
    i, j = kk.index(kk.Global, kk.NTuple)
    if low <= j and j < high:
        out[i, j] += 1.0


@pytest.mark.parametrize("low, high", [(1, 299), (0, 300), (-5, 3), (256, 257), (40, 40),
                                       (300, 1000), (int(INT64.min), int(INT64.max)),
                                       (2**62, -2**62)])
@pytest.mark.parametrize("workgroupsize", [(2, 128), (16, 16), (1, 1)])
def test_a_window_of_columns_is_written_exactly(backend, low, high, workgroupsize):
    shape = (5, 300)
    j = np.arange(shape[1])
    out = np.zeros(shape, np.float32)
    got = run(backend, window, out, low, high, ndrange=shape, workgroupsize=workgroupsize)
    expected = np.broadcast_to(((low <= j) & (j < high)).astype(np.float32), shape)
    np.testing.assert_array_equal(got, expected)


@kk.kernel
def early_exit(out, n):
    i = kk.index(kk.Global)
    if i >= n:
        return
    out[i] = out[i] + i


@pytest.mark.parametrize("n", [0, 1, 100, 256, 511, 600, 2**40])
def test_an_early_return_skips_exactly_the_work_items_past_it(backend, n):
    out = np.ones(600, np.int64)
    got = run(backend, early_exit, out, n, ndrange=600, workgroupsize=256)
    i = np.arange(600)
    np.testing.assert_array_equal(got, np.where(i < n, 1 + i, 1))


@kk.kernel
def narrowed(out, offset):
    i = kk.index(kk.Global)
    if np.int32(i + offset) >= np.int32(0):
        out[i] = 1


@kk.kernel
def unsigned_shift(out, k):
    i = kk.index(kk.Global)
    if np.uint64(i) - np.uint64(3) >= np.uint64(k):
        out[i] = 1


@pytest.mark.parametrize("offset", [2**31 - 100, 2**31 - 1, -2**31, 2**32 + 5, 0])
def test_a_moving_side_that_wraps_around_within_a_row_is_compared_as_it_wraps(backend, offset):
    out = np.zeros(256, np.int64)
    got = run(backend, narrowed, out, offset, ndrange=256, workgroupsize=256)
    i = np.arange(256, dtype=np.int64)
    np.testing.assert_array_equal(got, ((i + offset).astype(np.int32) >= 0).astype(np.int64))


@pytest.mark.parametrize("k", [0, 5, 200, 2**63])
def test_an_unsigned_moving_side_that_wraps_below_zero_is_compared_as_it_wraps(backend, k):
    out = np.zeros(256, np.int64)
    got = run(backend, unsigned_shift, out, np.uint64(k), ndrange=256, workgroupsize=256)
    i = np.arange(256, dtype=np.uint64)
    np.testing.assert_array_equal(got, (i - np.uint64(3) >= np.uint64(k)).astype(np.int64))


@kk.kernel
def guarded_with_private(out, low, high):
    i = kk.index(kk.Global)
    scratch = kk.private(np.int64, 2)
    scratch[0] = i
    scratch[1] = 2 * i
    if low < i and i < high:
        scratch[0] += scratch[1]
    out[i] = scratch[0]


def test_a_private_array_is_the_same_in_the_piece_and_around_it(backend):
    out = np.zeros(300, np.int64)
    got = run(backend, guarded_with_private, out, 3, 290, ndrange=300, workgroupsize=128)
    i = np.arange(300)
    np.testing.assert_array_equal(got, np.where((3 < i) & (i < 290), 3 * i, i))


@kk.kernel
def heat_step(out, u: kk.Const, alpha):
    i, j = kk.index(kk.Global, kk.NTuple)
    rows, cols = u.shape
    if 0 < i and i < rows - 1 and 0 < j and j < cols - 1:
        out[i, j] = u[i, j] + alpha * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]
                                       - 4.0 * u[i, j])


@pytest.mark.parametrize("shape", [(67, 45), (5, 2100), (3, 3), (40, 257)])
@pytest.mark.parametrize("workgroupsize", [(16, 16), (1, 256), (4, 5)])
def test_a_guarded_stencil_matches_numpy(backend, shape, workgroupsize):
    u = np.random.default_rng(7).random(shape, dtype=np.float32)
    alpha = np.float32(0.2)
    got = run(backend, heat_step, u.copy(), kk.to_backend(backend, u), alpha, ndrange=shape,
              workgroupsize=workgroupsize)
    expected = u.copy()
    expected[1:-1, 1:-1] = u[1:-1, 1:-1] + alpha * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2]
                                                    + u[1:-1, 2:] - 4.0 * u[1:-1, 1:-1])
    np.testing.assert_array_equal(got, expected)


@kk.kernel
def reversed_in_groups(out, x: kk.Const, n):
    i = kk.index(kk.Global)
    local = kk.index(kk.Local)
    scratch = kk.localmem(np.float32, (64,))
    value = 0.0
    if i < n:
        value = x[i]
    scratch[local] = value
    kk.synchronize()
    if i < n:
        out[i] = scratch[63 - local]


@pytest.mark.parametrize("n", [1, 63, 64, 100, 256, 300])
def test_a_guard_on_either_side_of_a_barrier_holds_where_it_does_in_python(backend, n):
    x = np.arange(1, 321, dtype=np.float32)
    got = run(backend, reversed_in_groups, np.full(320, -1, np.float32),
              kk.to_backend(backend, x), n, ndrange=320, workgroupsize=64)
    padded = np.where(np.arange(320) < n, x, 0).reshape(5, 64)[:, ::-1].ravel()
    np.testing.assert_array_equal(got, np.where(np.arange(320) < n, padded, -1))


# --- what the CPU makes of them --------------------------------------------------------


def kernel_ir(kernel, *args, ndrange, workgroupsize):
    text = kk.code_ir(kernel, kk.CPU(), *args, ndrange=ndrange, workgroupsize=workgroupsize)
    return parse_module(text).kernel


def test_the_row_comparisons_are_those_of_the_last_axis():
    u = np.zeros((8, 8), np.float32)
    function = kernel_ir(heat_step, u, u, np.float32(0.2), ndrange=(8, 8),
                         workgroupsize=(2, 4))
    along = [c for c in row_comparisons(function, axis=1) if c.axis == 1]
    assert [(c.op.opcode, c.slope) for c in along] == [("gt", 1), ("lt", 1)]
    assert len(row_comparisons(function, axis=0)) == 2   # 0 < i, i < rows - 1


def test_a_comparison_of_the_position_along_another_axis_with_its_edge_joins_the_split():
    """`0 < i` is the same for a whole row of (i, j): it joins the split of the rows along
    j with no points, predicted true (its value in the middle of the ndrange); `i < rows -
    1`, rows an array's extent, does not (nothing says where it holds)."""
    u = np.zeros((8, 8), np.float32)
    function = kernel_ir(heat_step, u, u, np.float32(0.2), ndrange=(8, 8),
                         workgroupsize=(2, 4))
    split = row_split(function, axis=1)
    across = [(c.op.opcode, predicted) for c, predicted
              in zip(split.comparisons, split.predicted) if c.axis == 0]
    assert across == [("gt", True)]


@pytest.mark.parametrize("kernel, args, predicted", [
    (early_exit, (1,), (False,)), (guarded_with_private, (1, 2), (True, True)),
    (equal, (1,), (False,)), (unequal, (1,), (True,)), (shrinking, (1,), (True,))])
def test_the_predicted_values_are_those_with_which_the_kernel_does_its_work(kernel, args,
                                                                            predicted):
    function = kernel_ir(kernel, np.zeros(16, np.int64), *args, ndrange=16, workgroupsize=16)
    assert row_split(function, axis=0).predicted == predicted


@pytest.mark.parametrize("kernel, args", [
    (heat_step, (np.zeros((8, 512), np.float32), np.zeros((8, 512), np.float32),
                 np.float32(0.2))),
    (early_exit, (np.zeros(512, np.int64), 500)),
])
def test_a_guarded_row_is_vectorized_without_masks(kernel, args):
    """Without the split, the guard makes every vector store of the row a masked one."""
    ndrange = args[0].shape
    workgroupsize = (1, 256) if len(ndrange) == 2 else (256,)
    text = kk.code_llvm(kernel, kk.CPU(), *args, ndrange=ndrange, workgroupsize=workgroupsize)
    assert re.search(r"store <\d+ x (float|i64)>", text)


@kk.kernel
def guarded_after_a_barrier(out, n):
    i = kk.index(kk.Global)
    local = kk.index(kk.Local)
    scratch = kk.localmem(np.int32, (256,))
    scratch[local] = 2 * local
    kk.synchronize()
    if i < n:
        out[i] = np.float32(scratch[255 - local])


def test_a_guarded_row_after_a_barrier_is_vectorized_without_masks():
    out = np.zeros(1000, np.float32)
    text = kk.code_llvm(guarded_after_a_barrier, kk.CPU(), out, 900, ndrange=1000,
                        workgroupsize=256)
    assert re.search(r"store <\d+ x float>", text)
    got = run(kk.CPU(), guarded_after_a_barrier, out, 900, ndrange=1000, workgroupsize=256)
    i = np.arange(1000)
    np.testing.assert_array_equal(got, np.where(i < 900, 2 * (255 - i % 256), 0))
