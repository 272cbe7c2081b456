"""Work-group local memory, barriers (kk.synchronize() inside a kernel) and per-work-item
private arrays: tiled matmul, tree reductions and scans with barriers inside loops,
per-work-item values that live across barriers, and the isolation of work-groups."""
import numpy as np
import pytest

import kernelkit as kk

TILE = 16
GROUP = 64


def round_up(n, multiple):
    return -(-n // multiple) * multiple


# --- tiled matmul --------------------------------------------------------------------


@kk.kernel
def tiled_matmul(c, a: kk.Const, b: kk.Const):
    i, j = kk.index(kk.Global, kk.NTuple)
    li, lj = kk.index(kk.Local, kk.NTuple)
    tile_a = kk.localmem(np.float32, (TILE, TILE))
    tile_b = kk.localmem(np.float32, (TILE, TILE))
    n_rows, n_inner = a.shape
    n_cols = b.shape[1]
    acc = np.float32(0)
    for t in range(0, n_inner, TILE):
        if i < n_rows and t + lj < n_inner:
            tile_a[li, lj] = a[i, t + lj]
        else:
            tile_a[li, lj] = 0
        if t + li < n_inner and j < n_cols:
            tile_b[li, lj] = b[t + li, j]
        else:
            tile_b[li, lj] = 0
        kk.synchronize()
        for k in range(TILE):
            acc += tile_a[li, k] * tile_b[k, lj]
        kk.synchronize()
    if i < n_rows and j < n_cols:
        c[i, j] = acc


@pytest.mark.parametrize("m, k, n", [(37, 45, 29), (16, 16, 16), (5, 70, 3)])
def test_tiled_matmul_with_local_memory_matches_numpy(backend, m, k, n):
    rng = np.random.default_rng(0)
    # Small integers: every partial sum is exact in float32, so any summation order agrees.
    a = rng.integers(-4, 5, (m, k)).astype(np.float32)
    b = rng.integers(-4, 5, (k, n)).astype(np.float32)
    c = kk.zeros(backend, np.float32, (m, n))
    ndrange = (round_up(m, TILE), round_up(n, TILE))
    tiled_matmul(backend, (TILE, TILE))(c, kk.to_backend(backend, a), kk.to_backend(backend, b), ndrange=ndrange)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(c), a @ b)


def test_tiled_matmul_of_random_floats_matches_numpy(backend):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((40, 33)).astype(np.float32)
    b = rng.standard_normal((33, 20)).astype(np.float32)
    c = kk.zeros(backend, np.float32, (40, 20))
    tiled_matmul(backend, (TILE, TILE))(c, kk.to_backend(backend, a), kk.to_backend(backend, b), ndrange=(48, 32))
    kk.synchronize(backend)
    np.testing.assert_allclose(kk.to_numpy(c), a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)


# --- reductions and scans with barriers in loops -------------------------------------


@kk.kernel
def group_sums(out, x: kk.Const):
    i = kk.index(kk.Global)
    li = kk.index(kk.Local)
    g = kk.index(kk.Group)
    partial = kk.localmem(np.int64, GROUP)
    partial[li] = x[i]
    kk.synchronize()
    stride = GROUP // 2
    while stride > 0:
        if li < stride:
            partial[li] += partial[li + stride]
        kk.synchronize()
        stride //= 2
    if li == 0:
        out[g] = partial[0]


def test_tree_reduction_with_a_barrier_inside_a_while_loop(backend):
    groups = 20
    x = np.random.default_rng(2).integers(-1000, 1000, groups * GROUP).astype(np.int64)
    out = kk.zeros(backend, np.int64, groups)
    group_sums(backend, GROUP)(out, kk.to_backend(backend, x), ndrange=len(x))
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(out), x.reshape(groups, GROUP).sum(axis=1))


@kk.kernel
def group_float_sums_by_levels(out, x: kk.Const):
    i = kk.index(kk.Global)
    li = kk.index(kk.Local)
    g = kk.index(kk.Group)
    partial = kk.localmem(np.float32, GROUP)
    partial[li] = x[i]
    kk.synchronize()
    for level in range(6):
        stride = GROUP >> (level + 1)
        if li < stride:
            partial[li] += partial[li + stride]
        kk.synchronize()
    if li == 0:
        out[g] = partial[0]


def test_tree_reduction_with_a_barrier_inside_a_for_loop(backend):
    groups = 12
    x = np.random.default_rng(3).integers(-50, 50, groups * GROUP).astype(np.float32)
    out = kk.zeros(backend, np.float32, groups)
    group_float_sums_by_levels(backend, GROUP)(out, kk.to_backend(backend, x), ndrange=len(x))
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(out), x.reshape(groups, GROUP).sum(axis=1))


@kk.kernel
def group_inclusive_scan(y, x: kk.Const):
    i = kk.index(kk.Global)
    li = kk.index(kk.Local)
    buffer = kk.localmem(np.int64, GROUP)
    buffer[li] = x[i]
    kk.synchronize()
    offset = 1
    while offset < GROUP:
        v = buffer[li]
        if li >= offset:
            v += buffer[li - offset]
        kk.synchronize()
        buffer[li] = v
        kk.synchronize()
        offset *= 2
    y[i] = buffer[li]


def test_scan_keeps_each_work_items_value_across_the_barriers_of_a_loop(backend):
    groups = 9
    x = np.random.default_rng(4).integers(-100, 100, groups * GROUP).astype(np.int64)
    y = kk.zeros(backend, np.int64, len(x))
    group_inclusive_scan(backend, GROUP)(y, kk.to_backend(backend, x), ndrange=len(x))
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(y), np.cumsum(x.reshape(groups, GROUP), axis=1).ravel())


# --- values that live across barriers ------------------------------------------------


@kk.kernel
def own_value_plus_neighbour(y, x: kk.Const):
    i = kk.index(kk.Global)
    li = kk.index(kk.Local)
    mine = x[i] * 10 + i
    buffer = kk.localmem(np.int64, GROUP)
    buffer[li] = x[i]
    kk.synchronize()
    y[i] = mine + buffer[(li + 1) % GROUP]


def test_value_computed_before_a_barrier_is_the_same_after_it(backend):
    groups = 5
    x = np.random.default_rng(5).integers(0, 1000, groups * GROUP).astype(np.int64)
    y = kk.zeros(backend, np.int64, len(x))
    own_value_plus_neighbour(backend, GROUP)(y, kk.to_backend(backend, x), ndrange=len(x))
    kk.synchronize(backend)
    neighbours = np.roll(x.reshape(groups, GROUP), -1, axis=1).ravel()
    np.testing.assert_array_equal(kk.to_numpy(y), x * 10 + np.arange(len(x)) + neighbours)


@kk.kernel
def rounds_of_neighbour_exchange(y, x: kk.Const):
    i = kk.index(kk.Global)
    li = kk.index(kk.Local)
    buffer = kk.localmem(np.int64, GROUP)
    acc = 0
    for r in range(4):
        buffer[li] = acc + x[i]
        kk.synchronize()
        acc += buffer[(li + r + 1) % GROUP]
        kk.synchronize()
    y[i] = acc


def test_loop_carried_value_survives_barriers_in_every_iteration(backend):
    groups = 4
    x = np.random.default_rng(6).integers(-10, 10, groups * GROUP).astype(np.int64)
    y = kk.zeros(backend, np.int64, len(x))
    rounds_of_neighbour_exchange(backend, GROUP)(y, kk.to_backend(backend, x), ndrange=len(x))
    kk.synchronize(backend)
    xs = x.reshape(groups, GROUP)
    acc = np.zeros_like(xs)
    for r in range(4):
        buffer = acc + xs
        acc = acc + np.roll(buffer, -(r + 1), axis=1)
    np.testing.assert_array_equal(kk.to_numpy(y), acc.ravel())


@kk.kernel
def branch_state_across_barrier(y, x: kk.Const):
    i = kk.index(kk.Global)
    li = kk.index(kk.Local)
    buffer = kk.localmem(np.int64, GROUP)
    if x[i] % 2 == 0:
        kind = 1
        scale = x[i] // 2
    else:
        kind = 2
        scale = x[i] * 3
    buffer[li] = kind
    kk.synchronize()
    y[i] = scale * 100 + buffer[GROUP - 1 - li] * 10 + kind


def test_values_set_on_different_branches_survive_a_later_barrier(backend):
    groups = 3
    x = np.random.default_rng(7).integers(0, 50, groups * GROUP).astype(np.int64)
    y = kk.zeros(backend, np.int64, len(x))
    branch_state_across_barrier(backend, GROUP)(y, kk.to_backend(backend, x), ndrange=len(x))
    kk.synchronize(backend)
    kind = np.where(x % 2 == 0, 1, 2)
    scale = np.where(x % 2 == 0, x // 2, x * 3)
    mirrored_kind = kind.reshape(groups, GROUP)[:, ::-1].ravel()
    np.testing.assert_array_equal(kk.to_numpy(y), scale * 100 + mirrored_kind * 10 + kind)


# --- local memory shaped by the work-group size --------------------------------------


@kk.kernel
def reverse_within_group(y, x: kk.Const):
    i = kk.index(kk.Global)
    li = kk.index(kk.Local)
    (n,) = kk.groupsize()
    buffer = kk.localmem(np.float32, kk.groupsize())
    buffer[li] = x[i]
    kk.synchronize()
    y[i] = buffer[n - 1 - li]


def test_local_memory_shaped_by_a_static_one_dimensional_groupsize(backend):
    group = 32
    x = np.arange(4 * group, dtype=np.float32)
    y = kk.zeros(backend, np.float32, len(x))
    reverse_within_group(backend, group)(y, kk.to_backend(backend, x), ndrange=len(x))
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(y), x.reshape(-1, group)[:, ::-1].ravel())


@kk.kernel
def transpose_through_tile(y, x: kk.Const):
    i, j = kk.index(kk.Global, kk.NTuple)
    li, lj = kk.index(kk.Local, kk.NTuple)
    gi, gj = kk.index(kk.Group, kk.NTuple)
    rows, cols = kk.groupsize()
    tile = kk.localmem(np.float32, kk.groupsize())
    tile[li, lj] = x[i, j]
    kk.synchronize()
    y[gj * cols + li, gi * rows + lj] = tile[lj, li]


def test_local_memory_shaped_by_a_static_two_dimensional_groupsize(backend):
    x = np.arange(32 * 24, dtype=np.float32).reshape(32, 24)
    y = kk.zeros(backend, np.float32, (24, 32))
    transpose_through_tile(backend, (8, 8))(y, kk.to_backend(backend, x), ndrange=x.shape)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(y), x.T)


@kk.kernel
def group_id_through_local_memory(y):
    i = kk.index(kk.Global)
    li = kk.index(kk.Local)
    g = kk.index(kk.Group)
    buffer = kk.localmem(np.int64, GROUP)
    buffer[li] = g * 1000 + li
    kk.synchronize()
    y[i] = buffer[GROUP - 1 - li]


def test_local_memory_is_private_to_its_work_group(backend):
    groups = 16
    y = kk.zeros(backend, np.int64, groups * GROUP)
    group_id_through_local_memory(backend, GROUP)(y, ndrange=groups * GROUP)
    kk.synchronize(backend)
    g, li = np.divmod(np.arange(groups * GROUP), GROUP)
    np.testing.assert_array_equal(kk.to_numpy(y), g * 1000 + (GROUP - 1 - li))


# --- private arrays ------------------------------------------------------------------


@kk.kernel
def reverse_decimal_digits(y, x: kk.Const):
    i = kk.index(kk.Global)
    digits = kk.private(np.int64, 8)
    v = x[i]
    count = 0
    while v > 0:
        digits[count] = v % 10
        v //= 10
        count += 1
    r = 0
    for k in range(count):
        r = r * 10 + digits[k]
    y[i] = r


def test_private_array_holds_per_work_item_values(backend):
    x = np.random.default_rng(8).integers(1, 10**8, 101).astype(np.int64)
    y = kk.zeros(backend, np.int64, len(x))
    reverse_decimal_digits(backend, 32)(y, kk.to_backend(backend, x), ndrange=len(x))
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(y), [int(str(v)[::-1]) for v in x])


@kk.kernel
def private_matrix_trace(y):
    i = kk.index(kk.Global)
    m = kk.private(np.int32, (3, 3))
    for r in range(3):
        for c in range(3):
            m[r, c] = i * 10 + r * 3 + c
    y[i] = m[0, 0] + m[1, 1] + m[2, 2]


def test_two_dimensional_private_array(backend):
    n = 45
    y = kk.zeros(backend, np.int32, n)
    private_matrix_trace(backend, 16)(y, ndrange=n)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(y), 30 * np.arange(n) + 12)


@kk.kernel
def private_values_across_barrier(y, x: kk.Const):
    i = kk.index(kk.Global)
    li = kk.index(kk.Local)
    own = kk.private(np.int64, 4)
    for k in range(4):
        own[k] = x[i] * (k + 1)
    buffer = kk.localmem(np.int64, GROUP)
    buffer[li] = x[i]
    kk.synchronize()
    y[i] = own[0] + own[1] + own[2] + own[3] + 1000 * buffer[(li + 1) % GROUP]


def test_private_array_keeps_its_values_across_a_barrier(backend):
    groups = 3
    x = np.random.default_rng(9).integers(-100, 100, groups * GROUP).astype(np.int64)
    y = kk.zeros(backend, np.int64, len(x))
    private_values_across_barrier(backend, GROUP)(y, kk.to_backend(backend, x), ndrange=len(x))
    kk.synchronize(backend)
    neighbours = np.roll(x.reshape(groups, GROUP), -1, axis=1).ravel()
    np.testing.assert_array_equal(kk.to_numpy(y), 10 * x + 1000 * neighbours)


# --- kk.synchronize_any: a barrier that is also a vote ------------------------------------


@kk.kernel
def any_negative_per_group(flags, x: kk.Const):
    i = kk.index(kk.Global)
    g = kk.index(kk.Group)
    seen = kk.synchronize_any(x[i] < 0)
    if kk.index(kk.Local) == 0:
        flags[g] = 1 if seen else 0


@kk.kernel
def vote_in_a_loop(rounds, x: kk.Const):
    i = kk.index(kk.Global)
    value = x[i]
    count = 0
    while kk.synchronize_any(value > 1):
        value = value // 2 if value > 1 else value
        count += 1
    rounds[i] = count


def test_synchronize_any_tells_every_work_item_whether_any_condition_held(backend):
    x = np.ones(64, np.float32)
    x[[5, 40]] = -1
    (flags, *_) = launch_vote(backend, any_negative_per_group, 16, 64,
                              np.zeros(4, np.int64), x)
    np.testing.assert_array_equal(flags, [1, 0, 1, 0])


def test_synchronize_any_steering_a_loop_gives_each_group_its_longest_count(backend):
    x = np.array([1, 2, 3, 64, 1, 1, 1, 1, 8, 1, 1, 1], np.int64)
    (rounds, *_) = launch_vote(backend, vote_in_a_loop, 4, 12, np.zeros(12, np.int64), x)
    np.testing.assert_array_equal(rounds, [6] * 4 + [0] * 4 + [3] * 4)


def launch_vote(backend, kernel, group, ndrange, *args):
    moved = [kk.to_backend(backend, a) for a in args]
    kernel(backend, group)(*moved, ndrange=ndrange)
    kk.synchronize(backend)
    return [kk.to_numpy(m) for m in moved]


def test_synchronize_any_reached_by_only_some_work_items_is_a_compile_error():
    @kk.kernel
    def divergent_vote(flags):
        i = kk.index(kk.Global)
        if i < 3:
            flags[i] = kk.synchronize_any(i == 0)

    with pytest.raises(kk.CompileError, match="reached by only some work-items"):
        kk.code_ir(divergent_vote, kk.CPU(threads=1), np.zeros(8, np.int64), ndrange=8,
                   workgroupsize=8)


# --- the group's first work-item alone after a barrier --------------------------------


@kk.kernel
def group_sums_by_first_item(sums, x: kk.Const):
    """Each work-item stores its value; after the barrier the group's first work-item
    (local number 0, row-major) adds the group's values up. The CPU runs that region for
    the first work-item alone."""
    i, j = kk.index(kk.Global, kk.NTuple)
    li, lj = kk.index(kk.Local, kk.NTuple)
    gi, gj = kk.index(kk.Group, kk.NTuple)
    rows, cols = kk.groupsize()
    scratch = kk.localmem(np.float64, (4, 8))
    scratch[li, lj] = x[i, j]
    kk.synchronize()
    if li * cols + lj == 0:
        total = 0.0
        for r in range(rows):
            for c in range(cols):
                if gi * rows + r < x.shape[0] and gj * cols + c < x.shape[1]:
                    total += scratch[r, c]
        sums[gi, gj] = total


@kk.kernel
def column_sums_by_first_row(sums, x: kk.Const):
    """After the barrier every work-item of the group's first row (not only the first
    work-item) adds up its column of the group: the region must run for all of them."""
    i, j = kk.index(kk.Global, kk.NTuple)
    li, lj = kk.index(kk.Local, kk.NTuple)
    gi = kk.index(kk.Group, kk.NTuple)[0]
    scratch = kk.localmem(np.float64, (4, 8))
    scratch[li, lj] = x[i, j]
    kk.synchronize()
    if li == 0:
        total = 0.0
        for r in range(4):
            if gi * 4 + r < x.shape[0]:
                total += scratch[r, lj]
        sums[gi, j] = total


@pytest.mark.parametrize("shape", [(8, 16), (11, 21)], ids=["whole groups", "partial groups"])
def test_a_region_run_by_the_first_work_item_alone_sums_each_group(backend, shape):
    x = np.random.default_rng(5).random(shape)
    groups = (-(-shape[0] // 4), -(-shape[1] // 8))
    sums = kk.zeros(backend, np.float64, groups)
    group_sums_by_first_item(backend, (4, 8))(sums, kk.to_backend(backend, x), ndrange=shape)
    padded = np.zeros((groups[0] * 4, groups[1] * 8))
    padded[:shape[0], :shape[1]] = x
    expected = padded.reshape(groups[0], 4, groups[1], 8).sum(axis=(1, 3))
    np.testing.assert_allclose(kk.to_numpy(sums), expected, rtol=1e-12)


@pytest.mark.parametrize("shape", [(8, 16), (11, 21)], ids=["whole groups", "partial groups"])
def test_a_region_run_by_the_first_row_of_each_group_runs_for_every_column(backend, shape):
    x = np.random.default_rng(6).random(shape)
    groups = -(-shape[0] // 4)
    sums = kk.zeros(backend, np.float64, (groups, shape[1]))
    column_sums_by_first_row(backend, (4, 8))(sums, kk.to_backend(backend, x), ndrange=shape)
    padded = np.zeros((groups * 4, shape[1]))
    padded[:shape[0]] = x
    np.testing.assert_allclose(kk.to_numpy(sums), padded.reshape(groups, 4, shape[1]).sum(axis=1),
                               rtol=1e-12)


# --- after a barrier, only the work-items below a group-uniform bound -----------------


@kk.kernel
def double_the_leading_items(out, x: kk.Const, m):
    """After the barrier only the work-items whose local id is below m double their
    element (the CPU runs that region for those work-items alone); after the next
    barrier every work-item reads its element back. `w` is made after the first
    barrier, next to the test, and read after the second: the others need it too."""
    i = kk.index(kk.Global)
    local = kk.index(kk.Local)
    scratch = kk.localmem(np.float64, (GROUP,))
    scratch[local] = x[i]
    v = x[i]
    kk.synchronize()
    w = kk.sqrt(v)
    if local < m:
        scratch[local] = 2.0 * scratch[local]
    kk.synchronize()
    out[i] = scratch[local] + w


@kk.kernel
def leading_columns_write(out, m):
    """`m > lj` in a 2-D group: the leading columns of every row write; the rest end."""
    i, j = kk.index(kk.Global, kk.NTuple)
    li, lj = kk.index(kk.Local, kk.NTuple)
    scratch = kk.localmem(np.int64, (4, 8))
    scratch[li, lj] = i * 100 + j
    kk.synchronize()
    if m > lj:
        out[i, j] = scratch[li, lj] + 1


@pytest.mark.parametrize("m", [-3, 0, 5, GROUP, GROUP + 40])
def test_only_the_work_items_below_a_uniform_bound_run_after_a_barrier(backend, m):
    n = 2 * GROUP + 22     # a partial last group
    x = np.random.default_rng(7).random(n)
    out = kk.zeros(backend, np.float64, n)
    double_the_leading_items(backend, GROUP)(out, kk.to_backend(backend, x), m, ndrange=n)
    local = np.arange(n) % GROUP
    np.testing.assert_allclose(kk.to_numpy(out), np.where(local < m, 2 * x, x) + np.sqrt(x),
                               rtol=1e-12)


@pytest.mark.parametrize("m", [0, 3, 8, 11])
def test_only_the_leading_columns_of_a_two_dimensional_group_run_after_a_barrier(backend, m):
    shape = (6, 13)
    out = kk.zeros(backend, np.int64, shape)
    leading_columns_write(backend, (4, 8))(out, m, ndrange=shape)
    i, j = np.indices(shape)
    np.testing.assert_array_equal(kk.to_numpy(out), np.where(j % 8 < m, i * 100 + j + 1, 0))


@kk.kernel
def vote_after_leading_items(out, m):
    """The work-items at or above m skip the block but still vote at the barrier_any."""
    i = kk.index(kk.Global)
    local = kk.index(kk.Local)
    scratch = kk.localmem(np.int64, (8,))
    scratch[local] = local
    last = local == 7
    kk.synchronize()
    if local < m:
        scratch[local] += 1
    anyone = kk.synchronize_any(last)
    out[i] = 1 if anyone else 0


@kk.kernel
def chosen_value_kept_past_leading_items(out, x: kk.Const, flag, again, m):
    """`chosen` is each work-item's, picked by a uniform branch just before the test:
    the work-items at or above m must keep it across the next barrier too."""
    i = kk.index(kk.Global)
    local = kk.index(kk.Local)
    scratch = kk.localmem(np.float64, (8,))
    a = x[i]
    b = x[i] * 2.0
    scratch[local] = 0.0
    kk.synchronize()
    if flag:
        chosen = a
    else:
        chosen = b
    if again:
        if local < m:
            scratch[local] = 1.0
    kk.synchronize()
    out[i] = chosen + scratch[local]


@pytest.mark.parametrize("m", [0, 3, 8])
def test_work_items_past_a_uniform_bound_still_vote_and_keep_their_values(backend, m):
    n = 20
    votes = kk.zeros(backend, np.int64, n)
    vote_after_leading_items(backend, 8)(votes, m, ndrange=n)
    x = np.arange(n, dtype=np.float64) + 1
    out = kk.zeros(backend, np.float64, n)
    chosen_value_kept_past_leading_items(backend, 8)(out, kk.to_backend(backend, x), False,
                                                     True, m, ndrange=n)
    local = np.arange(n) % 8
    np.testing.assert_array_equal(kk.to_numpy(votes), (np.arange(n) < 16).astype(np.int64))
    np.testing.assert_array_equal(kk.to_numpy(out), 2 * x + (local < m))
