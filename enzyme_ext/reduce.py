"""Sums of per-work-item partials on the backend, the same bits on every run.

The reverse kernel leaves each work-item's share of an `Active` scalar's derivative in
an array; summing it with atomics would make the result depend on the order the
threads ran in. Here each work-item of a kernelkit kernel adds a fixed chunk in index
order, and the chunks' sums are summed the same way until few are left, which the host
adds in index order: the order of every addition is fixed by the indices alone, whatever
the backend and thread count."""
from __future__ import annotations

import math

import numpy as np

import kernelkit as kk

CHUNK = 64


@kk.kernel
def sum_chunks(sums, values: kk.Const, count):
    i = kk.index(kk.Global)
    start = i * CHUNK
    total = 0.0
    for j in range(CHUNK):   # a constant trip count: unrolled, no loop per work-item
        k = start + j
        if k < count:
            total += values[k]
    sums[i] = total


def deterministic_sum(backend, values) -> float:
    """The sum of the float64 array `values` (on `backend`), as a Python float: chunks
    summed on the backend until at most CHUNK values are left, which are added on the
    host in index order."""
    count = math.prod(np.shape(values))
    while count > CHUNK:
        groups = -(-count // CHUNK)
        sums = backend.allocate(np.float64, (groups,))
        sum_chunks(backend, 64)(sums, values, count, ndrange=groups)
        values, count = sums, groups
    total = 0.0
    for value in backend.to_numpy(values).reshape(-1)[:count].tolist():
        total += value
    return total
