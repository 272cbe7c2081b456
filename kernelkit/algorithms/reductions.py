"""Reductions of arrays on any backend: `reduce`, `mapreduce`, `sum`, `min`, `max`,
`argmin`, `argmax`, `any`, `all`, with NumPy's arguments, result dtypes (NEP 50), NaN
rules and errors.

    import kernelkit.algorithms as ka
    total = ka.sum(x)                 # an array of shape () on x's backend
    peaks = ka.max(x, axis=0)
    norm2 = ka.mapreduce(square, operator.add, x)   # def square(v): return v * v

Each is a few kernel launches on the backend that owns `x` (`kk.get_backend(x)`; or
`backend=`, as AcceleratedKernels.jl's keyword), asynchronous like any launch; the result
is an array of that backend (of shape () where `axis` is None, as CuPy gives). A program
that calls them is differentiated by enzyme_ext like any other launches: `sum(x)` passes
ones back to `x`.

This module owns the semantics (dtypes, empty inputs, NaN, argument checks); the
kernels and their passes are in `_reduction_kernels`, the operators and their
identities in `_reduction_operators`, the views of arrays in `_reduction_layout`."""
from __future__ import annotations

from typing import Callable

import numpy as np

import kernelkit as kk

from . import _reduction_operators as operators
from ._reduction_kernels import arg_reduce_layout, reduce_layout
from ._reduction_layout import Layout, Result, layout_of
from ._reduction_operators import Operator


def reduce(op, x, axis=None, init=None, *, backend=None):
    """The reduction of `x` by `op` along `axis` (all of `x` where None), as NumPy's
    `np.<ufunc>.reduce(x, axis, initial=init)`.

    `op` is a device function of two arguments (a plain Python function a kernel can
    call, such as `def add(a, b): return a + b`) or one of `operator.add`,
    `operator.mul`, `min`, `max`, `operator.and_`, `operator.or_`, `operator.xor` (or
    NumPy's `np.add`, `np.minimum` ...), which reduce as NumPy's ufuncs do: `min` and
    `max` propagate NaN, `add` and `mul` compute bools and small integers in int64
    (uint64 for unsigned ones). `op` must be associative and commutative: elements are
    combined in no particular order (and floating-point sums by a tree, about as
    accurate as NumPy's pairwise summation).

    `init`, where given, is combined with the result once, first (`op(init, ...)`), and
    is the result where there are no elements to reduce; there, an `op` without an
    identity (one's own, `min`, `max`) needs it. Elsewhere no identity is needed: the
    first element starts the reduction.

    The result's dtype is that of `op(v, v)` for `v` of `x`'s dtype (computed on the host
    with NumPy scalars, whose promotion is the kernels'), promoted with `init`'s where
    that is a NumPy scalar.

        ka.reduce(operator.mul, x)                       # np.prod(x)
        ka.reduce(max, x, axis=1)                        # np.maximum.reduce(x, axis=1)
        def gcd(a, b):
            while b != 0:
                a, b = b, a % b
            return a
        ka.reduce(gcd, counts, init=0)                   # an op of one's own
    """
    operator_ = operators.operator_for(op, "reduce")
    return _reduce("reduce", operators.same, operator_, layout_of(x, axis, "reduce", backend),
                   init)


def mapreduce(f, op, x, axis=None, init=None, *, backend=None):
    """The reduction by `op` of `f` of each element of `x`, along `axis`, without
    storing `f(x)`: `reduce(op, f(x), axis, init)`. `f` is a device function of one
    argument (a plain Python function a kernel can call); `op` and `init` are as for
    `reduce`, and the result's dtype is that of `op(f(v), f(v))`.

        def square(v):
            return v * v
        ka.mapreduce(square, operator.add, x)            # np.sum(x * x)
    """
    f = operators.mapping_for(f, "mapreduce")
    operator_ = operators.operator_for(op, "mapreduce")
    return _reduce("mapreduce", f, operator_, layout_of(x, axis, "mapreduce", backend), init)


def sum(x, axis=None, dtype=None, *, backend=None):   # noqa: A001 - NumPy's name
    """The sum of the elements of `x` along `axis` (all of them where None), as
    `np.sum(x, axis, dtype)`: bools and signed integers narrower than int64 sum to
    int64, unsigned ones to uint64, floats to their own dtype (float16 is added in
    float32 and rounded once); `dtype=` chooses the type to sum in and give. An empty
    sum is 0. Floating-point sums are trees of partial sums, about as accurate as
    NumPy's pairwise summation; NaN and infinities propagate.

        ka.sum(x)              # shape ()
        ka.sum(x, axis=-1)     # one sum per row
    """
    layout = layout_of(x, axis, "sum", backend)
    result = np.dtype(dtype) if dtype is not None else operators.widened(layout.dtype)
    return _reduce("sum", operators.same, operators.ADD, layout, None, result)


def min(x, axis=None, *, backend=None):   # noqa: A001 - NumPy's name
    """The smallest element of `x` along `axis`, as `np.min`: NaN where any element is
    NaN; a ValueError where there are no elements to take it from."""
    layout = layout_of(x, axis, "min", backend)
    return _reduce("min", operators.same, operators.MINIMUM, layout, None, layout.dtype)


def max(x, axis=None, *, backend=None):   # noqa: A001 - NumPy's name
    """The largest element of `x` along `axis`, as `np.max`: NaN where any element is
    NaN; a ValueError where there are no elements to take it from."""
    layout = layout_of(x, axis, "max", backend)
    return _reduce("max", operators.same, operators.MAXIMUM, layout, None, layout.dtype)


def any(x, axis=None, *, backend=None):   # noqa: A001 - NumPy's name
    """Whether any element of `x` along `axis` is nonzero (NaN is), as `np.any`: a bool
    array; False where there are none."""
    return _reduce("any", operators.is_nonzero, operators.BITWISE_OR,
                   layout_of(x, axis, "any", backend), None, np.dtype(np.bool_))


def all(x, axis=None, *, backend=None):   # noqa: A001 - NumPy's name
    """Whether every element of `x` along `axis` is nonzero (NaN is), as `np.all`: a
    bool array; True where there are none."""
    return _reduce("all", operators.is_nonzero, operators.BITWISE_AND,
                   layout_of(x, axis, "all", backend), None, np.dtype(np.bool_))


def argmin(x, axis=None, *, backend=None):
    """The index of the smallest element of `x` along `axis` (in the flattened array
    where None), as `np.argmin`: int64, the first of equal elements, the first NaN
    where there is one; a ValueError where there are no elements."""
    return _arg_reduce("argmin", operators.smaller_for_argmin,
                       layout_of(x, axis, "argmin", backend))


def argmax(x, axis=None, *, backend=None):
    """The index of the largest element of `x` along `axis` (in the flattened array
    where None), as `np.argmax`: int64, the first of equal elements, the first NaN
    where there is one; a ValueError where there are no elements."""
    return _arg_reduce("argmax", operators.larger_for_argmax,
                       layout_of(x, axis, "argmax", backend))


# -- shared by the reductions ------------------------------------------------------------------

def _reduce(caller: str, f: Callable, op: Operator, layout: Layout, init,
            result: np.dtype | None = None):
    """The reduction of f(x) by `op`; `result` is its dtype, or None for `op(f(v), f(v))`'s
    (and `init`'s)."""
    if op.integers_only and f is operators.same and layout.dtype.kind == "f":
        raise TypeError(f"ka.{caller}: {op.name} takes bools and integers, and x has dtype "
                        f"{layout.dtype}")
    if result is None:
        result = operators.result_dtype(f, op, layout.dtype, init, caller)
    accumulator = operators.accumulator(result)
    shape = _reduced_shape(layout)
    if layout.outer * layout.inner == 0:
        return kk.empty(layout.backend, result, shape)
    if layout.length == 0:
        return kk.full(layout.backend, result, shape, _empty_value(caller, op, accumulator,
                                                                    init))
    output = Result(layout.backend, result, shape)
    reduce_layout(layout, f, op.function, accumulator, output.flat,
                  0 if init is None else init, init is not None)
    return output.finish()


def _arg_reduce(caller: str, replaces: Callable, layout: Layout):
    shape = _reduced_shape(layout)
    if layout.outer * layout.inner == 0:
        return kk.empty(layout.backend, np.int64, shape)
    if layout.length == 0:
        raise ValueError(f"attempt to get {caller} of an empty sequence")
    output = Result(layout.backend, np.dtype(np.int64), shape)
    arg_reduce_layout(layout, replaces, output.flat)
    return output.finish()


def _reduced_shape(layout: Layout) -> tuple[int, ...]:
    if layout.axis is None:
        return ()
    return layout.shape[:layout.axis] + layout.shape[layout.axis + 1:]


def _empty_value(caller: str, op: Operator, accumulator: np.dtype, init):
    """What reducing no elements gives: `init`, or NumPy's identity of `op`."""
    if init is not None:
        return init
    if op.reduces_empty:
        return op.identity(accumulator)
    if op.identity is not None:   # minimum, maximum: NumPy's message
        raise ValueError(f"zero-size array to reduction operation {op.name} which has no "
                         f"identity")
    raise ValueError(f"ka.{caller}: there are no elements to reduce along the axis, and "
                     f"{op.name} has no identity; give init, the value to start from")


__all__ = ["reduce", "mapreduce", "sum", "min", "max", "argmin", "argmax", "any", "all"]
