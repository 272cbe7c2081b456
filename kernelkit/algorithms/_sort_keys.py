"""Radix keys: each number type's values mapped to unsigned integers whose order is
NumPy's order of the values, and back; the kernels that read an array of any shape (and
strides) into rows of keys along an axis and write rows back into an array; and the check
that an argument of a sort or a search is an array of numbers.

A key has the width of its value (a bool or an int8 makes an 8-bit key, a float64 a
64-bit one) and is held in a uint32, or a uint64 for 64-bit values, so that the radix
passes are compiled for two key types only:

- unsigned integers and bools are their own keys;
- signed integers flip the sign bit (the most negative value becomes 0);
- floats flip the sign bit of positive values and every bit of negative ones, so that
  -inf < ... < -0.0 < 0.0 < ... < inf; every NaN becomes the key of NumPy's `np.nan`,
  above +inf, so NaNs sort last and keep their input order among themselves (as in
  `np.sort` and `np.argsort(kind="stable")`). Where equal values must stay in input order
  (`argsort`, searches), -0.0 takes the key of 0.0; where values are sorted, -0.0 keeps
  a key of its own, just below 0.0, so that its sign survives the round trip.

`descending` sorts complement the keys' significant bits: larger values first, equal
ones still in input order, NaNs first. This module knows nothing of radix passes.

Along an axis, the keys of an array form a 2-D array, one row per position of the other
axes (in C order) and along the axis within a row (`row_and_position`); `axis=None`
reads the array flat into one row."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np

import kernelkit as kk

_UNSIGNED_OF_WIDTH = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
SORTABLE_KINDS = "biuf"   # bool, signed and unsigned integers, floats

MAX_DIMENSIONS = 4
"""The most dimensions an array read into rows or written back from them may have: those
of an ndrange."""


def row_and_position(index, shape, axis):
    """Where the element at `index` (a tuple) of an array of `shape` goes in its rows:
    (row, position). Along `axis`, positions are the element's index on that axis and
    rows run over the other axes in C order."""
    row = 0
    position = 0
    for a in range(len(shape)):
        if a == axis:
            position = index[a]
        else:
            row = row * shape[a] + index[a]
    return row, position


@dataclass(frozen=True, slots=True)
class KeyCodec:
    """How the values of one dtype become radix keys and back.

    - `key_of(value, equal_zeros)`: a device function, the key of one value
      (`equal_zeros` gives -0.0 the key of 0.0).
    - `keys_from_values(keys, x, flip, equal_zeros, axis)`: launched over `x`'s shape,
      writes `key_of(x[...]) ^ flip` into the 2-D `keys`, one row per position of the
      axes other than `axis` (C order), along `axis` within a row; `axis` -1 reads `x`
      flat, in C order, into one row. `flip` is 0, or `flip_mask` for a descending order.
    - `values_from_keys(out, keys, flip, axis)`: launched over `out`'s shape, the
      inverse: `out[...]` from its element of `keys` (`axis` as above, never -1)."""

    dtype: np.dtype
    key_dtype: np.dtype
    bits: int
    key_of: Callable
    keys_from_values: kk.Kernel
    values_from_keys: kk.Kernel

    @property
    def flip_mask(self):
        """The key whose bits complement a key's significant bits (a descending order)."""
        return self.key_dtype.type((1 << self.bits) - 1)


@functools.lru_cache(maxsize=None)
def key_codec(dtype: np.dtype) -> KeyCodec:
    """The codec of `dtype`, a bool, integer or float dtype (see `check_sortable`)."""
    dtype = np.dtype(dtype)
    width = 8 * dtype.itemsize
    unsigned = _UNSIGNED_OF_WIDTH[width]
    key_type = np.uint64 if width == 64 else np.uint32
    is_float, is_signed, is_bool = dtype.kind == "f", dtype.kind == "i", dtype.kind == "b"
    sign_bit = unsigned(1 << (width - 1))
    top = width - 1
    value_type = dtype.type
    nan_bits = np.array(np.nan, dtype=dtype).view(unsigned)[()] if is_float else unsigned(0)
    zero_bits = unsigned(0)

    def key_of(value, equal_zeros):
        if is_float:
            bits = kk.bitcast(value, unsigned)
            if value != value:
                bits = nan_bits
            elif equal_zeros and value == 0:
                bits = zero_bits
            if bits >> top:
                return key_type(~bits)
            return key_type(bits | sign_bit)
        if is_signed:
            return key_type(kk.bitcast(value, unsigned) ^ sign_bit)
        return key_type(value)

    def value_of(key):
        if is_bool:
            return key != 0
        bits = unsigned(key)
        if is_float:
            if bits >> top:
                bits = bits ^ sign_bit
            else:
                bits = ~bits
            return kk.bitcast(bits, value_type)
        if is_signed:
            return kk.bitcast(bits ^ sign_bit, value_type)
        return bits

    @kk.kernel
    def keys_from_values(keys, x: kk.Const, flip, equal_zeros, axis):
        index = kk.index(kk.Global, kk.NTuple)
        if axis < 0:
            row = 0
            position = kk.index(kk.Global, kk.Linear)
        else:
            row, position = row_and_position(index, x.shape, axis)
        keys[row, position] = key_of(x[index], equal_zeros) ^ flip

    @kk.kernel
    def values_from_keys(out, keys: kk.Const, flip, axis):
        index = kk.index(kk.Global, kk.NTuple)
        row, position = row_and_position(index, out.shape, axis)
        out[index] = value_of(keys[row, position] ^ flip)

    return KeyCodec(dtype, np.dtype(key_type), width, key_of, keys_from_values,
                    values_from_keys)


def check_sortable(x, function: str, argument: str = "x") -> np.dtype:
    """The dtype of `x`, once `x` is known to be an array of numbers that have radix keys;
    a TypeError that says what to pass otherwise."""
    dtype = getattr(x, "dtype", None)
    if dtype is None or not hasattr(x, "shape") or isinstance(x, np.generic):
        raise TypeError(f"ka.{function}: {argument} must be an array of a backend (a NumPy "
                        f"array for kk.CPU(), a device array for a GPU), got "
                        f"{type(x).__name__}; convert it with np.asarray({argument}) or "
                        f"kk.to_backend(backend, np.asarray({argument}))")
    dtype = np.dtype(dtype)
    if dtype.kind not in SORTABLE_KINDS or not dtype.isnative:
        hint = ("; sort the real and imaginary parts as two float arrays" if dtype.kind == "c"
                else "; convert it to the machine's byte order" if not dtype.isnative
                else "; convert it to one of those first")
        raise TypeError(f"ka.{function}: {argument} has dtype {dtype}, and only bool, "
                        f"int8..int64, uint8..uint64 and float16/32/64 arrays have radix "
                        f"keys{hint}")
    return dtype
