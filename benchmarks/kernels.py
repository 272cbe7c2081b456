"""The kernelkit kernels the benchmark suite times, and the work-group sizes it launches them with.

Each kernel is written the way a user would write it, without backend-specific tuning;
the peers it is compared with live in `peers.py`.
"""
import numpy as np

import kernelkit as kk

TILE = 16                 # tile edge of the local-memory matmul
REDUCTION_GROUP = 256     # work-group size of the sum; a power of two
REDUCTION_GROUPS = 256    # work-groups of the first sum launch; each work-item strides

SAXPY_GROUP = 256
STENCIL_GROUP = (1, 256)  # one row segment per group: contiguous loads along j
USER_STENCIL_GROUP = (16, 16)  # the square group a GPU user picks
MATMUL_GROUP = (TILE, TILE)
LAUNCH_GROUP = 1
SIN_GROUP = 256
SIN_SIZE = 1_000_000      # elements of the sin(x) * x cases on the CPU, quick or full
# The matmul edge differentiated (at most the primal's), on each backend: where the target
# of its reverse (at most 4x its primal) is stated.
MATMUL_REVERSE_EDGE = {"cpu": 512, "cuda": 1024}


@kk.kernel
def saxpy(y, a, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = a * x[i] + y[i]


@kk.kernel
def copy(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i]


@kk.kernel
def stencil5(out, u: kk.Const, alpha):
    """One explicit heat step on the interior; the ndrange is the interior, (rows-2, cols-2)."""
    i, j = kk.index(kk.Global, kk.NTuple)
    r = i + 1
    c = j + 1
    laplacian = u[r - 1, c] + u[r + 1, c] + u[r, c - 1] + u[r, c + 1] - 4.0 * u[r, c]
    out[r, c] = u[r, c] + alpha * laplacian


@kk.kernel
def stencil5_guarded(out, u: kk.Const, alpha):
    """The same step as a GPU user writes it: the ndrange is the whole array and the
    boundary is skipped by a test."""
    i, j = kk.index(kk.Global, kk.NTuple)
    rows, cols = u.shape
    if 0 < i and i < rows - 1 and 0 < j and j < cols - 1:
        laplacian = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]
        out[i, j] = u[i, j] + alpha * laplacian


@kk.kernel
def heat_step(u_next, u: kk.Const, alpha):
    """One explicit heat step over the whole array, as the examples write it: the boundary
    keeps its values, on one side of an `if`."""
    i, j = kk.index(kk.Global, kk.NTuple)
    rows, cols = kk.ndrange()
    if i == 0 or j == 0 or i == rows - 1 or j == cols - 1:
        u_next[i, j] = u[i, j]
    else:
        laplacian = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]
        u_next[i, j] = u[i, j] + alpha * laplacian


@kk.kernel
def matmul_naive(c, a: kk.Const, b: kk.Const, k):
    i, j = kk.index(kk.Global, kk.NTuple)
    acc = 0.0
    for p in range(k):
        acc += a[i, p] * b[p, j]
    c[i, j] = acc


@kk.kernel
def matmul_tiled(c, a: kk.Const, b: kk.Const, k):
    """C = A @ B through TILE x TILE tiles in local memory; sizes must be multiples of TILE."""
    i, j = kk.index(kk.Global, kk.NTuple)
    li, lj = kk.index(kk.Local, kk.NTuple)
    a_tile = kk.localmem(np.float32, (TILE, TILE))
    b_tile = kk.localmem(np.float32, (TILE, TILE))
    acc = 0.0
    for start in range(0, k, TILE):
        a_tile[li, lj] = a[i, start + lj]
        b_tile[li, lj] = b[start + li, j]
        kk.synchronize()
        for p in range(TILE):
            acc += a_tile[li, p] * b_tile[p, lj]
        kk.synchronize()
    c[i, j] = acc


def add_up_in_place(scratch, local):
    """scratch[0] = the sum of `scratch` (one element per work-item of the group), by a
    tree: each step, the first half of the work-items add the second half's elements."""
    kk.synchronize()
    active = REDUCTION_GROUP // 2
    while active > 0:
        if local < active:
            scratch[local] += scratch[local + active]
        kk.synchronize()
        active //= 2


@kk.kernel
def group_sums(partial, x: kk.Const, n):
    """Each work-item sums x[i], x[i + stride], ... (stride = the ndrange), then the group
    combines its work-items' sums in local memory; work-item 0 writes partial[group]."""
    i = kk.index(kk.Global)
    local = kk.index(kk.Local, kk.NTuple)[0]
    group = kk.index(kk.Group, kk.NTuple)[0]
    stride = kk.ndrange()[0]
    acc = 0.0
    for p in range(i, n, stride):
        acc += x[p]
    scratch = kk.localmem(np.float32, (REDUCTION_GROUP,))
    scratch[local] = acc
    add_up_in_place(scratch, local)
    if local == 0:
        partial[group] = scratch[0]


@kk.kernel
def tree_sums(partial, x: kk.Const, n):
    """The sum as a KernelAbstractions user writes it: one element per work-item, a tree
    in local memory, and work-item 0 writes its group's sum; a second launch sums those."""
    i = kk.index(kk.Global)
    local = kk.index(kk.Local)
    group = kk.index(kk.Group)
    scratch = kk.localmem(np.float32, (REDUCTION_GROUP,))
    value = 0.0
    if i < n:
        value = x[i]
    scratch[local] = value
    add_up_in_place(scratch, local)
    if local == 0:
        partial[group] = scratch[0]


@kk.kernel
def atomic_sum(total, x: kk.Const, n):
    """The same tree, then one atomic_add of the group's sum into `total[0]`."""
    i = kk.index(kk.Global)
    local = kk.index(kk.Local)
    scratch = kk.localmem(np.float32, (REDUCTION_GROUP,))
    value = 0.0
    if i < n:
        value = x[i]
    scratch[local] = value
    add_up_in_place(scratch, local)
    if local == 0:
        kk.atomic_add(total, 0, scratch[0])


@kk.kernel
def increment(a):
    i = kk.index(kk.Global)
    a[i] = a[i] + 1.0


@kk.kernel
def sin_times_x(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = kk.sin(x[i]) * x[i]
