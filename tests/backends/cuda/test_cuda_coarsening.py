"""Coarsening on CUDA: a kernel whose work-groups share nothing (no barriers, no local
memory) runs several consecutive work-groups of its first axis in one thread block, where
a launch has groups enough to fill the GPU that way. Nothing a kernel can see changes:
every work-item runs once, with its own global, local and group indices.

The compile checks run anywhere; the launches need a GPU (on the host stand-in for the
driver they run too, but the stand-in runs each work-item from the launch record, not
from the grid, so only a GPU checks the grid arithmetic)."""
import numpy as np
import pytest

import kernelkit as kk
from backends.cuda import CUDABackend
from backends.cuda.thread import COARSENING

REASON = CUDABackend.unavailable_reason()
needs_gpu = pytest.mark.skipif(REASON is not None, reason=f"no GPU to run on: {REASON}")


@kk.kernel
def indices_1d(out):
    i = kk.index(kk.Global)
    out[i, 0] = i
    out[i, 1] = kk.index(kk.Group)
    out[i, 2] = kk.index(kk.Local)


@kk.kernel
def indices_2d(out):
    i, j = kk.index(kk.Global, kk.NTuple)
    gi, gj = kk.index(kk.Group, kk.NTuple)
    li, lj = kk.index(kk.Local, kk.NTuple)
    out[i, j, 0] = i * 1000 + j
    out[i, j, 1] = gi * 1000 + gj
    out[i, j, 2] = li * 1000 + lj


@kk.kernel
def indices_3d(out):
    i, j, k = kk.index(kk.Global, kk.NTuple)
    gi, gj, gk = kk.index(kk.Group, kk.NTuple)
    out[i, j, k, 0] = (i * 100 + j) * 100 + k
    out[i, j, k, 1] = (gi * 100 + gj) * 100 + gk


@kk.kernel
def early_return_and_private(out, x: kk.Const):
    """A return in the middle of a work-item ends that work-item only, not the other
    work-groups its thread runs; each work-item has its own private array."""
    i = kk.index(kk.Global)
    if i % 3 == 0:
        out[i] = -1.0
        return
    window = kk.private(np.float32, 4)
    window[0] = x[i]
    window[1] = x[i] * 2
    window[2] = x[i] * 3
    window[3] = x[i] * 4
    out[i] = window[0] + window[1] + window[2] + window[3]


@kk.kernel
def row_sums(out, x: kk.Const):
    i = kk.index(kk.Global)
    total = 0.0
    for j in range(x.shape[1]):
        total += x[i, j]
    out[i] = total


@kk.kernel
def long_work_item(out, x: kk.Const):
    i = kk.index(kk.Global)
    n = len(x)
    a = x[(i * 7 + 1) % n] * x[(i * 11 + 2) % n] + x[(i * 13 + 3) % n] * x[(i * 17 + 4) % n]
    b = x[(i * 19 + 5) % n] * x[(i * 23 + 6) % n] + x[(i * 29 + 7) % n] * x[(i * 31 + 8) % n]
    c = x[(i * 37 + 9) % n] * x[(i * 41 + 10) % n] + x[(i * 43 + 11) % n] * x[(i * 47 + 12) % n]
    out[i] = (a + b) * (b + c) * (c - a)


@kk.kernel
def group_sums(out, x: kk.Const):
    i = kk.index(kk.Global)
    li = kk.index(kk.Local)
    tile = kk.localmem(np.float32, 64)
    tile[li] = x[i]
    kk.synchronize()
    if li == 0:
        total = 0.0
        for p in range(64):
            total += tile[p]
        out[kk.index(kk.Group)] = total


def coarsening_of(kernel, args, ndrange, group, arch="sm_90"):
    backend = CUDABackend.compile_only(arch)
    return kernel.specialize(backend, kernel.argument_types(backend, args), group) \
        .info["coarsening"]


def test_kernels_whose_groups_share_nothing_are_coarsened_and_those_with_barriers_not():
    out = np.zeros((10, 3), np.int64)
    assert coarsening_of(indices_1d, (out,), (10,), (4,)) == COARSENING > 1
    x = np.zeros(128, np.float32)
    for arch in ("sm_80", "sm_90"):   # cubins for both: each work-item's private array
        assert coarsening_of(early_return_and_private, (x, x), (128,), (64,), arch) == \
            COARSENING
    assert coarsening_of(group_sums, (np.zeros(2, np.float32), x), (128,), (64,)) == 1


def test_work_items_with_loops_or_long_bodies_are_not_coarsened():
    """Four copies of a long work-item side by side would need more registers than a full
    block may have; a loop keeps its own loads in flight."""
    x = np.zeros(128, np.float32)
    assert coarsening_of(row_sums, (x, np.zeros((128, 8), np.float32)), (128,), (64,)) == 1
    assert coarsening_of(long_work_item, (x, x), (128,), (64,)) == 1


def test_the_block_size_is_declared_so_ptxas_keeps_to_its_registers():
    x = np.zeros(1024, np.float32)
    ptx = kk.code_native(long_work_item, CUDABackend.compile_only("sm_90"), x, x,
                         ndrange=1024, workgroupsize=1024)
    assert ".maxntid 1024, 1, 1" in ptx


def test_a_coarsened_kernel_has_a_path_with_every_group_of_its_block_unchecked():
    x = np.zeros(1024, np.float32)
    ptx = kk.code_native(early_return_and_private, CUDABackend.compile_only("sm_90"), x, x,
                         ndrange=1024, workgroupsize=256)
    assert "%nctaid.x" in ptx     # it tells a coarsened launch from one group per block
    plain = kk.code_native(group_sums, CUDABackend.compile_only("sm_90"),
                           np.zeros(16, np.float32), x, ndrange=1024, workgroupsize=64)
    assert "%nctaid" not in plain


@pytest.fixture
def coarsening_gpu():
    """A backend that coarsens every launch that can be (however few groups)."""
    backend = CUDABackend()
    backend.blocks_to_fill = 0
    return backend


def blocks_of(kernel, ndrange):
    (prepared,) = kernel._specializations.values()
    return list(prepared.geometry[ndrange][:3])   # the grid, then the record's header


@needs_gpu
@pytest.mark.parametrize("n", [1, 255, 256, 257, 1024, 1025, 1280, 1805, 4 * 256 * 13 + 100])
def test_every_work_item_runs_once_with_its_own_indices_in_one_dimension(coarsening_gpu, n):
    kernel = kk.kernel(indices_1d.function)
    out = kk.zeros(coarsening_gpu, np.int64, (n, 3))
    kernel(coarsening_gpu, 256)(out, ndrange=n)
    i = np.arange(n)
    np.testing.assert_array_equal(kk.to_numpy(out), np.stack([i, i // 256, i % 256], axis=1))
    groups = -(-n // 256)
    expected = -(-groups // COARSENING) if groups > 1 else 1
    assert blocks_of(kernel, (n,)) == [expected, 1, 1]


@needs_gpu
@pytest.mark.parametrize("ndrange", [(37, 45), (8, 64), (1, 33), (129, 7)])
def test_every_work_item_runs_once_with_its_own_indices_in_two_dimensions(coarsening_gpu,
                                                                          ndrange):
    kernel = kk.kernel(indices_2d.function)
    out = kk.zeros(coarsening_gpu, np.int64, (*ndrange, 3))
    kernel(coarsening_gpu, (2, 32))(out, ndrange=ndrange)
    i, j = np.meshgrid(np.arange(ndrange[0]), np.arange(ndrange[1]), indexing="ij")
    expected = np.stack([i * 1000 + j, (i // 2) * 1000 + j // 32, (i % 2) * 1000 + j % 32],
                        axis=2)
    np.testing.assert_array_equal(kk.to_numpy(out), expected)
    groups = -(-ndrange[0] // 2)
    first = -(-groups // COARSENING) if groups > 1 else 1
    assert blocks_of(kernel, ndrange) == [-(-ndrange[1] // 32), first, 1]


@needs_gpu
def test_every_work_item_runs_once_in_three_dimensions(coarsening_gpu):
    ndrange = (19, 5, 33)
    out = kk.zeros(coarsening_gpu, np.int64, (*ndrange, 2))
    indices_3d(coarsening_gpu, (2, 2, 16))(out, ndrange=ndrange)
    i, j, k = np.meshgrid(*(np.arange(n) for n in ndrange), indexing="ij")
    expected = np.stack([(i * 100 + j) * 100 + k, (i // 2 * 100 + j // 2) * 100 + k // 16],
                        axis=3)
    np.testing.assert_array_equal(kk.to_numpy(out), expected)


@needs_gpu
def test_a_return_ends_one_work_item_and_private_arrays_are_per_work_item(coarsening_gpu):
    n = 4 * 64 * 5 + 17
    x_host = np.random.default_rng(1).random(n, dtype=np.float32)
    out = kk.zeros(coarsening_gpu, np.float32, n)
    early_return_and_private(coarsening_gpu, 64)(out, kk.to_backend(coarsening_gpu, x_host),
                                                 ndrange=n)
    expected = np.where(np.arange(n) % 3 == 0, -1.0, x_host * 10).astype(np.float32)
    np.testing.assert_allclose(kk.to_numpy(out), expected, rtol=1e-6)


@needs_gpu
def test_kernels_with_barriers_run_one_group_per_block(coarsening_gpu):
    n = 64 * 40
    x_host = np.arange(n, dtype=np.float32)
    out = kk.zeros(coarsening_gpu, np.float32, 40)
    kernel = kk.kernel(group_sums.function)
    kernel(coarsening_gpu, 64)(out, kk.to_backend(coarsening_gpu, x_host), ndrange=n)
    np.testing.assert_allclose(kk.to_numpy(out), x_host.reshape(40, 64).sum(axis=1))
    assert blocks_of(kernel, (n,)) == [40, 1, 1]


@needs_gpu
def test_launches_too_small_to_fill_the_gpu_when_coarsened_run_one_group_per_block():
    gpu = CUDABackend()
    assert gpu.blocks_to_fill >= 8   # a few blocks per multiprocessor, by default
    gpu.blocks_to_fill = 10
    kernel = kk.kernel(indices_1d.function)
    for groups, blocks in ((36, 36), (37, 10), (41, 11)):
        n = 256 * groups - 3
        out = kk.zeros(gpu, np.int64, (n, 3))
        kernel(gpu, 256)(out, ndrange=n)
        assert blocks_of(kernel, (n,)) == [blocks, 1, 1]
        np.testing.assert_array_equal(kk.to_numpy(out)[:, 0], np.arange(n))


@kk.kernel
def print_some(x: kk.Const):
    i = kk.index(kk.Global)
    if i == 2:
        kk.print("item", i, "holds", x[i])


def test_a_coarsened_kernel_that_prints_keeps_its_buffer_in_a_fixed_stack_slot():
    """The body inlined into the loop of a partial block must not save and restore the
    stack around each work-item (PTX for that needs a newer PTX ISA than sm_80's)."""
    x = np.zeros(64, np.float32)
    assert coarsening_of(print_some, (x,), (64,), (16,)) == COARSENING
    for arch in ("sm_80", "sm_90"):
        ptx = kk.code_native(print_some, CUDABackend.compile_only(arch), x, ndrange=64,
                             workgroupsize=16)
        assert "vprintf" in ptx and "stacksave" not in ptx
