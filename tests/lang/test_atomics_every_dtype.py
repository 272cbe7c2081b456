"""Every atomic on every dtype it accepts, on every backend, against NumPy: each
work-item updates one of a few cells (so work-items contend), and the cells end as the
sequential updates leave them. Float atomic min and max ignore NaN values (as
`np.fmin`/`np.fmax` reduce) whatever the order."""
import numpy as np
import pytest

import kernelkit as kk

N = 1000
CELLS = 4
WORKGROUP = 64
WIDE = [np.int32, np.int64, np.uint32, np.uint64, np.float32, np.float64]


@kk.kernel
def update(add, sub, smallest, largest, swapped, values: kk.Const):
    i = kk.index(kk.Global)
    cell = i % 4
    kk.atomic_add(add, cell, values[i])
    kk.atomic_sub(sub, cell, values[i])
    kk.atomic_min(smallest, cell, values[i])
    kk.atomic_max(largest, cell, values[i])
    kk.atomic_exchange(swapped, cell, values[i])


@kk.kernel
def bits(anded, ored, xored, values: kk.Const):
    i = kk.index(kk.Global)
    cell = i % 4
    kk.atomic_and_(anded, cell, values[i])
    kk.atomic_or_(ored, cell, values[i])
    kk.atomic_xor(xored, cell, values[i])


@kk.kernel
def add_and_sub(add, sub, values: kk.Const):
    i = kk.index(kk.Global)
    kk.atomic_add(add, i % 4, values[i])
    kk.atomic_sub(sub, i % 4, values[i])


def launch(backend, kernel, outputs, values):
    outputs = [kk.to_backend(backend, out) for out in outputs]
    kernel(backend, WORKGROUP)(*outputs, kk.to_backend(backend, values), ndrange=len(values))
    kk.synchronize(backend)
    return [kk.to_numpy(out) for out in outputs]


def values_of(dtype):
    rng = np.random.default_rng(5)
    if np.dtype(dtype).kind == "f":
        # small integers: every order of additions gives the same exact sum
        return rng.integers(-40, 40, N).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -2**40), min(info.max, 2**40), N, endpoint=True).astype(dtype)


def per_cell(function, values, start):
    cells = [np.concatenate([np.array([start]).astype(values.dtype), values[c::CELLS]])
             for c in range(CELLS)]
    return np.array([function.reduce(cell, dtype=values.dtype) for cell in cells], values.dtype)


@pytest.mark.parametrize("dtype", WIDE, ids=lambda d: np.dtype(d).name)
def test_add_sub_min_max_exchange_on_every_wide_dtype(backend, dtype):
    values = values_of(dtype)
    zeros = np.zeros(CELLS, dtype)
    high = np.full(CELLS, np.finfo(dtype).max if np.dtype(dtype).kind == "f" else np.iinfo(dtype).max,
                   dtype)
    low = np.full(CELLS, -high[0] if np.dtype(dtype).kind == "f" else np.iinfo(dtype).min, dtype)
    add, sub, smallest, largest, swapped = launch(
        backend, update, [zeros.copy(), zeros.copy(), high.copy(), low.copy(),
                          np.full(CELLS, 7, dtype)], values)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(add, per_cell(np.add, values, 0))
        np.testing.assert_array_equal(sub, -per_cell(np.add, values, 0))
    np.testing.assert_array_equal(smallest, per_cell(np.minimum, values, high[0]))
    np.testing.assert_array_equal(largest, per_cell(np.maximum, values, low[0]))
    for c in range(CELLS):   # some work-item's value was swapped in last
        assert swapped[c] in values[c::CELLS]


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64],
                         ids=lambda d: np.dtype(d).name)
def test_and_or_xor_on_every_integer_dtype(backend, dtype):
    values = values_of(dtype)
    ones = np.full(CELLS, np.iinfo(dtype).max if np.iinfo(dtype).min == 0 else -1, dtype)
    anded, ored, xored = launch(backend, bits, [ones.copy(), np.zeros(CELLS, dtype),
                                                np.zeros(CELLS, dtype)], values)
    np.testing.assert_array_equal(anded, per_cell(np.bitwise_and, values, ones[0]))
    np.testing.assert_array_equal(ored, per_cell(np.bitwise_or, values, 0))
    np.testing.assert_array_equal(xored, per_cell(np.bitwise_xor, values, 0))


def test_float16_atomic_add_and_sub(backend):
    values = values_of(np.float16)[:200]   # sums stay integers float16 holds exactly
    add, sub = launch(backend, add_and_sub, [np.zeros(CELLS, np.float16),
                                             np.zeros(CELLS, np.float16)], values)
    np.testing.assert_array_equal(add, per_cell(np.add, values, 0))
    np.testing.assert_array_equal(sub, -per_cell(np.add, values, 0))


@kk.kernel
def extremes(smallest, largest, values: kk.Const):
    i = kk.index(kk.Global)
    kk.atomic_min(smallest, 0, values[i])
    kk.atomic_max(largest, 0, values[i])


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_float_atomic_min_and_max_pass_over_nan(backend, dtype):
    values = np.array([3.0, np.nan, -2.0, np.nan, 5.0, 1.0] * 20, dtype)
    smallest, largest = launch(backend, extremes, [np.full(1, np.nan, dtype),
                                                   np.full(1, np.nan, dtype)], values)
    assert smallest[0] == -2.0 and largest[0] == 5.0
