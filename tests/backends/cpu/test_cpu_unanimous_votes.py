"""A region entered just after a `synchronize_any` (a masked loop's trip, or the user's own
vote) reads each work-item's vote. Where every vote was true, the CPU runs the region
knowing so (backends/cpu/regions.py, `unanimous_votes`): a grid-stride loop's full
trips load without masks. The results must be those of the kernel as written, on every
backend, whether the votes were all true, all false or mixed, in full and partial
groups."""
import re

import numpy as np
import pytest

import kernelkit as kk
from launched import run


@kk.kernel
def strided_sums(out, x: kk.Const, n):
    i = kk.index(kk.Global)
    acc = 0
    for p in range(i, n, kk.ndrange()[0]):
        acc += x[p]
    out[i] = acc


@pytest.mark.parametrize("n", [0, 1, 63, 64, 65, 640, 1000, 1024, 1031])
@pytest.mark.parametrize("ndrange, workgroupsize", [(64, 64), (64, 16), (60, 16), (7, 4)])
def test_a_grid_stride_sum_adds_each_work_items_share(backend, n, ndrange, workgroupsize):
    x = np.arange(1, n + 1, dtype=np.int64) * 3
    got = run(backend, strided_sums, np.full(ndrange, -1, np.int64), kk.to_backend(backend, x),
              n, ndrange=ndrange, workgroupsize=workgroupsize)
    expected = [x[i::ndrange].sum() for i in range(ndrange)]
    np.testing.assert_array_equal(got, expected)


@kk.kernel
def counted(out, trips: kk.Const):
    i = kk.index(kk.Global)
    k = 0
    acc = 0
    while k < trips[i]:
        acc += k * i + 1
        k += 1
    out[i] = acc


@pytest.mark.parametrize("trips", ["equal", "rising", "one_long", "none"])
def test_a_while_loop_runs_each_work_items_own_trips(backend, trips):
    i = np.arange(96)
    counts = {"equal": np.full(96, 5), "rising": i % 7, "one_long": np.where(i == 50, 9, 2),
              "none": np.zeros(96, np.int64)}[trips].astype(np.int64)
    got = run(backend, counted, np.zeros(96, np.int64), kk.to_backend(backend, counts),
              ndrange=96, workgroupsize=32)
    expected = [sum(k * item + 1 for k in range(c)) for item, c in zip(i, counts)]
    np.testing.assert_array_equal(got, expected)


@kk.kernel
def voted(out, x: kk.Const, threshold):
    i = kk.index(kk.Global)
    over = x[i] > threshold
    anyone = kk.synchronize_any(over)
    result = 0
    if over:
        result += 1
    if anyone:
        result += 10
    out[i] = result


@pytest.mark.parametrize("threshold", [-1, 5, 100])   # all over, some over, none over
def test_each_work_item_reads_its_own_vote_after_the_barrier(backend, threshold):
    x = np.arange(64, dtype=np.int64) % 10
    got = run(backend, voted, np.zeros(64, np.int64), kk.to_backend(backend, x), threshold,
              ndrange=64, workgroupsize=16)
    over = x > threshold
    anyone = np.repeat(over.reshape(4, 16).any(axis=1), 16)
    np.testing.assert_array_equal(got, over * 1 + anyone * 10)


def test_a_grid_stride_loops_full_trips_load_without_masks():
    """Without the region that knows every vote was true, each trip loads `x` with a
    mask (the work-items that have left take no part)."""
    x = np.zeros(4096, np.float32)
    text = kk.code_llvm(strided_sums, kk.CPU(), np.zeros(256, np.float32), x, 4096,
                        ndrange=256, workgroupsize=256)
    assert re.search(r"= load <\d+ x float>, ptr [^\n]*!invariant\.load", text)
