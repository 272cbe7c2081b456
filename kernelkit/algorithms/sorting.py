"""Sorting arrays on any backend: `sort` and `argsort`, stable radix sorts of numbers.

    import kernelkit.algorithms as ka
    ordered = ka.sort(x)                          # np.sort(x), along the last axis
    order = ka.argsort(x, axis=0)                 # np.argsort(x, axis=0, kind="stable")
    largest_first = ka.sort(x, descending=True)

Each is a few kernel launches on the backend that owns `x` (`kk.get_backend(x)`, or
`backend=`); the result is an array of that backend with NumPy's shape and dtype, ready
once the backend has run them (`kk.synchronize(backend)`; `kk.to_numpy` waits). The host
reads a few counts after each radix pass (to skip a pass that would move nothing), so a
sort of long rows returns once its last launches are queued. `x` is read in place (any
strides, up to four dimensions): nothing is copied first.

This module owns the semantics: arguments, axes, NaN and signed zeros, the order of equal
keys. How numbers become radix keys is `_sort_keys`'s; the radix passes, and how each
backend lays them out, are `_sort_radix`'s."""
from __future__ import annotations

import math

import numpy as np

import kernelkit as kk
from kernelkit.backend import get_backend

from ._reduction_layout import normalized_axis
from ._sort_keys import MAX_DIMENSIONS, check_sortable, key_codec, row_and_position
from ._sort_radix import plan_for, position_dtype, radix_sort, sort_rows_one_per_work_item


def sort(x, axis: int | None = -1, descending: bool = False, *, backend=None):
    """The elements of `x` sorted along `axis` (all of `x`, flattened, where None), as
    `np.sort(x, axis)`: NaNs last, -inf < ... < inf. `x` holds bools, integers or floats.

    A stable radix sort: equal elements keep their input order, except that -0.0 is
    placed before 0.0 (NumPy leaves their order among themselves to its algorithm; both
    keep their sign). NaNs come out as NumPy's `np.nan`. `descending=True` gives the
    reverse order, largest (and NaN) first.

        ka.sort(x)                  # along the last axis
        ka.sort(x, axis=None)       # flattened
    """
    return _sorted("sort", x, axis, descending, backend, with_positions=False)


def argsort(x, axis: int | None = -1, descending: bool = False, *, backend=None):
    """The int64 indices that sort `x` along `axis` (all of `x`, flattened, where None), as
    `np.argsort(x, axis, kind="stable")`: equal elements (-0.0 and 0.0 among them, and
    every NaN, which sorts last) keep their input order. `descending=True` puts the
    largest first, NaNs before them, equal elements still in input order.

        order = ka.argsort(keys)
    """
    return _sorted("argsort", x, axis, descending, backend, with_positions=True)


@kk.kernel
def positions_into(out, positions: kk.Const, axis):
    """out[...] = its element of the rows of `positions` (see `row_and_position`)."""
    index = kk.index(kk.Global, kk.NTuple)
    row, position = row_and_position(index, out.shape, axis)
    out[index] = positions[row, position]


def _sorted(function: str, x, axis, descending: bool, backend, with_positions: bool):
    dtype = check_sortable(x, function)
    if backend is None:
        backend = get_backend(x)
    shape = tuple(x.shape)
    size = math.prod(shape)
    if axis is None:
        out_shape, length, read_axis, write_axis = (size,), size, -1, 0
    else:
        axis = normalized_axis(axis, len(shape), function)
        out_shape, length, read_axis, write_axis = shape, shape[axis], axis, axis
    out = kk.empty(backend, np.int64 if with_positions else dtype, out_shape)
    if size == 0:
        return out
    if len(shape) > MAX_DIMENSIONS:
        raise ValueError(f"ka.{function}: x has {len(shape)} dimensions; it reads at most "
                         f"{MAX_DIMENSIONS}: reshape x (merging axes other than the sorted "
                         f"one) first")
    if not shape:   # a copy, not a view (enzyme_ext refuses views of arrays it follows)
        x, shape = kk.to_backend(backend, kk.to_numpy(x).reshape(1)), (1,)
    rows = size // length
    codec = key_codec(dtype)
    flip = codec.flip_mask if descending else codec.key_dtype.type(0)
    keys = kk.empty(backend, codec.key_dtype, (rows, length))
    # Positions stay in input order among equal keys only where -0.0 and 0.0 are equal.
    codec.keys_from_values(backend)(keys, x, flip, with_positions, read_axis, ndrange=shape)
    keys, positions = _sort_rows(backend, keys, codec.bits, with_positions)
    if with_positions:
        positions_into(backend)(out, positions, write_axis, ndrange=out_shape)
    else:
        codec.values_from_keys(backend)(out, keys, flip, write_axis, ndrange=out_shape)
    return out


def _sort_rows(backend, keys, key_bits: int, with_positions: bool):
    """Each row of the 2-D `keys` sorted, and (`with_positions`) the positions in the row
    each key came from: two 2-D arrays (the second None without positions)."""
    rows, length = keys.shape
    plan = plan_for(backend)
    if plan.sorts_rows_one_per_work_item(rows, length):
        return keys, sort_rows_one_per_work_item(backend, keys, key_bits, with_positions)
    if rows == 1:
        sorted_keys, positions = radix_sort(backend, plan, keys[0], key_bits, with_positions)
        return (sorted_keys.reshape(1, length),
                positions.reshape(1, length) if with_positions else None)
    # Long rows, one after another: each fills the backend by itself.
    all_positions = kk.empty(backend, position_dtype(length), keys.shape) \
        if with_positions else None
    for row in range(rows):
        row_keys = keys[row]
        sorted_keys, positions = radix_sort(backend, plan, row_keys, key_bits, with_positions)
        if sorted_keys is not row_keys:
            kk.copyto(row_keys, sorted_keys)
        if with_positions:
            kk.copyto(all_positions[row], positions)
    return keys, all_positions
