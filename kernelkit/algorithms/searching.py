"""Searching arrays on any backend: `searchsorted` (binary search in a sorted array) and
`histogram` (counts of values in bins), with NumPy's arguments, dtypes, NaN rules and
errors.

    import kernelkit.algorithms as ka
    where = ka.searchsorted(edges, values)          # np.searchsorted(edges, values)
    counts, edges = ka.histogram(samples, bins=64)  # np.histogram(samples, bins=64)

Each is a few kernel launches on the backend that owns the arrays (`kk.get_backend`, or
`backend=`); results are arrays of that backend, ready once it has run them
(`kk.synchronize(backend)`; `kk.to_numpy` waits). Values are compared in NumPy's order,
through the radix keys of `_sort_keys`: NaN above everything (and equal to NaN), -0.0
equal to 0.0.

This module owns the semantics and the kernels of both functions; a histogram's edges
are NumPy's own (`np.histogram_bin_edges`), computed on the host from the range."""
from __future__ import annotations

import functools
import math
import numbers

import numpy as np

import kernelkit as kk
from kernelkit.backend import get_backend

from ._sort_keys import MAX_DIMENSIONS, check_sortable, key_codec

GROUP = 256
"""Work-items of a histogram or range work-group (a power of two: the range's tree
halves it)."""

LOCAL_BINS = 2048
"""A histogram of at most this many bins is counted in each work-group's local memory
first (then one atomic add per bin per group); one of more bins adds to the global
counts directly."""


# -- searchsorted ---------------------------------------------------------------------------

def searchsorted(a, v, side: str = "left", *, backend=None):
    """Where the values `v` would go in the sorted 1-D array `a` to keep it sorted, as
    `np.searchsorted(a, v, side)`: for each value, the first index i with
    `v <= a[i]` (side "left") or `v < a[i]` (side "right"), else `len(a)`. An int64 array
    of v's shape (shape () for a number). `a` and `v` are compared in their common dtype
    (`np.result_type`), in NumPy's order (NaNs last); `a` must be sorted so (`ka.sort`).

        bins = ka.searchsorted(edges, samples, side="right")
    """
    a_dtype = check_sortable(a, "searchsorted", "a")
    if len(a.shape) != 1:
        raise ValueError(f"ka.searchsorted: a must be 1-D (a sorted array), got shape "
                         f"{tuple(a.shape)}; sort and search each row, or flatten a")
    if side not in ("left", "right"):
        raise ValueError(f"ka.searchsorted: side must be 'left' or 'right', got {side!r}")
    if backend is None:
        backend = get_backend(a)
    if isinstance(v, (numbers.Number, np.generic)):
        v = kk.to_backend(backend, np.asarray(v))
    v_dtype = check_sortable(v, "searchsorted", "v")
    common = np.result_type(a_dtype, v_dtype)
    shape = tuple(v.shape)
    out = kk.empty(backend, np.int64, shape)
    if math.prod(shape) == 0:
        return out
    if len(shape) > MAX_DIMENSIONS:
        raise ValueError(f"ka.searchsorted: v has {len(shape)} dimensions, at most "
                         f"{MAX_DIMENSIONS} are read; reshape v first")
    a = _converted(backend, a, common)
    v = _converted(backend, v, common)
    search = _search_kernel(common)(backend, GROUP)
    steps = len(a).bit_length()
    if shape:
        search(out, a, v, side == "right", steps, ndrange=shape)
    else:
        search(out.reshape(1), a, _flat(backend, v), side == "right", steps, ndrange=1)
    return out


@functools.lru_cache(maxsize=None)
def _search_kernel(dtype: np.dtype):
    """`search(out, a, v, right, steps)`, launched over v's shape: a binary search per
    value, `steps` (len(a).bit_length()) halvings of the range left for all of them, so
    that work-items step together (a CPU vectorizes the steps across work-items)."""
    key_of = key_codec(dtype).key_of

    @kk.kernel
    def search(out, a: kk.Const, v: kk.Const, right, steps):
        index = kk.index(kk.Global, kk.NTuple)
        key = key_of(v[index], True)
        last = len(a) - 1
        first = 0
        count = len(a)   # the range left: a[first:first + count]
        for _ in range(steps):
            half = count // 2
            middle = min(first + half, last)
            probe = key_of(a[middle], True)
            after = count > 0 and (probe < key or (right and probe == key))
            first = middle + 1 if after else first
            count = count - half - 1 if after else half
        out[index] = first

    return search


@kk.kernel
def _convert(out, x: kk.Const):
    """out[...] = x[...], converted as NumPy's assignment converts."""
    index = kk.index(kk.Global, kk.NTuple)
    out[index] = x[index]


def _converted(backend, x, dtype: np.dtype):
    """`x` in `dtype` (itself where it has that dtype)."""
    if np.dtype(x.dtype) == dtype:
        return x
    return _copy(backend, x, dtype)


def _copy(backend, x, dtype: np.dtype):
    """A C-contiguous copy of `x` (of at most MAX_DIMENSIONS), converted to `dtype`."""
    if not x.shape:   # one number: converted on the host
        return kk.to_backend(backend, np.asarray(kk.to_numpy(x), dtype))
    out = kk.empty(backend, dtype, tuple(x.shape))
    if math.prod(x.shape):
        _convert(backend)(out, x, ndrange=tuple(x.shape))
    return out


def _flat(backend, x):
    """x's elements in C order, as a 1-D array: x itself where it is 1-D, else a copy
    (never a view of x: a program that enzyme_ext differentiates refuses views of the
    arrays it follows)."""
    if len(x.shape) == 1:
        return x
    if not x.shape:
        return kk.to_backend(backend, kk.to_numpy(x).reshape(1))
    return _copy(backend, x, np.dtype(x.dtype)).reshape(-1)


# -- histogram ------------------------------------------------------------------------------

def histogram(x, bins=10, range=None, *, backend=None):   # noqa: A002 - NumPy's name
    """The counts of the values of `x` (all of it, flattened) in bins, and the bins'
    edges, as `np.histogram(x, bins, range)`: `bins` equal bins over `range` (by default
    x's smallest and largest values), or the bins between the increasing edges of the
    1-D array `bins`. Each bin holds the values from its left edge up to its right one,
    the last bin its right edge too; values outside and NaNs are not counted. The counts
    are int64; the edges have NumPy's dtype (x's float dtype, else float64, for equal
    bins; `bins`' own for given edges). Both are arrays of x's backend.

        counts, edges = ka.histogram(samples, bins=64, range=(0.0, 1.0))
    """
    dtype = check_sortable(x, "histogram")
    if backend is None:
        backend = get_backend(x)
    if dtype.kind == "b":
        dtype = np.dtype(np.uint8)   # as NumPy counts bools
    if len(x.shape) > MAX_DIMENSIONS:
        raise ValueError(f"ka.histogram: x has {len(x.shape)} dimensions, at most "
                         f"{MAX_DIMENSIONS} are read; reshape x first")
    size = math.prod(x.shape)
    if isinstance(bins, (numbers.Integral, np.integer)) and not isinstance(bins, bool):
        if bins <= 0:
            raise ValueError(f"ka.histogram: `bins` must be positive, when an integer (got "
                             f"{bins}); give the number of equal bins, or their edges")
        return _uniform_histogram(backend, _flat(backend, x), dtype, size, int(bins), range)
    edges = np.asarray(kk.to_numpy(bins) if hasattr(bins, "shape") else bins)
    if edges.ndim != 1 or edges.size < 2 or edges.dtype.kind not in "iuf":
        raise ValueError(f"ka.histogram: bins must be a positive int, or a 1-D array of at "
                         f"least two increasing numbers (the edges), got {bins!r}")
    if np.any(edges[:-1] > edges[1:]):
        raise ValueError("ka.histogram: `bins` must increase monotonically, when an array")
    counts = kk.zeros(backend, np.int64, len(edges) - 1)
    if size:
        common = np.result_type(dtype, edges.dtype)
        kernel = _count_in_edges_kernel(len(edges) - 1 <= LOCAL_BINS)
        groups, items = _layout(backend, size)
        kernel(backend, GROUP)(counts, _flat(backend, x),
                               kk.to_backend(backend, edges.astype(common)), len(edges) - 1,
                               items, ndrange=groups * GROUP)
    return counts, kk.to_backend(backend, edges)


def _uniform_histogram(backend, x, dtype: np.dtype, size: int, bins: int, value_range):
    """`histogram` of `bins` equal bins, `x` flat."""
    if value_range is None:
        if size == 0:
            value_range = (0, 1)   # NumPy's
        else:
            low, high = _value_range(backend, x, size)
            if not (np.isfinite(low) and np.isfinite(high)):
                raise ValueError(f"autodetected range of [{low}, {high}] is not finite; give "
                                 f"ka.histogram a range=(low, high) of finite numbers (NaNs are "
                                 f"then not counted)")
            value_range = (dtype.type(low), dtype.type(high))
    # NumPy's edges, from NumPy: the same dtype (from the range's and x's) and values.
    edges = np.histogram_bin_edges(np.empty(0, dtype), bins, range=value_range)
    first, last = edges.dtype.type(edges[0]), edges.dtype.type(edges[-1])
    counts = kk.zeros(backend, np.int64, bins)
    if size:
        kernel = _count_uniform_kernel(bins <= LOCAL_BINS)
        groups, items = _layout(backend, size)
        scale = edges.dtype.type(bins)
        kernel(backend, GROUP)(counts, x, kk.to_backend(backend, edges), first, last,
                               last - first, scale, bins, items, ndrange=groups * GROUP)
    return counts, kk.to_backend(backend, edges)


def _layout(backend, size: int) -> tuple[int, int]:
    """(work-groups, elements per work-item) for reading `size` elements: a few groups per
    thread of a CPU, the groups that fill a GPU (`blocks_to_fill`), else 1024."""
    threads = getattr(backend, "threads", None)
    wanted = getattr(backend, "blocks_to_fill", None) or (4 * threads if threads else 1024)
    groups = max(1, min(int(wanted), -(-size // GROUP)))
    return groups, -(-size // (groups * GROUP))


def _group_counts(local_counts, counts, bins, local):
    """Add a group's `local_counts` into the global `counts`: one atomic per bin."""
    kk.synchronize()
    for b in range(local, bins, GROUP):
        if local_counts[b] != 0:
            kk.atomic_add(counts, b, np.int64(local_counts[b]))


@functools.lru_cache(maxsize=None)
def _count_uniform_kernel(in_local: bool):
    """Counts of values in `bins` equal bins: each value's bin computed as NumPy computes
    it (its offset from the first edge over the width, times the bins), then corrected by
    one against the edges themselves."""
    local_size = LOCAL_BINS if in_local else 1

    @kk.kernel
    def count_uniform(counts, x: kk.Const, edges: kk.Const, first, last, width, scale, bins,
                      items):
        local = kk.index(kk.Local)
        start = kk.index(kk.Group) * GROUP * items
        size = len(x)
        local_counts = kk.localmem(np.int32, local_size)
        if in_local:
            for b in range(local, bins, GROUP):
                local_counts[b] = 0
            kk.synchronize()
        for step in range(items):
            p = start + step * GROUP + local
            if p < size:
                value = edges.dtype(x[p])
                if value >= first and value <= last:
                    bin_index = min(int((value - first) / width * scale), bins - 1)
                    if value < edges[bin_index]:
                        bin_index -= 1
                    elif bin_index != bins - 1 and value >= edges[bin_index + 1]:
                        bin_index += 1
                    if in_local:
                        kk.atomic_add(local_counts, bin_index, 1)
                    else:
                        kk.atomic_add(counts, bin_index, np.int64(1))
        if in_local:
            _group_counts(local_counts, counts, bins, local)

    return count_uniform


@functools.lru_cache(maxsize=None)
def _count_in_edges_kernel(in_local: bool):
    """Counts of values between given edges: each value's bin by a binary search."""
    local_size = LOCAL_BINS if in_local else 1

    @kk.kernel
    def count_in_edges(counts, x: kk.Const, edges: kk.Const, bins, items):
        local = kk.index(kk.Local)
        start = kk.index(kk.Group) * GROUP * items
        size = len(x)
        local_counts = kk.localmem(np.int32, local_size)
        if in_local:
            for b in range(local, bins, GROUP):
                local_counts[b] = 0
            kk.synchronize()
        for step in range(items):
            p = start + step * GROUP + local
            if p < size:
                value = edges.dtype(x[p])
                if value >= edges[0] and value <= edges[bins]:
                    # The last edge at or below the value; the right edge is in the last bin.
                    low = 0
                    high = bins
                    while high - low > 1:
                        middle = (low + high) // 2
                        if edges[middle] <= value:
                            low = middle
                        else:
                            high = middle
                    if in_local:
                        kk.atomic_add(local_counts, low, 1)
                    else:
                        kk.atomic_add(counts, low, np.int64(1))
        if in_local:
            _group_counts(local_counts, counts, bins, local)

    return count_in_edges


@kk.kernel
def _group_ranges(lows, highs, nans, x: kk.Const, items):
    """Each group's smallest and largest value (NaNs aside) and whether it saw a NaN."""
    local = kk.index(kk.Local)
    group = kk.index(kk.Group)
    start = group * GROUP * items
    size = len(x)
    low = x[0]
    high = low
    seen_nan = False
    for step in range(items):
        p = start + step * GROUP + local
        if p < size:
            value = x[p]
            if value != value:
                seen_nan = True
            elif value < low or low != low:
                low = value
            if value > high or high != high:
                high = value
    local_lows = kk.localmem(x.dtype, GROUP)
    local_highs = kk.localmem(x.dtype, GROUP)
    local_nans = kk.localmem(np.int32, GROUP)
    local_lows[local] = low
    local_highs[local] = high
    local_nans[local] = 1 if seen_nan else 0
    active = GROUP // 2
    while active > 0:
        kk.synchronize()
        if local < active:
            local_lows[local] = min(local_lows[local], local_lows[local + active])
            local_highs[local] = max(local_highs[local], local_highs[local + active])
            local_nans[local] = max(local_nans[local], local_nans[local + active])
        active //= 2
    kk.synchronize()
    if local == 0:
        lows[group] = local_lows[0]
        highs[group] = local_highs[0]
        nans[group] = local_nans[0]


def _value_range(backend, x, size: int):
    """x's smallest and largest values, as NumPy scalars; NaN for both where x holds a
    NaN (as `np.min` and `np.max` give)."""
    groups, items = _layout(backend, size)
    lows = kk.empty(backend, x.dtype, groups)
    highs = kk.empty(backend, x.dtype, groups)
    nans = kk.empty(backend, np.int32, groups)
    _group_ranges(backend, GROUP)(lows, highs, nans, x, items, ndrange=groups * GROUP)
    if kk.to_numpy(nans).any():
        return np.nan, np.nan
    return kk.to_numpy(lows).min(), kk.to_numpy(highs).max()
