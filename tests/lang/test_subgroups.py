"""Subgroup operations (`kk.shuffle`, `kk.subgroup_sum` ...): each checked against a NumPy
computation of the semantics `kernelkit/ir/subgroups.py` defines, on every backend, for
groups of one, two and eight subgroups, a partial last subgroup, groups cut short by the
ndrange's end and two-dimensional groups (subgroups by linear local index). Float sums
follow the fixed tree over the lanes, so they are compared bit for bit."""
import functools
import re

import numpy as np
import pytest

import kernelkit as kk

import source_lines

SUBGROUP = 32
assert_points_at = functools.partial(source_lines.assert_points_at, path=__file__)


# -- the semantics in NumPy -------------------------------------------------------------------

def lane_table(ndrange: tuple, group: tuple) -> np.ndarray:
    """For every subgroup of the launch (rows) and each of its 32 lanes, the flat global
    index of the lane's work-item, or -1 where the lane is not a member."""
    ndrange, group = tuple(ndrange), tuple(group)
    groups = [-(-n // g) for n, g in zip(ndrange, group)]
    items = int(np.prod(group))
    rows = []
    for group_position in np.ndindex(*groups):
        table = np.full(-(-items // SUBGROUP) * SUBGROUP, -1, np.int64)
        for linear in range(items):
            local = np.unravel_index(linear, group)
            position = [p * g + l for p, g, l in zip(group_position, group, local)]
            if all(p < n for p, n in zip(position, ndrange)):
                table[linear] = np.ravel_multi_index(position, ndrange)
        rows.extend(table.reshape(-1, SUBGROUP))
    return np.array(rows)


def identity(kind, dtype):
    if kind == "sum":
        return dtype.type(-0.0) if dtype.kind == "f" else dtype.type(0)
    if dtype.kind == "f":
        return dtype.type(-np.inf if kind == "max" else np.inf)
    info = np.iinfo(dtype)
    return dtype.type(info.min if kind == "max" else info.max)


def tree(kind, leaves):
    """Pairs of lanes, then pairs of pairs; NaN propagates through max and min."""
    while leaves.shape[1] > 1:
        left, right = leaves[:, 0::2], leaves[:, 1::2]
        if kind == "sum":
            leaves = left + right
        else:
            better = right > left if kind == "max" else right < left
            leaves = np.where(np.isnan(right) if leaves.dtype.kind == "f" else False, right,
                              np.where(better, right, left))
    return leaves[:, 0]


def expected(table, x, lanes, delta, flags):
    """Every operation's result for every work-item, as the kernel below writes them."""
    n = x.size
    values = {name: np.zeros(n, x.dtype) for name in
              ("shuffle", "shuffle_down", "shuffle_up", "shuffle_xor", "sum", "max", "min")}
    votes = {name: np.zeros(n, np.int64) for name in ("any", "all", "ballot", "lane")}
    members = table >= 0
    gathered = np.where(members, x[np.maximum(table, 0)], np.zeros((), x.dtype))
    with np.errstate(over="ignore"):
        for kind in ("sum", "max", "min"):
            leaves = np.where(members, gathered, identity(kind, x.dtype))
            result = tree(kind, leaves)
            for row, lane in zip(*np.nonzero(members)):
                values[kind][table[row, lane]] = result[row]
    held = members & flags[np.maximum(table, 0)]
    for row, lane in zip(*np.nonzero(members)):
        i = table[row, lane]
        for name, source in (("shuffle", lanes[i]), ("shuffle_down", lane + delta[i]),
                             ("shuffle_up", lane - delta[i]), ("shuffle_xor", lane ^ delta[i])):
            valid = 0 <= source < SUBGROUP and members[row, source]
            values[name][i] = x[table[row, source]] if valid else x[i]
        votes["any"][i] = held[row].any()
        votes["all"][i] = held[row][members[row]].all()
        votes["ballot"][i] = sum(1 << k for k in np.nonzero(held[row])[0])
        votes["lane"][i] = lane
    return values, votes


# -- kernels ---------------------------------------------------------------------------------

@kk.kernel
def every_subgroup_operation(values, votes, x: kk.Const, lanes: kk.Const, delta: kk.Const,
                             flags: kk.Const):
    i = kk.index(kk.Global)
    v = x[i]
    values[0, i] = kk.shuffle(v, lanes[i])
    values[1, i] = kk.shuffle_down(v, delta[i])
    values[2, i] = kk.shuffle_up(v, delta[i])
    values[3, i] = kk.shuffle_xor(v, delta[i])
    values[4, i] = kk.subgroup_sum(v)
    values[5, i] = kk.subgroup_max(v)
    values[6, i] = kk.subgroup_min(v)
    held = flags[i] != 0
    votes[0, i] = kk.subgroup_any(held)
    votes[1, i] = kk.subgroup_all(held)
    votes[2, i] = kk.subgroup_ballot(held)
    votes[3, i] = kk.subgroup_index()
    votes[4, i] = kk.subgroup_size()


def run_every_operation(backend, x, ndrange, group, seed=0):
    rng = np.random.default_rng(seed)
    n = x.size
    lanes = rng.integers(-3, 40, n).astype(np.int32)
    delta = rng.integers(0, 36, n).astype(np.int64)
    flags = (rng.random(n) < 0.7).astype(np.uint8)
    flags[: n // 3] = 1      # some subgroups where every member's condition holds
    values = kk.zeros(backend, x.dtype, (7, n))
    votes = kk.zeros(backend, np.int64, (5, n))
    every_subgroup_operation(backend, group)(
        values, votes, *(kk.to_backend(backend, a) for a in (x, lanes, delta, flags)),
        ndrange=ndrange)
    kk.synchronize(backend)
    table = lane_table(ndrange if isinstance(ndrange, tuple) else (ndrange,),
                       group if isinstance(group, tuple) else (group,))
    want_values, want_votes = expected(table, x, lanes, delta, flags.astype(bool))
    got_values, got_votes = kk.to_numpy(values), kk.to_numpy(votes)
    for row, name in enumerate(want_values):
        np.testing.assert_array_equal(got_values[row], want_values[name], err_msg=name)
    for row, name in enumerate(("any", "all", "ballot", "lane")):
        np.testing.assert_array_equal(got_votes[row], want_votes[name], err_msg=name)
    np.testing.assert_array_equal(got_votes[4], SUBGROUP)


def random_values(dtype, n, rng):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return (rng.standard_normal(n) * 1000).astype(dtype)
    info = np.iinfo(dtype)     # the whole range: integer sums wrap
    return rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)


GEOMETRIES = {
    "one-subgroup": (96, 32),
    "two-subgroups": (256, 64),
    "eight-subgroups": (512, 256),
    "partial-group-and-subgroup": (100, 48),
    "two-dimensional-cut-short": ((10, 30), (4, 24)),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint32])
@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_each_subgroup_operation_gives_what_numpy_computes(backend, geometry, dtype):
    ndrange, group = GEOMETRIES[geometry]
    n = int(np.prod(ndrange))
    x = random_values(dtype, n, np.random.default_rng(7))
    run_every_operation(backend, x, ndrange, group)


def test_eight_and_sixteen_bit_values_and_float16_are_exchanged_whole(backend):
    for dtype in (np.int8, np.uint16, np.float16):
        x = random_values(dtype, 100, np.random.default_rng(3))
        if dtype is np.float16:
            x = np.clip(x, -60, 60).astype(np.float16)
        run_every_operation(backend, x, 100, 48)


def test_max_and_min_give_nan_where_a_member_has_nan(backend):
    x = random_values(np.float32, 128, np.random.default_rng(5))
    x[[3, 40, 95]] = np.nan       # lanes 3 and 8 of two subgroups, the last lane of a third
    run_every_operation(backend, x, 128, 64)


# -- sums written with subgroup operations ---------------------------------------------------

@kk.kernel
def sum_by_shuffle_down(total, x: kk.Const):
    i = kk.index(kk.Global)
    v = x[i]
    for delta in (16, 8, 4, 2, 1):
        v += kk.shuffle_down(v, delta)
    if kk.subgroup_index() == 0:
        kk.atomic_add(total, 0, v)


@kk.kernel
def sum_by_subgroup_sum(total, x: kk.Const):
    i = kk.index(kk.Global)
    s = kk.subgroup_sum(x[i])
    if kk.subgroup_index() == 0:
        kk.atomic_add(total, 0, s)


@pytest.mark.parametrize("kernel", [sum_by_shuffle_down, sum_by_subgroup_sum])
def test_a_sum_written_with_subgroup_operations_is_numpys(backend, kernel):
    rng = np.random.default_rng(11)
    for dtype in (np.int64, np.float64):
        x = random_values(dtype, 4096, rng) if dtype is np.float64 else \
            rng.integers(-10**6, 10**6, 4096, dtype=np.int64)
        total = kk.zeros(backend, dtype, 1)
        kernel(backend, 256)(total, kk.to_backend(backend, x), ndrange=x.size)
        kk.synchronize(backend)
        if dtype is np.int64:
            assert kk.to_numpy(total)[0] == np.sum(x)
        else:
            np.testing.assert_allclose(kk.to_numpy(total)[0], np.sum(x), rtol=1e-12)


# -- what the compiler refuses, and what it emits ------------------------------------------

def test_a_subgroup_sum_reached_by_only_some_work_items_is_a_compile_error(backend):
    @kk.kernel
    def divergent_sum(y, x: kk.Const):
        i = kk.index(kk.Global)
        if x[i] > 0:
            y[i] = kk.subgroup_sum(x[i])  # the divergent subgroup sum

    x = kk.to_backend(backend, np.ones(64, np.float32))
    with pytest.raises(kk.CompileError, match="reached by only some work-items") as info:
        divergent_sum(backend, 64)(kk.zeros(backend, np.float32, 64), x, ndrange=64)
    assert "kk.subgroup_sum()" in str(info.value)
    assert_points_at(info.value, "divergent_sum",
                     "y[i] = kk.subgroup_sum(x[i])  # the divergent subgroup sum")


def test_a_shuffle_of_a_vector_is_refused_with_a_hint(backend):
    @kk.kernel
    def shuffles_a_vector(y, x: kk.Const):
        i = kk.index(kk.Global)
        v = kk.shuffle_down(kk.vec3(x[i], x[i], x[i]), 1)
        y[i] = v[0]

    x = kk.to_backend(backend, np.ones(32, np.float32))
    with pytest.raises(kk.CompileError, match="kk.shuffle_down takes a number"):
        shuffles_a_vector(backend, 32)(kk.zeros(backend, np.float32, 32), x, ndrange=32)


def test_subgroup_operations_are_warp_instructions_on_cuda_and_local_memory_on_the_cpu(
        backend):
    x = np.arange(100, dtype=np.float32)
    arguments = (np.zeros((7, 100), np.float32), np.zeros((5, 100), np.int64), x,
                 np.zeros(100, np.int32), np.zeros(100, np.int64), np.zeros(100, np.uint8))
    if isinstance(backend, kk.CPU):
        ir = kk.code_ir(every_subgroup_operation, backend, *arguments, ndrange=100,
                        workgroupsize=48)
        assert "subgroup." not in ir and "barrier" in ir and "localmem" in ir
        return
    ptx = kk.code_native(every_subgroup_operation, backend, *arguments, ndrange=100,
                         workgroupsize=48)
    instructions = set(re.findall(r"\b(shfl\.sync|vote\.sync)\.(\w+)", ptx))
    assert {("shfl.sync", "idx"), ("vote.sync", "any"), ("vote.sync", "all"),
            ("vote.sync", "ballot")} <= instructions, instructions
