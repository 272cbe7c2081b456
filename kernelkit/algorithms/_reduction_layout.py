"""How an array and an axis become what the reduction and scan kernels work on, and how
their results become arrays of the shape NumPy gives.

The kernels see every array as one flat run of elements in C order, and a reduction or
scan along an axis as `outer` runs of `length` elements, `inner` apart: the element
(o, k, j) is at flat position `(o * length + k) * inner + j`, and the axis is k (for
`axis=None`, outer = inner = 1 and length is the array's size). A 0-d or 1-d array is
its own flat run; a C-contiguous one of more dimensions is read through a flat view.

Views have one exception: a program that enzyme_ext differentiates follows its arrays
by identity and refuses a view of an array it follows. While a program is recorded
(`kernelkit.lang.kernel.OBSERVERS` is not empty), arrays of two or more dimensions are
therefore copied flat by a launch of their own (`flatten`), and results of two or more
dimensions are written flat and copied into place (`unflatten`): ordinary launches that
the recording differentiates like any other. The same `flatten` makes the contiguous copy
of an array that is not C-contiguous.

This module also decides how much parallel work a backend wants (`parallel_groups`),
from the backend's own figures. It knows no backend class."""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass

import numpy as np

import kernelkit as kk
from kernelkit.backend import get_backend
from kernelkit.ir import types as T
from kernelkit.lang.kernel import OBSERVERS

GROUP = 256
"""Work-items of a work-group in the reduction and scan kernels: a power of two (their
trees halve it), and the size GPUs run best."""

MAX_COPY_DIMENSIONS = 4
"""The most dimensions `flatten` and `unflatten` take: those of an ndrange."""


@kk.kernel
def flatten(flat, x: kk.Const):
    """flat = x's elements in C order; launched over x's shape."""
    flat[kk.index(kk.Global, kk.Linear)] = x[kk.index(kk.Global, kk.NTuple)]


@kk.kernel
def unflatten(y, flat: kk.Const):
    """y's elements = flat, in C order; launched over y's shape."""
    y[kk.index(kk.Global, kk.NTuple)] = flat[kk.index(kk.Global, kk.Linear)]


def copy_workgroup(ndim: int) -> tuple[int, ...]:
    """The work-group of `flatten` and `unflatten` over an ndrange of `ndim` axes: a row of
    GROUP along the last. Given with as many axes as the ndrange, because a recording
    program compiles a launch without a work-group size of its own for one axis."""
    return (1,) * (ndim - 1) + (GROUP,)


@dataclass(frozen=True, slots=True)
class Layout:
    """An array seen as `outer` runs of `length` elements, `inner` apart, along the
    reduced or scanned axis (see the module's docstring)."""
    backend: object
    flat: object            # the elements, 1-d in C order (or the 0-d array itself)
    dtype: np.dtype
    outer: int
    length: int
    inner: int
    shape: tuple[int, ...]  # the array's shape
    axis: int | None


def check_array(x, caller: str):
    """`x` as an array a backend owns, with a dtype kernels take; else a TypeError that
    says what to pass."""
    if isinstance(x, np.generic) or not (hasattr(x, "shape") and hasattr(x, "dtype")):
        raise TypeError(f"ka.{caller} takes an array: a NumPy array for kk.CPU(), or a "
                        f"backend's array (kk.to_backend(backend, np.asarray(values))); "
                        f"got {type(x).__name__}")
    dtype = np.dtype(x.dtype)
    if T.from_numpy(dtype) is None:
        raise TypeError(f"ka.{caller}: kernels cannot read arrays of dtype {dtype}; "
                        f"convert it to a number dtype (bool, an integer or a float) first")
    return dtype


def normalized_axis(axis, ndim: int, caller: str) -> int | None:
    """`axis` as NumPy takes it (an int, negative counting from the end, or None), as a
    non-negative int or None."""
    if axis is None:
        return None
    if isinstance(axis, (tuple, list)):
        raise TypeError(f"ka.{caller}: axis must be an int or None, got {axis!r}; for "
                        f"several axes, reduce along one after another")
    try:
        axis = operator.index(axis)
    except TypeError:
        raise TypeError(f"ka.{caller}: axis must be an int or None, got "
                        f"{type(axis).__name__}") from None
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(axis, ndim)
    return axis % ndim


def layout_of(x, axis, caller: str, backend=None) -> Layout:
    """`x` (checked) seen along `axis` by the kernels, on `backend` (by default the one
    that owns `x`)."""
    dtype = check_array(x, caller)
    shape = tuple(x.shape)
    axis = normalized_axis(axis, len(shape), caller)
    if backend is None:
        backend = get_backend(x)
    if axis is None:
        outer, length, inner = 1, math.prod(shape), 1
    else:
        outer, length, inner = math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])
    return Layout(backend, _flat(backend, x, dtype, shape, caller), dtype, outer, length,
                  inner, shape, axis)


def recording() -> bool:
    """Whether a program's launches are being recorded (by enzyme_ext), which follows
    arrays by identity: views of them must not reach a launch."""
    return bool(OBSERVERS)


def _flat(backend, x, dtype: np.dtype, shape: tuple[int, ...], caller: str):
    if len(shape) <= 1:
        return x
    if _c_contiguous(x, dtype, shape) and not recording():
        return x.reshape(-1)
    if len(shape) > MAX_COPY_DIMENSIONS:
        why = "is not C-contiguous" if not _c_contiguous(x, dtype, shape) else \
            "is in a program being differentiated, which cannot follow a flat view of it"
        raise ValueError(f"ka.{caller}: the array of shape {shape} {why}, and arrays of more "
                         f"than {MAX_COPY_DIMENSIONS} dimensions are read only through one; "
                         f"reshape it to {MAX_COPY_DIMENSIONS} dimensions or fewer first")
    flat = backend.allocate(dtype, (math.prod(shape),))
    if flat.size:
        flatten(backend, copy_workgroup(len(shape)))(flat, x, ndrange=shape)
    return flat


def _c_contiguous(x, dtype: np.dtype, shape: tuple[int, ...]) -> bool:
    strides = getattr(x, "strides", None)
    if not isinstance(strides, tuple):
        return False   # a library that keeps strides elsewhere: copied, which is always right
    step = dtype.itemsize
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if extent == 0:
            return True
        if extent != 1 and stride != step:
            return False
        step *= extent
    return True


class Result:
    """An array of `shape` for a result, and `flat`, the run the kernels write it through:
    the array itself where it has at most one dimension, else a flat view of it, or
    (while a program is recorded) a flat array that `finish` copies into it."""

    def __init__(self, backend, dtype: np.dtype, shape: tuple[int, ...]):
        self.backend = backend
        self.array = backend.allocate(dtype, shape)
        self.copied = False
        if len(shape) <= 1:
            self.flat = self.array
        elif not recording():
            self.flat = self.array.reshape(-1)
        elif len(shape) <= MAX_COPY_DIMENSIONS:
            self.flat = backend.allocate(dtype, (math.prod(shape),))
            self.copied = True
        else:
            raise ValueError(f"a result of shape {shape} has more than "
                             f"{MAX_COPY_DIMENSIONS} dimensions, which a program being "
                             f"differentiated cannot follow through a flat view; reshape the "
                             f"input to {MAX_COPY_DIMENSIONS + 1} dimensions or fewer first")

    def finish(self):
        """The result, once the kernels have written `flat`."""
        if self.copied and self.array.size:
            unflatten(self.backend, copy_workgroup(self.array.ndim))(
                self.array, self.flat, ndrange=self.array.shape)
        return self.array


def parallel_groups(backend) -> int:
    """How many work-groups of GROUP work-items keep `backend` busy. A GPU backend says
    how many such blocks fill it (`blocks_to_fill`); the CPU backend runs work-groups on
    `threads` threads, each group's work-items as a vector loop, so a few groups per
    thread (for balance when another process takes a core). A backend that says neither
    (a compile-only one) gets what a large GPU wants."""
    blocks = getattr(backend, "blocks_to_fill", None)
    if blocks:
        return int(blocks)
    threads = getattr(backend, "threads", None)
    if threads:
        return 4 * int(threads)
    return 1024
