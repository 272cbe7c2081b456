"""The kernels that scan (accumulate) along an axis, and the passes that launch them:
the classic three phases of a parallel scan.

An input is `outer` runs of `length` elements, `inner` apart (`_reduction_layout`), cut
into segments as a reduction pass cuts them (`_reduction_kernels.split`, so that the two
agree on where each segment starts). Where a run has more than one segment:

1. each segment is reduced to its total (a pass of the reduction kernels);
2. the totals are scanned, exclusively, along the segments (this same procedure, on an
   array as many times shorter as a segment is long): each segment's carry, the
   combination of everything before it in its run (and `init`);
3. each segment is scanned, starting from its carry, and written.

Step 3 is one of two kernels:

- `scan_rows` where the runs are contiguous and long: a work-group per segment, which
  goes through it a tile of TILE elements at a time. A tile is read into local memory
  (each read contiguous across the work-items), each work-item scans ITEMS consecutive
  elements of it, a scan of the work-items' totals in local memory (Hillis and Steele's,
  log2(GROUP) steps) gives each work-item what comes before its elements, and the tile
  is written out as it was read. Its last element is the next tile's carry.
- `scan_columns` otherwise: a work-item per (outer, segment, inner), scanning down its
  segment with a stride of `inner`.

Neither needs an identity: where a segment has no carry (the first of a run, without
`init`), its first element starts it. An exclusive scan writes each element's carry
in (the combination of those before it), starting from `init`. Elements are combined
in order within a work-item, in a tree across work-items: `op` must be associative."""
from __future__ import annotations

import functools
from typing import Callable

import numpy as np

import kernelkit as kk

from ._reduction_kernels import (PassKernels, ceil_div, column_segment, launch_pass, load,
                                 reduction_kernels_for, size, split, store)
from ._reduction_layout import GROUP, Layout
from ._reduction_operators import same

ITEMS = 16
"""Consecutive elements of a tile each work-item of `scan_rows` scans on its own: the
more, the fewer steps of the scan across work-items per element."""

TILE = GROUP * ITEMS

BANKS = 32
"""Banks of a GPU's local (shared) memory: a tile keeps one unused element after each
BANKS (`padded`)."""


def padded(position):
    """Where element `position` of a tile is kept. Work-item l's elements start at
    l * ITEMS, so without padding the work-items of a GPU warp would all reach the same
    few of BANKS memory banks at once (ITEMS-way conflicts, one access at a time); with
    one element skipped after each BANKS they reach different ones. (The CPU backend
    measured no cost from it.)"""
    return position + position // BANKS


PADDED_TILE = TILE + TILE // BANKS


@functools.lru_cache(maxsize=64)
def scan_kernels(f: Callable, op: Callable, accumulator: np.dtype) -> PassKernels:
    """The kernels of step 3, scanning `f(x)` by `op` in `accumulator`."""
    Accumulator = accumulator.type

    def mapped(value):
        return Accumulator(f(value))

    def combined(a, b):
        return Accumulator(op(a, b))

    def scan_totals(totals, local, workers):
        """totals[:workers] = their inclusive scan (Hillis and Steele's: each step, every
        work-item combines its total with the one `offset` before it)."""
        offset = 1
        while offset < GROUP:
            value = totals[local]
            if offset <= local < workers:
                value = combined(totals[local - offset], value)
            kk.synchronize()
            totals[local] = value
            kk.synchronize()
            offset *= 2

    @kk.kernel
    def scan_rows(out, x: kk.Const, carries: kk.Const, length, segments, init, use_init,
                  exclusive):
        """Work-group g scans segment g % segments of run g // segments, starting from
        carries[g] (or `init`, or nothing, for a run's first segment)."""
        local = kk.index(kk.Local)
        group = kk.index(kk.Group)
        length = size(length)
        segments = size(segments)
        run = group // segments
        segment = group % segments
        trips = ceil_div(length, segments * GROUP)
        skipped = segment * trips * GROUP
        count = size(min(trips * GROUP, length - skipped))
        first = run * length + skipped
        mine = local * ITEMS          # where this work-item's elements start in a tile
        tile = kk.localmem(Accumulator, PADDED_TILE)
        totals = kk.localmem(Accumulator, GROUP)
        carry = init
        has_carry = use_init
        if segment > 0:
            carry = Accumulator(load(carries, group))
            has_carry = True
        for begin in range(0, count, TILE):
            here = min(TILE, count - begin)
            for k in range(ITEMS):
                position = k * GROUP + local
                if position < here:
                    tile[padded(position)] = mapped(load(x, first + begin + position))
            kk.synchronize()
            have = min(ITEMS, max(here - mine, 0))
            running = tile[padded(mine)]
            for k in range(1, ITEMS):
                if k < have:
                    running = combined(running, tile[padded(mine + k)])
                    tile[padded(mine + k)] = running
            totals[local] = running
            kk.synchronize()
            workers = (here + ITEMS - 1) // ITEMS
            scan_totals(totals, local, workers)
            if 0 < local < workers or (local == 0 and has_carry):
                prefix = carry
                if local > 0:
                    prefix = totals[local - 1]
                    if has_carry:
                        prefix = combined(carry, prefix)
                for k in range(ITEMS):
                    if k < have:
                        tile[padded(mine + k)] = combined(prefix, tile[padded(mine + k)])
            kk.synchronize()
            for k in range(ITEMS):
                position = k * GROUP + local
                if position < here:
                    if exclusive:
                        before = carry
                        if position > 0:
                            before = tile[padded(position - 1)]
                        store(out, first + begin + position, before)
                    else:
                        store(out, first + begin + position, tile[padded(position)])
            carry = tile[padded(here - 1)]
            has_carry = True
            kk.synchronize()

    @kk.kernel
    def scan_columns(out, x: kk.Const, carries: kk.Const, length, inner, segments, init,
                     use_init, exclusive):
        """Work-item (o, s, j) (j fastest) scans segment s of the run (o, j), starting
        from carries[(o * segments + s) * inner + j] (or `init`, or nothing)."""
        item = kk.index(kk.Global)
        inner = size(inner)
        segment, skipped, count, first = column_segment(item, length, inner, segments)
        carry = init
        has_carry = use_init
        if segment > 0:
            carry = Accumulator(load(carries, item))
            has_carry = True
        value = mapped(load(x, first))
        if has_carry:
            value = combined(carry, value)
        store(out, first, carry if exclusive else value)
        for k in range(1, count):
            position = first + k * inner
            following = combined(value, mapped(load(x, position)))
            store(out, position, value if exclusive else following)
            value = following

    return PassKernels(scan_rows, scan_columns)


def scan_layout(layout: Layout, f: Callable, op: Callable, accumulator: np.dtype, out, init,
                use_init: bool, exclusive: bool) -> None:
    """Launch the passes that write into `out` (a flat run of the layout's size) the
    scan of `f(x)` by `op` along the layout's axis: inclusive, or `exclusive`; starting
    from `init` where `use_init` (an exclusive scan's first element is `init`). The
    layout's length is not 0."""
    backend = layout.backend
    runs = layout.outer * layout.inner
    init = accumulator.type(init)
    rows, segments = split(backend, runs, layout.length, layout.inner)
    if segments == 1:
        # No carry is read. The placeholder is an array of its own: a program being
        # differentiated refuses one array passed twice where one has a shadow.
        carries = backend.allocate(accumulator, (1,))
    else:
        totals = backend.allocate(accumulator, (runs * segments,))
        launch_pass(reduction_kernels_for(backend, f, op, accumulator), rows, backend,
                    (totals,), (layout.flat,), layout.length, layout.inner, runs, segments,
                    init, False)
        carries = backend.allocate(accumulator, (runs * segments,))
        scan_layout(Layout(backend, totals, accumulator, layout.outer, segments, layout.inner,
                           (layout.outer, segments, layout.inner), 1),
                    same, op, accumulator, carries, init, use_init, True)
    launch_pass(scan_kernels(f, op, accumulator), rows, backend, (out,),
                (layout.flat, carries), layout.length, layout.inner, runs, segments, init,
                use_init, exclusive)
