"""Scans (prefix sums and their kin) of arrays on any backend: `cumsum` and `accumulate`,
inclusive by default or exclusive, with NumPy's arguments and result dtypes (NEP 50).

    import kernelkit.algorithms as ka
    totals = ka.cumsum(x)                         # np.cumsum(x)
    offsets = ka.cumsum(counts, exclusive=True)   # starts from 0: where each part goes
    running_max = ka.accumulate(max, x, axis=1)   # np.maximum.accumulate(x, axis=1)

Each is a few kernel launches on the backend that owns `x` (`kk.get_backend(x)`; or
`backend=`, as AcceleratedKernels.jl's keyword), asynchronous like any launch; the result
is an array of that backend, of x's shape (flattened where `axis` is None, as NumPy's).
A program that calls them is differentiated by enzyme_ext like any other launches.

This module owns the semantics (dtypes, identities, argument checks); the kernels and
their passes are in `_scan_kernels`."""
from __future__ import annotations

import numpy as np

from . import _reduction_operators as operators
from ._reduction_layout import Layout, Result, layout_of
from ._reduction_operators import Operator
from ._scan_kernels import scan_layout


def cumsum(x, axis=None, dtype=None, exclusive=False, *, backend=None):
    """The running sums of `x` along `axis` (of the flattened `x` where None), as
    `np.cumsum(x, axis, dtype)`: bools and signed integers narrower than int64 give
    int64, unsigned ones uint64, floats their own dtype; `dtype=` chooses. float16 sums
    run in float32 and each result is rounded once (NumPy rounds the running sum to
    float16 at every step, which stops growing at 2048 for a sum of ones).

    `exclusive=True` gives at each position the sum of the elements before it (0 first):
    the offsets at which parts of the sizes `x` start.

        ka.cumsum(x)                      # [x0, x0+x1, x0+x1+x2, ...]
        ka.cumsum(x, exclusive=True)      # [0, x0, x0+x1, ...]
    """
    layout = layout_of(x, axis, "cumsum", backend)
    result = np.dtype(dtype) if dtype is not None else operators.widened(layout.dtype)
    return _scan("cumsum", operators.ADD, layout, exclusive, None, result)


def accumulate(op, x, axis=None, exclusive=False, init=None, *, backend=None):
    """The running reductions of `x` by `op` along `axis` (of the flattened `x` where
    None): element i of the result combines elements 0..i (`exclusive=False`, as NumPy's
    `np.<ufunc>.accumulate`) or 0..i-1 (`exclusive=True`).

    `op` is as for `reduce`: a device function of two arguments, or one of
    `operator.add`, `operator.mul`, `min`, `max`, `operator.and_`, `operator.or_`,
    `operator.xor` (NumPy's rules: `min` and `max` propagate NaN, `add` and `mul` widen
    bools and small integers); it must be associative. `init`, where given, comes before
    the first element (`op(init, x0)` first). An exclusive scan starts from `init`, or
    where there is none, from the identity of a known `op` (0 for add, 1 for mul, +inf
    or the largest integer for min ...); an `op` of one's own needs `init` for it. The
    result's dtype is that of `op(v, v)` for `v` of x's dtype, promoted with `init`'s
    where that is a NumPy scalar.

        ka.accumulate(operator.mul, x)                     # np.cumprod(x)
        ka.accumulate(max, x, exclusive=True)              # the largest before each
        ka.accumulate(gcd, counts, init=0)                 # def gcd(a, b): ...
    """
    operator_ = operators.operator_for(op, "accumulate")
    return _scan("accumulate", operator_, layout_of(x, axis, "accumulate", backend), exclusive,
                 init)


def _scan(caller: str, op: Operator, layout: Layout, exclusive: bool, init,
          result: np.dtype | None = None):
    if op.integers_only and layout.dtype.kind == "f":
        raise TypeError(f"ka.{caller}: {op.name} takes bools and integers, and x has dtype "
                        f"{layout.dtype}")
    if result is None:
        result = operators.result_dtype(operators.same, op, layout.dtype, init, caller)
    accumulator = operators.accumulator(result)
    if exclusive and init is None:
        if op.identity is None:
            raise ValueError(f"ka.{caller}: an exclusive scan by {op.name}, which has no "
                             f"identity, starts from init; give init, the value before "
                             f"the first element")
        init = op.identity(accumulator)
    shape = layout.shape if layout.axis is not None else (layout.outer * layout.length,)
    output = Result(layout.backend, result, shape)
    if output.array.size == 0:
        return output.array
    scan_layout(layout, operators.same, op.function, accumulator, output.flat,
                0 if init is None else init, init is not None, bool(exclusive))
    return output.finish()


__all__ = ["cumsum", "accumulate"]
