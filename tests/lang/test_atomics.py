"""Atomic read-modify-write operations on global arrays: results under heavy contention,
the old values they return, integer and float element types, and tuple indices."""
import numpy as np
import pytest

import kernelkit as kk

WORKGROUP = 256
MANY = 1 << 20
BINS = 16


def launch(backend, kernel, *args, ndrange):
    kernel(backend, WORKGROUP)(*args, ndrange=ndrange)
    kk.synchronize(backend)


# --- contention ----------------------------------------------------------------------


@kk.kernel
def histogram(bins, keys: kk.Const):
    i = kk.index(kk.Global)
    kk.atomic_add(bins, keys[i], 1)


@kk.kernel
def weighted_histogram(bins, keys: kk.Const, weights: kk.Const):
    i = kk.index(kk.Global)
    kk.atomic_add(bins, keys[i], weights[i])


@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.int64, np.uint32, np.float64],
                         ids=lambda d: np.dtype(d).name)
def test_histogram_of_a_million_items_into_sixteen_bins_counts_every_item(backend, dtype):
    keys = np.random.default_rng(0).integers(0, BINS, MANY).astype(np.int32)
    bins = kk.zeros(backend, dtype, BINS)
    launch(backend, histogram, bins, kk.to_backend(backend, keys), ndrange=MANY)
    np.testing.assert_array_equal(kk.to_numpy(bins), np.bincount(keys, minlength=BINS).astype(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_float_atomic_add_of_weights_under_contention(backend, dtype):
    rng = np.random.default_rng(1)
    keys = rng.integers(0, BINS, MANY).astype(np.int32)
    # Multiples of 0.5: every partial sum is exact, so the order of the additions does not matter.
    weights = (rng.integers(1, 5, MANY) / 2).astype(dtype)
    bins = kk.zeros(backend, dtype, BINS)
    launch(backend, weighted_histogram, bins, kk.to_backend(backend, keys), kk.to_backend(backend, weights),
           ndrange=MANY)
    np.testing.assert_array_equal(kk.to_numpy(bins), np.bincount(keys, weights=weights, minlength=BINS))


@kk.kernel
def total(result, x: kk.Const):
    i = kk.index(kk.Global)
    kk.atomic_add(result, 0, x[i])


def test_every_item_adding_into_one_cell(backend):
    x = np.random.default_rng(2).integers(-1000, 1000, MANY).astype(np.int64)
    result = kk.zeros(backend, np.int64, 1)
    launch(backend, total, result, kk.to_backend(backend, x), ndrange=MANY)
    assert kk.to_numpy(result)[0] == x.sum()


@kk.kernel
def histogram_2d(counts, rows: kk.Const, cols: kk.Const):
    i = kk.index(kk.Global)
    kk.atomic_add(counts, (rows[i], cols[i]), 1)


def test_atomic_add_with_a_tuple_index(backend):
    rng = np.random.default_rng(3)
    n = 100_000
    rows = rng.integers(0, 4, n).astype(np.int32)
    cols = rng.integers(0, 5, n).astype(np.int32)
    counts = kk.zeros(backend, np.int32, (4, 5))
    launch(backend, histogram_2d, counts, kk.to_backend(backend, rows), kk.to_backend(backend, cols), ndrange=n)
    expected = np.zeros((4, 5), np.int32)
    np.add.at(expected, (rows, cols), 1)
    np.testing.assert_array_equal(kk.to_numpy(counts), expected)


# --- min, max, bitwise ---------------------------------------------------------------


@kk.kernel
def global_min_max(smallest, largest, x: kk.Const):
    i = kk.index(kk.Global)
    kk.atomic_min(smallest, 0, x[i])
    kk.atomic_max(largest, 0, x[i])


def extremes_start(dtype):
    """(start for a running minimum, start for a running maximum) of dtype."""
    if np.dtype(dtype).kind == "f":
        return np.inf, -np.inf
    info = np.iinfo(dtype)
    return info.max, info.min


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64, np.float32, np.float64],
                         ids=lambda d: np.dtype(d).name)
def test_atomic_min_and_max_find_the_extremes(backend, dtype):
    rng = np.random.default_rng(4)
    if np.dtype(dtype).kind == "f":
        x = rng.standard_normal(200_000).astype(dtype)
    else:
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, 200_000, dtype=dtype, endpoint=True)
    low, high = extremes_start(dtype)
    smallest = kk.to_backend(backend, np.array([low], dtype))
    largest = kk.to_backend(backend, np.array([high], dtype))
    launch(backend, global_min_max, smallest, largest, kk.to_backend(backend, x), ndrange=len(x))
    assert kk.to_numpy(smallest)[0] == x.min()
    assert kk.to_numpy(largest)[0] == x.max()


@kk.kernel
def keyed_min_max(smallest, largest, keys: kk.Const, x: kk.Const):
    i = kk.index(kk.Global)
    kk.atomic_min(smallest, keys[i], x[i])
    kk.atomic_max(largest, keys[i], x[i])


def test_atomic_min_and_max_per_bin(backend):
    rng = np.random.default_rng(5)
    keys = rng.integers(0, BINS, 100_000).astype(np.int64)
    x = rng.integers(-10**6, 10**6, 100_000).astype(np.int32)
    smallest = kk.to_backend(backend, np.full(BINS, np.iinfo(np.int32).max, np.int32))
    largest = kk.to_backend(backend, np.full(BINS, np.iinfo(np.int32).min, np.int32))
    launch(backend, keyed_min_max, smallest, largest, kk.to_backend(backend, keys), kk.to_backend(backend, x),
           ndrange=len(x))
    expected_min = np.full(BINS, np.iinfo(np.int32).max, np.int32)
    expected_max = np.full(BINS, np.iinfo(np.int32).min, np.int32)
    np.minimum.at(expected_min, keys, x)
    np.maximum.at(expected_max, keys, x)
    np.testing.assert_array_equal(kk.to_numpy(smallest), expected_min)
    np.testing.assert_array_equal(kk.to_numpy(largest), expected_max)


@kk.kernel
def bitwise_reductions(all_and, all_or, all_xor, x: kk.Const):
    i = kk.index(kk.Global)
    kk.atomic_and_(all_and, 0, x[i])
    kk.atomic_or_(all_or, 0, x[i])
    kk.atomic_xor(all_xor, 0, x[i])


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint64], ids=lambda d: np.dtype(d).name)
def test_atomic_and_or_xor_reduce_like_numpy(backend, dtype):
    rng = np.random.default_rng(6)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, 50_000, dtype=dtype, endpoint=True)
    # Bits set in every value but one cleared in some, so the AND is neither zero nor trivial.
    x |= np.array(0x0F0F0000, dtype)
    x[::7] &= ~np.array(1 << 24, dtype)
    all_and = kk.to_backend(backend, np.array([-1], np.int64).astype(dtype))
    all_or = kk.zeros(backend, dtype, 1)
    all_xor = kk.zeros(backend, dtype, 1)
    launch(backend, bitwise_reductions, all_and, all_or, all_xor, kk.to_backend(backend, x), ndrange=len(x))
    assert kk.to_numpy(all_and)[0] == np.bitwise_and.reduce(x)
    assert kk.to_numpy(all_or)[0] == np.bitwise_or.reduce(x)
    assert kk.to_numpy(all_xor)[0] == np.bitwise_xor.reduce(x)


@kk.kernel
def set_bits(words, masks: kk.Const):
    i = kk.index(kk.Global)
    kk.atomic_or_(words, i // 32, masks[i])


def test_atomic_or_sets_one_bit_per_work_item_without_losing_any(backend):
    n = 32 * 40
    keep = np.arange(n) % 3 != 0
    masks = np.where(keep, np.left_shift(np.uint32(1), (np.arange(n) % 32).astype(np.uint32)), 0).astype(np.uint32)
    words = kk.zeros(backend, np.uint32, n // 32)
    launch(backend, set_bits, words, kk.to_backend(backend, masks), ndrange=n)
    np.testing.assert_array_equal(kk.to_numpy(words), np.bitwise_or.reduce(masks.reshape(-1, 32), axis=1))


# --- returned old values -------------------------------------------------------------


@kk.kernel
def take_slot(slots, counter):
    i = kk.index(kk.Global)
    slots[i] = kk.atomic_add(counter, 0, 1)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32], ids=lambda d: np.dtype(d).name)
def test_atomic_add_returns_distinct_old_values_that_form_a_permutation(backend, dtype):
    n = 100_000
    slots = kk.zeros(backend, np.int64, n)
    counter = kk.zeros(backend, dtype, 1)
    launch(backend, take_slot, slots, counter, ndrange=n)
    assert kk.to_numpy(counter)[0] == n
    np.testing.assert_array_equal(np.sort(kk.to_numpy(slots)), np.arange(n))


@kk.kernel
def compact_positive(out, count, x: kk.Const):
    i = kk.index(kk.Global)
    if x[i] > 0:
        out[kk.atomic_add(count, 0, 1)] = x[i]


def test_stream_compaction_with_atomic_add_slots(backend):
    x = np.random.default_rng(7).integers(-100, 100, 50_000).astype(np.int32)
    out = kk.zeros(backend, np.int32, len(x))
    count = kk.zeros(backend, np.int32, 1)
    launch(backend, compact_positive, out, count, kk.to_backend(backend, x), ndrange=len(x))
    k = kk.to_numpy(count)[0]
    assert k == np.count_nonzero(x > 0)
    np.testing.assert_array_equal(np.sort(kk.to_numpy(out)[:k]), np.sort(x[x > 0]))
    assert not kk.to_numpy(out)[k:].any()


@kk.kernel
def release_slot(olds, counter):
    i = kk.index(kk.Global)
    olds[i] = kk.atomic_sub(counter, 0, 1)


def test_atomic_sub_returns_distinct_old_values(backend):
    n = 50_000
    olds = kk.zeros(backend, np.int64, n)
    counter = kk.to_backend(backend, np.array([n], np.int32))
    launch(backend, release_slot, olds, counter, ndrange=n)
    assert kk.to_numpy(counter)[0] == 0
    np.testing.assert_array_equal(np.sort(kk.to_numpy(olds)), np.arange(1, n + 1))


@kk.kernel
def exchange_in_own_id(olds, cell):
    i = kk.index(kk.Global)
    olds[i] = kk.atomic_exchange(cell, 0, i + 1)


def test_atomic_exchange_passes_every_value_on_exactly_once(backend):
    n = 50_000
    olds = kk.zeros(backend, np.int64, n)
    cell = kk.zeros(backend, np.int64, 1)
    launch(backend, exchange_in_own_id, olds, cell, ndrange=n)
    seen = np.append(kk.to_numpy(olds), kk.to_numpy(cell)[0])
    np.testing.assert_array_equal(np.sort(seen), np.arange(n + 1))


@kk.kernel
def each_operation_once(returned, cells):
    returned[0] = kk.atomic_add(cells, 0, 5)
    returned[1] = kk.atomic_sub(cells, 1, 5)
    returned[2] = kk.atomic_min(cells, 2, 3)
    returned[3] = kk.atomic_min(cells, 2, 9)
    returned[4] = kk.atomic_max(cells, 3, 3)
    returned[5] = kk.atomic_max(cells, 3, 9)
    returned[6] = kk.atomic_and_(cells, 4, 0b0110)
    returned[7] = kk.atomic_or_(cells, 5, 0b0110)
    returned[8] = kk.atomic_xor(cells, 6, 0b0110)
    returned[9] = kk.atomic_exchange(cells, 7, 42)
    returned[10] = kk.atomic_cas(cells, 8, 7, 11)
    returned[11] = kk.atomic_cas(cells, 8, 7, 13)


def test_each_atomic_returns_the_value_before_its_update(backend):
    start = np.array([10, 10, 7, 7, 0b1100, 0b1100, 0b1100, 1, 7], np.int32)
    cells = kk.to_backend(backend, start)
    returned = kk.zeros(backend, np.int32, 12)
    each_operation_once(backend, 1)(returned, cells, ndrange=1)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(returned), [10, 10, 7, 3, 7, 7, 0b1100, 0b1100, 0b1100, 1, 7, 11])
    np.testing.assert_array_equal(kk.to_numpy(cells), [15, 5, 3, 9, 0b0100, 0b1110, 0b1010, 42, 11])


# --- compare-and-swap ----------------------------------------------------------------


@kk.kernel
def increment_by_cas(counter, repeats):
    for _ in range(repeats):
        old = counter[0]
        while True:
            seen = kk.atomic_cas(counter, 0, old, old + 1)
            if seen == old:
                break
            old = seen


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint64], ids=lambda d: np.dtype(d).name)
def test_compare_and_swap_loop_loses_no_increment(backend, dtype):
    n, repeats = 4096, 4
    counter = kk.zeros(backend, dtype, 1)
    launch(backend, increment_by_cas, counter, repeats, ndrange=n)
    assert kk.to_numpy(counter)[0] == n * repeats


@kk.kernel
def claim_once(winners, owner):
    i = kk.index(kk.Global)
    if kk.atomic_cas(owner, 0, -1, i) == -1:
        kk.atomic_add(winners, 0, 1)


def test_compare_and_swap_lets_exactly_one_work_item_win(backend):
    n = 10_000
    winners = kk.zeros(backend, np.int32, 1)
    owner = kk.to_backend(backend, np.array([-1], np.int64))
    launch(backend, claim_once, winners, owner, ndrange=n)
    assert kk.to_numpy(winners)[0] == 1
    assert 0 <= kk.to_numpy(owner)[0] < n


# --- atomics on local memory: shared by a group's work-items only ----------------------


GROUP_BINS = 8


@kk.kernel
def group_histograms(counts, sums, lows, highs, keys: kk.Const, x: kk.Const):
    """Each group's histogram of its keys, the sum, min and max of x per key, built with
    atomics in local memory (the CPU runs them as plain updates, one work-item after
    another), then copied out by the group's first GROUP_BINS work-items."""
    i = kk.index(kk.Global)
    local = kk.index(kk.Local)
    group = kk.index(kk.Group)
    count = kk.localmem(np.int32, (GROUP_BINS,))
    total = kk.localmem(np.float64, (GROUP_BINS,))
    low = kk.localmem(np.float64, (GROUP_BINS,))
    high = kk.localmem(np.float64, (GROUP_BINS,))
    if local < GROUP_BINS:
        count[local] = 0
        total[local] = 0.0
        low[local] = np.inf
        high[local] = -np.inf
    kk.synchronize()
    key = keys[i]
    kk.atomic_add(count, key, 1)
    kk.atomic_add(total, key, x[i])
    kk.atomic_min(low, key, x[i])
    kk.atomic_max(high, key, x[i])
    kk.synchronize()
    if local < GROUP_BINS:
        counts[group, local] = count[local]
        sums[group, local] = total[local]
        lows[group, local] = low[local]
        highs[group, local] = high[local]


def test_local_atomics_build_each_groups_histogram(backend):
    rng = np.random.default_rng(11)
    groups = 64
    keys = rng.integers(0, GROUP_BINS, groups * WORKGROUP).astype(np.int32)
    x = (rng.integers(-40, 40, groups * WORKGROUP) / 4).astype(np.float64)   # exact sums
    outputs = [kk.zeros(backend, dtype, (groups, GROUP_BINS))
               for dtype in (np.int32, np.float64, np.float64, np.float64)]
    launch(backend, group_histograms, *outputs, kk.to_backend(backend, keys),
           kk.to_backend(backend, x), ndrange=len(keys))
    counts, sums, lows, highs = (kk.to_numpy(o) for o in outputs)
    for g in range(groups):
        k, v = keys[g * WORKGROUP:(g + 1) * WORKGROUP], x[g * WORKGROUP:(g + 1) * WORKGROUP]
        np.testing.assert_array_equal(counts[g], np.bincount(k, minlength=GROUP_BINS))
        np.testing.assert_array_equal(sums[g], np.bincount(k, weights=v, minlength=GROUP_BINS))
        for b in range(GROUP_BINS):
            chosen = v[k == b]
            assert lows[g, b] == (chosen.min() if len(chosen) else np.inf)
            assert highs[g, b] == (chosen.max() if len(chosen) else -np.inf)


@kk.kernel
def group_slots(slots, claims):
    """Each work-item takes a slot of its group's counter (atomic_add's old value) and
    the group's first work-item records, with compare-and-swap and exchange, who came
    last."""
    i = kk.index(kk.Global)
    local = kk.index(kk.Local)
    group = kk.index(kk.Group)
    counter = kk.localmem(np.int64, (1,))
    last = kk.localmem(np.int64, (1,))
    if local == 0:
        counter[0] = 0
        last[0] = -1
    kk.synchronize()
    slots[i] = kk.atomic_add(counter, 0, 1)
    kk.atomic_exchange(last, 0, local)
    kk.synchronize()
    if local == 0:
        seen = kk.atomic_cas(last, 0, WORKGROUP - 1, -2)
        claims[group] = seen


def test_local_atomics_return_the_value_before_their_update(backend):
    groups = 32
    slots = kk.zeros(backend, np.int64, groups * WORKGROUP)
    claims = kk.zeros(backend, np.int64, groups)
    launch(backend, group_slots, slots, claims, ndrange=groups * WORKGROUP)
    slots = kk.to_numpy(slots).reshape(groups, WORKGROUP)
    for g in range(groups):
        np.testing.assert_array_equal(np.sort(slots[g]), np.arange(WORKGROUP))
    assert all(0 <= c < WORKGROUP for c in kk.to_numpy(claims))
