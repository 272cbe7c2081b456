"""The kernels that reduce along an axis, and the passes that launch them until one value
per output is left.

An input is `outer` runs of `length` elements, `inner` apart (`_reduction_layout`). A
pass splits each run into `segments` and reduces each segment to one value, writing
(outer, segments, inner) partial results; the next pass reduces those, until a pass has
one segment and writes the result. Two kernels do a pass:

- `reduce_rows` where the runs are contiguous (inner == 1) and long: a work-group per
  segment, each work-item reading every GROUP-th element from its own (so that a
  group's reads are contiguous: coalesced on a GPU, a vector load on the CPU), then a
  tree in local memory combines the group's values.
- `reduce_columns` otherwise: a work-item per (outer, segment, inner), reading down its
  segment with a stride of `inner` (neighbouring work-items read neighbouring elements).

Each work-item combines its elements in chunks of CHUNK, each chunk on its own and then
into the work-item's running value, and the work-items of a group combine by a tree, as
do the passes: a float sum's rounding errors grow with CHUNK, the number of chunks a
work-item has (its share of the elements over CHUNK) and the logarithm of the number of
work-items, not with the count of elements, much as in NumPy's pairwise summation (for
10**7 float32 elements on the CPU, about as accurate as NumPy's). No operation needs an
identity: a work-item starts from its first element, and the tree combines only the
work-items that hold one (every segment holds at least one element). Elements are
combined in no particular order, so `op` must be associative and commutative.

Kernels are made per (f, op, accumulator dtype) and kept, so that a reduction called
again launches what it compiled before.

The arg-reductions (`argmin`, `argmax`) carry (value, index) pairs through the same
passes (`arg_reduction_kernels`)."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np

import kernelkit as kk

from ._reduction_layout import GROUP, Layout, parallel_groups
from ._reduction_operators import same

CHUNK = 32
"""Elements (or trips of a group) a work-item combines before folding them into its
running value: a bound on the roundings one value goes through."""

MIN_ROW_TRIPS = 8
"""Trips of GROUP elements a work-group of `reduce_rows` makes at least: below this, a
pass more costs more than the parallelism gives."""

MIN_COLUMN_RUN = 64
"""Elements a work-item of `reduce_columns` reduces at least."""


# -- helpers the kernels call --------------------------------------------------------------

def size(value):
    """A size or count passed to a kernel, as its indices use it. `max(value, 0)` changes
    nothing for a size, but says it is never negative: array indices built from it then
    skip Python's counting from the end, a compare and select per access that on the CPU
    turns a group's contiguous vector load into a gather."""
    return max(value, 0)


def ceil_div(a, b):
    """ceil(a / b) for sizes a >= 0 and b > 0, never negative (see `size`)."""
    return size((a + b - 1) // b)


def column_segment(item, length, inner, segments):
    """Where work-item (o, s, j) (j fastest) of a pass over columns works: its segment
    s of the run (o, j) of `length` elements `inner` apart, cut into `segments`; the
    run's elements before that segment, how many the segment has, and the position of
    its first element."""
    length = size(length)
    inner = size(inner)
    segments = size(segments)
    segment = (item // inner) % segments
    run = item // inner // segments
    per_segment = ceil_div(length, segments)
    skipped = segment * per_segment
    count = size(min(per_segment, length - skipped))
    return segment, skipped, count, (run * length + skipped) * inner + item % inner


def load(x, position):
    """The element of a flat run at `position` (`x` is 1-d, or 0-d with one element)."""
    if x.ndim == 0:
        return x[()]
    return x[position]


def store(out, position, value):
    """Write the element of a flat run at `position` (`out` is 1-d, or 0-d)."""
    if out.ndim == 0:
        out[()] = value
    else:
        out[position] = value


# -- plain reductions ---------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class PassKernels:
    """The two kernels of a pass, which take the same arguments after the arrays: `rows`
    (a work-group per segment of contiguous runs) and `columns` (a work-item per
    segment of strided ones)."""
    rows: kk.Kernel
    columns: kk.Kernel


def chunk_length(backend) -> Callable:
    """The device function giving a whole chunk's length, CHUNK, in the kernels for
    `backend`: as a constant on a GPU, so that the chunk is unrolled and its loads are
    in flight at once; on the CPU as `min(CHUNK, end)` (CHUNK wherever a whole chunk is
    left, but known only at launch), so that the chunk stays a loop. A CPU group's
    work-items are a vector loop: inside an unrolled chunk, each vector of work-items
    read its 32 elements from 32 rows a kilobyte apart, and `ka.sum` of 10**8 float32
    read 20 GB/s where a loop over the rows, one row of the group at a time, reads
    33 GB/s on the same two cores. The elements are combined in the same order either
    way."""
    if isinstance(backend, kk.CPU):
        return _chunk_known_at_launch
    return _chunk_constant


def _chunk_constant(end):
    return CHUNK


def _chunk_known_at_launch(end):
    return size(min(CHUNK, end))


def reduction_kernels_for(backend, f: Callable, op: Callable,
                          accumulator: np.dtype) -> PassKernels:
    """`reduction_kernels` as they run best on `backend` (see `chunk_length`)."""
    return reduction_kernels(f, op, accumulator, chunk_length(backend))


@functools.lru_cache(maxsize=128)
def reduction_kernels(f: Callable, op: Callable, accumulator: np.dtype,
                      chunk: Callable = _chunk_constant) -> PassKernels:
    """The kernels of a pass of the reduction of `f(x)` by `op` in `accumulator`, whose
    whole chunks are `chunk(end)` elements long (`chunk_length`)."""
    Accumulator = accumulator.type

    def mapped(value):
        return Accumulator(f(value))

    def combined(a, b):
        return Accumulator(op(a, b))

    def combine_strided(value, x, first, stride, begin, end):
        """`value` combined with the elements first + k * stride of x, for k in
        [begin, end), in chunks of CHUNK: each chunk is combined on its own, then into
        `value`. On a GPU a whole chunk's loads are a constant number, which the compiler
        unrolls: they are all in flight at once, where a loop's would wait for each other;
        on the CPU the chunk stays a loop (`chunk_length`). The last, partial chunk is
        guarded element by element, the whole ones are not (on the CPU, a guarded load is
        a masked one)."""
        whole = size(end - begin) // CHUNK
        length = chunk(end)
        for trip in range(whole):
            start = begin + trip * CHUNK
            part = mapped(load(x, first + start * stride))
            for k in range(1, length):
                part = combined(part, mapped(load(x, first + (start + k) * stride)))
            value = combined(value, part)
        start = begin + whole * CHUNK
        if start < end:
            part = mapped(load(x, first + start * stride))
            for k in range(1, CHUNK):
                if start + k < end:
                    part = combined(part, mapped(load(x, first + (start + k) * stride)))
            value = combined(value, part)
        return value

    def combine_in_group(scratch, local, holding):
        """scratch[0] = the combination of scratch[:holding], by a tree: each step, the
        first half of the work-items combine their values with the second half's."""
        kk.synchronize()
        active = GROUP // 2
        while active > 0:
            if local < active and local + active < holding:
                scratch[local] = combined(scratch[local], scratch[local + active])
            kk.synchronize()
            active //= 2

    @kk.kernel
    def reduce_rows(out, x: kk.Const, length, segments, init, use_init):
        """Work-group g reduces segment g % segments of run g // segments into out[g]."""
        local = kk.index(kk.Local)
        group = kk.index(kk.Group)
        length = size(length)
        segments = size(segments)
        run = group // segments
        segment = group % segments
        trips = ceil_div(length, segments * GROUP)
        skipped = segment * trips * GROUP
        count = size(min(trips * GROUP, length - skipped))
        first = run * length + skipped + local
        full = count // GROUP        # trips on which every work-item has an element
        holding = min(count, GROUP)  # work-items with at least one element
        value = init                 # (a placeholder where the work-item has none)
        if local < holding:
            value = mapped(load(x, first))
        value = combine_strided(value, x, first, GROUP, 1, full)
        if full > 0 and local < count - full * GROUP:
            value = combined(value, mapped(load(x, first + full * GROUP)))
        scratch = kk.localmem(Accumulator, GROUP)
        scratch[local] = value
        combine_in_group(scratch, local, holding)
        if local == 0:
            total = scratch[0]
            if use_init:
                total = combined(init, total)
            store(out, group, total)

    @kk.kernel
    def reduce_columns(out, x: kk.Const, length, inner, segments, init, use_init):
        """Work-item (o, s, j) (j fastest) reduces segment s of the run (o, j) into
        out[(o * segments + s) * inner + j]."""
        item = kk.index(kk.Global)
        inner = size(inner)
        segment, skipped, count, first = column_segment(item, length, inner, segments)
        value = combine_strided(mapped(load(x, first)), x, first, inner, 1, count)
        if use_init:
            value = combined(init, value)
        store(out, item, value)

    return PassKernels(reduce_rows, reduce_columns)


def split(backend, runs: int, length: int, inner: int) -> tuple[bool, int]:
    """How a pass over `runs` runs of `length` elements, `inner` apart, goes: whether by
    `reduce_rows` (contiguous runs long enough for a work-group), and into how many
    segments each run is cut so that the backend is busy. No segment is empty: the
    kernels give each segment ceil(length / segments) elements (rounded up to whole
    trips of GROUP for rows), and the count returned is the least that covers a run so."""
    if inner == 1 and length >= GROUP:
        wanted = -(-parallel_groups(backend) // runs)
        most = -(-length // (GROUP * MIN_ROW_TRIPS))
        segments = max(1, min(wanted, most))
        trips = -(-length // (segments * GROUP))
        return True, -(-length // (trips * GROUP))
    wanted = -(-parallel_groups(backend) * GROUP // runs)
    most = -(-length // MIN_COLUMN_RUN)
    segments = max(1, min(wanted, most))
    per_segment = -(-length // segments)
    return False, -(-length // per_segment)


def launch_pass(kernels: PassKernels, rows: bool, backend, out, x, length: int,
                inner: int, runs: int, segments: int, *scalars) -> None:
    """One pass of `kernels` (plain or arg-reductions, or scans: kernels of the same
    parameters after the arrays), `rows` or columns, writing `out`."""
    if rows:
        kernels.rows(backend, GROUP)(*out, *x, length, segments, *scalars,
                                     ndrange=runs * segments * GROUP)
    else:
        kernels.columns(backend, GROUP)(*out, *x, length, inner, segments, *scalars,
                                        ndrange=runs * segments)


def reduce_layout(layout: Layout, f: Callable, op: Callable, accumulator: np.dtype, out,
                  init, use_init: bool) -> None:
    """Launch the passes that write into `out` (a flat run of outer * inner elements, or
    0-d) the reduction of `f(x)` by `op` along the layout's axis, combined with `init`
    first where `use_init`. The layout's length is not 0."""
    backend = layout.backend
    x, length, runs = layout.flat, layout.length, layout.outer * layout.inner
    init = accumulator.type(init)
    while True:
        rows, segments = split(backend, runs, length, layout.inner)
        last = segments == 1
        partial = out if last else backend.allocate(accumulator, (runs * segments,))
        launch_pass(reduction_kernels_for(backend, f, op, accumulator), rows, backend,
                    (partial,), (x,), length, layout.inner, runs, segments, init,
                    use_init and last)
        if last:
            return
        x, length, f = partial, segments, same


# -- arg-reductions ---------------------------------------------------------------------------

@functools.lru_cache(maxsize=32)
def arg_reduction_kernels(replaces: Callable, dtype: np.dtype, indexed: bool
                          ) -> PassKernels:
    """The kernels of a pass of an arg-reduction of values of `dtype`, carrying (value,
    index) pairs. `replaces(candidate, value)` says whether a value replaces one that
    comes before it (`smaller_for_argmin` ...): a work-item meets its elements in order,
    so that is all it asks; the tree between work-items orders pairs by it and then by
    index. The first pass (`indexed` False) reads the input, whose indices are the
    positions along the axis; later passes read the pairs earlier passes wrote (each
    work-item still meets them in order of their indices)."""
    Value = dtype.type

    def index_of(indices, position, k):
        if indexed:
            return load(indices, position)
        return k

    def precedes(value, index, other, other_index):
        """Whether (value, index) is chosen over (other, other_index)."""
        return replaces(value, other) or (not replaces(other, value) and index < other_index)

    def combine_in_group(values, indices, local, holding):
        """(values[0], indices[0]) = the pair chosen among the first `holding`, by a tree."""
        kk.synchronize()
        active = GROUP // 2
        while active > 0:
            if local < active and local + active < holding and \
                    precedes(values[local + active], indices[local + active],
                             values[local], indices[local]):
                values[local] = values[local + active]
                indices[local] = indices[local + active]
            kk.synchronize()
            active //= 2

    @kk.kernel
    def arg_reduce_rows(out_values, out_indices, x: kk.Const, x_indices: kk.Const, length,
                        segments):
        """`reduce_rows` for pairs."""
        local = kk.index(kk.Local)
        group = kk.index(kk.Group)
        length = size(length)
        segments = size(segments)
        run = group // segments
        segment = group % segments
        trips = ceil_div(length, segments * GROUP)
        skipped = segment * trips * GROUP
        count = size(min(trips * GROUP, length - skipped))
        first = run * length + skipped + local
        full = count // GROUP
        holding = min(count, GROUP)
        value = Value(0)
        index = np.int64(0)
        if local < holding:
            value = Value(load(x, first))
            index = np.int64(index_of(x_indices, first, skipped + local))
        for trip in range(1, full):
            candidate = Value(load(x, first + trip * GROUP))
            if replaces(candidate, value):
                value = candidate
                index = np.int64(index_of(x_indices, first + trip * GROUP,
                                          skipped + trip * GROUP + local))
        if full > 0 and local < count - full * GROUP:
            candidate = Value(load(x, first + full * GROUP))
            if replaces(candidate, value):
                value = candidate
                index = np.int64(index_of(x_indices, first + full * GROUP,
                                          skipped + full * GROUP + local))
        values = kk.localmem(Value, GROUP)
        indices = kk.localmem(np.int64, GROUP)
        values[local] = value
        indices[local] = index
        combine_in_group(values, indices, local, holding)
        if local == 0:
            store(out_values, group, values[0])
            store(out_indices, group, indices[0])

    @kk.kernel
    def arg_reduce_columns(out_values, out_indices, x: kk.Const, x_indices: kk.Const, length,
                           inner, segments):
        """`reduce_columns` for pairs."""
        item = kk.index(kk.Global)
        inner = size(inner)
        segment, skipped, count, first = column_segment(item, length, inner, segments)
        value = Value(load(x, first))
        index = np.int64(index_of(x_indices, first, skipped))
        for k in range(1, count):
            candidate = Value(load(x, first + k * inner))
            if replaces(candidate, value):
                value = candidate
                index = np.int64(index_of(x_indices, first + k * inner, skipped + k))
        store(out_values, item, value)
        store(out_indices, item, index)

    return PassKernels(arg_reduce_rows, arg_reduce_columns)


def arg_reduce_layout(layout: Layout, replaces: Callable, out_indices) -> None:
    """Launch the passes that write into `out_indices` (int64, a flat run of outer * inner
    elements, or 0-d) the position along the layout's axis of the element chosen by
    `replaces` (see `arg_reduction_kernels`). The layout's length is not 0."""
    backend = layout.backend
    x = indices = layout.flat
    length, runs, indexed = layout.length, layout.outer * layout.inner, False
    while True:
        rows, segments = split(backend, runs, length, layout.inner)
        last = segments == 1
        values = backend.allocate(layout.dtype, (runs * segments,))
        positions = out_indices if last else backend.allocate(np.dtype(np.int64),
                                                                   (runs * segments,))
        launch_pass(arg_reduction_kernels(replaces, layout.dtype, indexed), rows, backend,
                    (values, positions), (x, indices), length, layout.inner, runs, segments)
        if last:
            return
        x, indices, length, indexed = values, positions, segments, True
