"""Stable LSD radix sorting of unsigned keys (uint32 or uint64), optionally carrying each
key's position, on any backend: the passes, their kernels, and how each backend lays them
out (`RadixPlan`). What a key means is `_sort_keys`'s; arrays, axes and dtypes are
`sorting`'s.

One pass sorts stably by one digit, starting with the lowest:

1. `count_digits`: the keys are cut into tiles, one per work-group; each group counts its
   tile's digits in local memory (an atomic add per key, coalesced reads) and writes its
   counts to `counts[digit * tiles + tile]`.
2. `scan_counts`: one group scans those counts in that order (digit-major, tile-minor),
   so `offsets[digit * tiles + tile]` is where the tile's first key with that digit goes;
   it also writes where each digit starts. The host reads those (2**bits numbers) and
   skips the pass where one digit holds every key: it would move nothing.
3. a scatter: each tile writes its keys, in input order within each digit, from its
   offsets on. On the CPU a group is one work-item that walks its tile in sequence (a
   group's work-items are a loop on one thread there, so a tile per work-item keeps
   the order for free, and a few long tiles per thread keep the tables of counts short
   even for 16-bit digits). On a GPU 256 work-items share a tile staged in local memory,
   each counting its own run of the tile, and a scan of those counts gives every key
   its stable rank in the group.

Short rows (at most `RadixPlan.one_work_item_limit` keys) are sorted by one work-item
each, all the passes in one launch (`sort_rows_one_per_work_item`): one launch instead
of three per pass, and many rows sorted side by side."""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

import kernelkit as kk


def position_dtype(length: int) -> np.dtype:
    """The dtype of the positions a sort carries beside the keys of rows of `length`
    (where each key came from in its row): int32 where they fit, for less memory traffic
    per pass; `argsort` widens them to int64 as it writes its result."""
    return np.dtype(np.int32 if length <= np.iinfo(np.int32).max else np.int64)


ROW_DIGIT_BITS = 8
"""Digits of the one-work-item sort: its counts are the work-item's own, 256 of them."""


@dataclass(frozen=True, slots=True)
class RadixPlan:
    """How one backend lays out the radix passes.

    - `digit_bits_by_size`: ((smallest n, bits per pass), ...), by increasing n: wider
      digits make fewer passes, but longer tables of counts (2**bits per tile).
    - `count_group`: work-items of a `count_digits` group.
    - `scatter_group`: work-items of a scatter group; 1 walks a tile in sequence.
    - `items_per_work_item`: with a scatter group of several work-items, the keys each
      work-item ranks (its own run of the tile): the tile, staged in local memory, holds
      `scatter_group * items_per_work_item` keys. None where tiles are not staged.
    - `tiles_per_thread`: where tiles are not staged, the array is cut into this many
      tiles per thread of the backend (`threads`, else 1), so that the threads share
      them evenly.
    - `scan_group`: work-items of the `scan_counts` group.
    - `one_work_item_limit`: rows of at most this many keys are sorted by one work-item
      each; a single row too where `one_work_item_single_row`."""

    digit_bits_by_size: tuple[tuple[int, int], ...]
    count_group: int
    scatter_group: int
    items_per_work_item: int | None
    tiles_per_thread: int
    scan_group: int
    one_work_item_limit: int
    one_work_item_single_row: bool

    def digit_bits(self, n: int) -> int:
        """Bits sorted per pass for `n` keys."""
        return max(bits for smallest, bits in self.digit_bits_by_size if n >= smallest)

    def tile_size(self, n: int, threads: int) -> int:
        """Keys per tile for `n` keys: a multiple of `count_group`."""
        if self.items_per_work_item is not None:
            return self.scatter_group * self.items_per_work_item
        tiles = max(1, self.tiles_per_thread * threads)
        per_tile = -(-n // tiles)
        return max(1, -(-per_tile // self.count_group)) * self.count_group

    def sorts_rows_one_per_work_item(self, rows: int, length: int) -> bool:
        """Whether `rows` rows of `length` keys are sorted one work-item per row."""
        return length <= self.one_work_item_limit and (rows > 1 or self.one_work_item_single_row)


CPU_PLAN = RadixPlan(digit_bits_by_size=((0, 11), (1 << 22, 16)), count_group=256,
                     scatter_group=1, items_per_work_item=None, tiles_per_thread=4,
                     scan_group=1, one_work_item_limit=1 << 11, one_work_item_single_row=True)
"""On the CPU a tile is walked by one work-item (see the module's docstring). A pass
costs about what its scatter's writes cost, and those miss the caches about as much for
2**8 write streams as for 2**16 (more than the hardware prefetchers follow; measured on
a 2-core x86 VM, in C as in kernelkit): wide digits, so few passes. 16-bit digits (two
passes for 32-bit keys) measured fastest for 1e7 keys there, 11-bit ones for 1e6."""

GROUP_PLAN = RadixPlan(digit_bits_by_size=((0, 4),), count_group=256, scatter_group=256,
                       items_per_work_item=7, tiles_per_thread=1, scan_group=256,
                       one_work_item_limit=1 << 8, one_work_item_single_row=False)
"""On a GPU (and any backend that runs a group's work-items side by side): tiles of 256
work-items x 7 keys, read coalesced into local memory; 4-bit digits, so that each
work-item's counts of its own run fit in local memory (16 x 256). Seven keys per
work-item: an odd stride between work-items' runs, so their reads of the staged tile
fall in different banks."""

_PLANS = {"cpu": CPU_PLAN}


def plan_for(backend) -> RadixPlan:
    """The plan `backend` sorts with: the CPU's, or the group plan for any other."""
    return _PLANS.get(getattr(backend, "name", None), GROUP_PLAN)


def threads_of(backend) -> int:
    """The threads a backend runs work-groups on (the CPU's `threads`), else 1."""
    return int(getattr(backend, "threads", 1) or 1)


# -- kernels ------------------------------------------------------------------------------

def exclusive_scan_in_group(partials, local, size):
    """Each work-item's exclusive prefix sum of `partials` (local memory, one element per
    work-item of a group of `size`, each holding its own value), by Hillis-Steele steps;
    `partials` ends up holding the inclusive sums."""
    own = partials[local]
    offset = 1
    while offset < size:
        kk.synchronize()
        addend = own * 0
        if local >= offset:
            addend = partials[local - offset]
        kk.synchronize()
        partials[local] += addend
        offset *= 2
    kk.synchronize()
    return partials[local] - own


@functools.lru_cache(maxsize=None)
def pass_kernels(plan: RadixPlan, digit_bits: int, positions: np.dtype | None):
    """The kernels of a radix pass of `digit_bits` under `plan`, carrying positions of
    that dtype (None: keys alone): (count_digits, scan_counts, scatter)."""
    with_positions = positions is not None
    radix = 1 << digit_bits
    mask = radix - 1
    count_group = plan.count_group
    scan_group = plan.scan_group
    group = plan.scatter_group
    items = plan.items_per_work_item
    tile = group * items if items is not None else 0
    staged_positions_size = tile if with_positions else 1
    position_type = positions.type if with_positions else np.int32

    @kk.kernel
    def count_digits(counts, keys: kk.Const, n, tile_size, shift):
        local = kk.index(kk.Local)
        tile_index = kk.index(kk.Group)
        tiles = kk.ngroups()[0]
        histogram = kk.localmem(np.int32, radix)
        # Loops whose trip count is the same for every work-item: the CPU runs them as
        # one loop over the group's work-items per trip.
        for first in range(0, radix, count_group):
            if first + local < radix:
                histogram[first + local] = 0
        kk.synchronize()
        start = tile_index * tile_size
        for step in range(tile_size // count_group):
            p = start + step * count_group + local
            if p < n:
                kk.atomic_add(histogram, (keys[p] >> shift) & mask, 1)
        kk.synchronize()
        for first in range(0, radix, count_group):
            if first + local < radix:
                counts[(first + local) * tiles + tile_index] = histogram[first + local]

    @kk.kernel
    def scan_counts(offsets, digit_starts, counts: kk.Const, tiles):
        local = kk.index(kk.Local)
        size = len(counts)
        running = np.int64(0)
        begin = 0
        end = size
        first_digit = 0
        # One work-item (the CPU's plan) scans in one loop: the CPU runs loops whose
        # bounds differ between work-items, or that carry values across barriers, with
        # state kept per work-item and iteration, several times slower.
        if scan_group > 1:
            per_work_item = (size + scan_group - 1) // scan_group
            begin = min(size, local * per_work_item)
            end = min(size, begin + per_work_item)
            first_digit = local
            total = np.int64(0)
            for f in range(begin, end):
                total += counts[f]
            partials = kk.localmem(np.int64, scan_group)
            partials[local] = total
            running = exclusive_scan_in_group(partials, local, scan_group)
        for f in range(begin, end):
            count = counts[f]
            offsets[f] = running
            running += count
        kk.synchronize()
        for digit in range(first_digit, radix, scan_group):
            digit_starts[digit] = offsets[digit * tiles]

    @kk.kernel
    def scatter_tile_in_sequence(keys_out, positions_out, keys_in: kk.Const,
                                 positions_in: kk.Const, offsets: kk.Const, n, tile_size,
                                 shift):
        """One work-item per group: the tile's keys in input order."""
        tile_index = kk.index(kk.Group)
        tiles = kk.ngroups()[0]
        next_position = kk.localmem(offsets.dtype, radix)
        for d in range(radix):
            next_position[d] = offsets[d * tiles + tile_index]
        start = tile_index * tile_size
        end = min(n, start + tile_size)
        for p in range(start, end):
            key = keys_in[p]
            digit = (key >> shift) & mask
            q = next_position[digit]
            next_position[digit] = q + 1
            keys_out[q] = key
            if with_positions:
                positions_out[q] = positions_in[p]

    @kk.kernel
    def scatter_staged_tile(keys_out, positions_out, keys_in: kk.Const,
                            positions_in: kk.Const, offsets: kk.Const, n, tile_size, shift):
        """`group` work-items per tile of `tile` keys, read coalesced into local memory;
        work-item w ranks the run `w * items ...` of it, so ranks follow input order.
        (`tile_size` is `tile`, an argument for the signature both scatters share.)"""
        local = kk.index(kk.Local)
        tile_index = kk.index(kk.Group)
        tiles = kk.ngroups()[0]
        staged_keys = kk.localmem(keys_in.dtype, tile)
        staged_positions = kk.localmem(position_type, staged_positions_size)
        ranks = kk.localmem(np.int32, (radix, group))
        partials = kk.localmem(np.int64, group)
        digit_base = kk.localmem(offsets.dtype, radix)
        start = tile_index * tile
        for step in range(items):
            p = start + step * group + local
            if p < n:
                staged_keys[step * group + local] = keys_in[p]
                if with_positions:
                    staged_positions[step * group + local] = positions_in[p]
        for d in range(radix):
            ranks[d, local] = 0
        kk.synchronize()
        run = local * items
        for step in range(items):
            if start + run + step < n:
                ranks[(staged_keys[run + step] >> shift) & mask, local] += 1
        kk.synchronize()
        # An exclusive scan of `ranks` in digit-major order: work-item w holds the
        # `radix` entries from w * radix on.
        first = local * radix
        own = np.int64(0)
        for f in range(first, first + radix):
            own += ranks[f // group, f % group]
        partials[local] = own
        running = exclusive_scan_in_group(partials, local, group)
        for f in range(first, first + radix):
            count = ranks[f // group, f % group]
            ranks[f // group, f % group] = running
            running += count
        kk.synchronize()
        # ranks[d, 0] is now the group's count of digits below d.
        for d in range(local, radix, group):
            digit_base[d] = offsets[d * tiles + tile_index] - ranks[d, 0]
        kk.synchronize()
        for step in range(items):
            if start + run + step < n:
                key = staged_keys[run + step]
                digit = (key >> shift) & mask
                q = digit_base[digit] + ranks[digit, local]
                ranks[digit, local] += 1
                keys_out[q] = key
                if with_positions:
                    positions_out[q] = staged_positions[run + step]

    scatter = scatter_staged_tile if items is not None else scatter_tile_in_sequence
    return count_digits, scan_counts, scatter


@functools.lru_cache(maxsize=None)
def row_kernel(with_positions: bool):
    """`sort_rows_one_per_work_item(keys, scratch_keys, positions, scratch_positions,
    key_bits)`: work-item r sorts row r of the 2-D `keys` by their low `key_bits` bits
    (and, `with_positions`, sets row r of `positions` to 0, 1, ... first and carries it),
    one 8-bit digit per pass, skipping a digit every key shares; the result ends in `keys`
    and `positions`."""
    radix = 1 << ROW_DIGIT_BITS
    mask = radix - 1

    def one_pass(keys_out, positions_out, keys_in, positions_in, row, length, shift, counts):
        """Sort row `row` by the digit at `shift` from `*_in` into `*_out`; False (and
        nothing written) where every key has the same digit."""
        for d in range(radix):
            counts[d] = 0
        for i in range(length):
            counts[(keys_in[row, i] >> shift) & mask] += 1
        if counts[(keys_in[row, 0] >> shift) & mask] == length:
            return False
        running = 0
        for d in range(radix):
            count = counts[d]
            counts[d] = running
            running += count
        for i in range(length):
            key = keys_in[row, i]
            digit = (key >> shift) & mask
            q = counts[digit]
            counts[digit] = q + 1
            keys_out[row, q] = key
            if with_positions:
                positions_out[row, q] = positions_in[row, i]
        return True

    @kk.kernel
    def sort_rows_one_per_work_item(keys, scratch_keys, positions, scratch_positions,
                                    key_bits):
        row = kk.index(kk.Global)
        length = keys.shape[1]
        counts = kk.private(np.int32, radix)
        if with_positions:
            for i in range(length):
                positions[row, i] = i
        in_scratch = False
        shift = keys.dtype(0)
        while shift < key_bits:
            if in_scratch:
                moved = one_pass(keys, positions, scratch_keys, scratch_positions, row,
                                 length, shift, counts)
            else:
                moved = one_pass(scratch_keys, scratch_positions, keys, positions, row,
                                 length, shift, counts)
            if moved:
                in_scratch = not in_scratch
            shift += ROW_DIGIT_BITS
        if in_scratch:
            for i in range(length):
                keys[row, i] = scratch_keys[row, i]
                if with_positions:
                    positions[row, i] = scratch_positions[row, i]

    return sort_rows_one_per_work_item


@kk.kernel
def count_up(positions):
    """positions[i] = i."""
    i = kk.index(kk.Global)
    positions[i] = i


# -- the host side --------------------------------------------------------------------------

def sort_rows_one_per_work_item(backend, keys, key_bits: int, with_positions: bool):
    """Sort each row of the 2-D `keys` by their low `key_bits` bits, in place, one
    work-item per row; returns where each key came from in its row (a 2-D array of
    `position_dtype`), or None without `with_positions`."""
    rows, length = keys.shape
    scratch_keys = backend.allocate(keys.dtype, keys.shape)
    shape = keys.shape if with_positions else (1, 1)
    positions = backend.allocate(position_dtype(length), shape)
    scratch_positions = backend.allocate(position_dtype(length), shape)
    row_kernel(with_positions)(backend, 64)(keys, scratch_keys, positions, scratch_positions,
                                            key_bits, ndrange=rows)
    return positions if with_positions else None


def radix_sort(backend, plan: RadixPlan, keys, key_bits: int, with_positions: bool):
    """Sort the 1-D `keys` stably by their low `key_bits` bits; returns the sorted keys and,
    where `with_positions`, the position each came from (`position_dtype`; else None).
    The passes alternate between `keys` and a scratch array: the sorted keys are in
    either."""
    n = len(keys)
    positions_type = position_dtype(n) if with_positions else None
    digit_bits = plan.digit_bits(n)
    count_digits, scan_counts, scatter = pass_kernels(plan, digit_bits, positions_type)
    tile_size = plan.tile_size(n, threads_of(backend))
    tiles = -(-n // tile_size)
    radix = 1 << digit_bits
    counts = backend.allocate(np.dtype(np.int32), (radix * tiles,))
    offsets = backend.allocate(position_dtype(n), (radix * tiles,))
    digit_starts = backend.allocate(np.dtype(np.int64), (radix,))
    scratch_keys = backend.allocate(keys.dtype, (n,))
    # Without positions, two one-element arrays stand in for them.
    positions = backend.allocate(positions_type or np.dtype(np.int32),
                                 (n if with_positions else 1,))
    scratch_positions = backend.allocate(positions.dtype, positions.shape)
    if with_positions:
        count_up(backend, 256)(positions, ndrange=n)
    key_type = keys.dtype.type
    counting = count_digits(backend, plan.count_group)
    scanning = scan_counts(backend, plan.scan_group)
    scattering = scatter(backend, plan.scatter_group)
    for lowest_bit in range(0, key_bits, digit_bits):
        shift = key_type(lowest_bit)
        counting(counts, keys, n, tile_size, shift, ndrange=tiles * plan.count_group)
        scanning(offsets, digit_starts, counts, tiles, ndrange=plan.scan_group)
        if (np.diff(kk.to_numpy(digit_starts), append=n) == n).any():
            continue   # one digit holds every key: the pass would move nothing
        scattering(scratch_keys, scratch_positions, keys, positions, offsets, n, tile_size,
                   shift, ndrange=tiles * plan.scatter_group)
        keys, scratch_keys = scratch_keys, keys
        positions, scratch_positions = scratch_positions, positions
    return keys, (positions if with_positions else None)
