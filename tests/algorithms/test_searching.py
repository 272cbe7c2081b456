"""ka.searchsorted and ka.histogram against np.searchsorted and np.histogram, exactly, on
every backend: every dtype, both sides, NaN and signed zeros, mixed dtypes, any shape of
queries, empty arrays; equal bins (the range found or given, the right edge in the last
bin, NaN and values outside not counted), given edges, many bins; and the errors for bad
arguments."""
import warnings

import numpy as np
import pytest

import kernelkit as kk
import kernelkit.algorithms as ka
from kernelkit.algorithms import searching

DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
          np.uint64, np.float16, np.float32, np.float64]
FLOATS = [np.float16, np.float32, np.float64]


def numbers(dtype, n, low=-50, high=50, seed=0):
    """n values of dtype in [low, high) (bools: both), with repeats."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, n).astype(bool)
    if dtype.kind == "u":
        low = 0
    if dtype.kind == "f":
        return (rng.random(n) * (high - low) + low).astype(dtype)
    return rng.integers(low, high, n).astype(dtype)


def check_search(backend, a, v, side):
    found = ka.searchsorted(kk.to_backend(backend, a), kk.to_backend(backend, v), side,
                            backend=backend)
    found = kk.to_numpy(found)
    expected = np.searchsorted(a, v, side)
    assert found.dtype == np.int64
    assert found.shape == np.shape(expected)
    np.testing.assert_array_equal(found, expected)


def check_histogram(backend, x, bins=10, value_range=None):
    counts, edges = ka.histogram(kk.to_backend(backend, x), bins, value_range, backend=backend)
    counts, edges = kk.to_numpy(counts), kk.to_numpy(edges)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # NumPy converts bools, warning
        expected_counts, expected_edges = np.histogram(x, bins, value_range)
    assert counts.dtype == np.int64
    np.testing.assert_array_equal(counts, expected_counts)
    assert edges.dtype == expected_edges.dtype
    np.testing.assert_array_equal(edges, expected_edges)


# -- searchsorted -------------------------------------------------------------------------

@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_searchsorted_finds_numpys_index_for_every_dtype(backend, dtype, side):
    a = np.sort(numbers(dtype, 300))
    check_search(backend, a, numbers(dtype, 200, -60, 60, seed=1), side)


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_searchsorted_puts_nan_last_and_finds_either_zero_equal(backend, dtype, side):
    a = np.sort(np.array([np.nan, -np.inf, -0.0, 0.0, -0.0, 1.0, 1.0, np.inf, np.nan,
                          -2.5], dtype))
    v = np.array([np.nan, -np.nan, -0.0, 0.0, np.inf, -np.inf, 1.0, 0.5, -3.0], dtype)
    check_search(backend, a, v, side)


def test_searchsorted_compares_mixed_dtypes_in_their_common_dtype(backend):
    a = np.arange(-5, 5, dtype=np.int8)
    check_search(backend, a, np.array([-5.5, -0.5, 0.0, 0.5, 4.5, 1000.0]), "left")
    check_search(backend, np.array([0.5, 1.5, 2.5], np.float32), np.arange(4, dtype=np.int64),
                 "right")
    found = ka.searchsorted(kk.to_backend(backend, a), 1000, backend=backend)
    assert kk.to_numpy(found).shape == () and kk.to_numpy(found) == np.searchsorted(a, 1000)


def test_searchsorted_answers_in_the_shape_of_the_queries(backend):
    a = np.sort(numbers(np.float64, 1000))
    check_search(backend, a, numbers(np.float64, 2 * 3 * 4 * 5, seed=2).reshape(2, 3, 4, 5),
                 "left")
    check_search(backend, a, np.array(3.25), "right")
    check_search(backend, a, np.zeros((3, 0), np.float64), "left")


def test_searchsorted_in_an_empty_or_one_element_array(backend):
    v = np.array([-1.0, 0.0, 1.0])
    check_search(backend, np.zeros(0), v, "left")
    check_search(backend, np.zeros(1), v, "left")
    check_search(backend, np.zeros(1), v, "right")


def test_searchsorted_of_many_queries_with_repeats(backend):
    a = np.sort(numbers(np.int32, 100_003, -1000, 1000))
    check_search(backend, a, numbers(np.int32, 50_001, -1100, 1100, seed=3), "right")


# -- histogram ----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_histogram_of_equal_bins_matches_numpy_for_every_dtype(backend, dtype):
    x = numbers(dtype, 10_007)
    check_histogram(backend, x, 10)
    check_histogram(backend, x, 7, (-20, 30.5))


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_histogram_counts_the_right_edge_in_the_last_bin_and_skips_nan_and_outside(
        backend, dtype):
    x = np.array([0.0, 0.25, 0.5, 1.0, 1.0, -0.0, np.nan, 1.5, -0.5, np.inf, -np.inf, 0.75],
                 dtype)
    check_histogram(backend, x, 4, (0.0, 1.0))
    check_histogram(backend, x, 3, (0.1, 0.9))
    check_histogram(backend, x[np.isfinite(x)], 5)


def test_histogram_values_on_inner_edges_fall_in_numpys_bin(backend):
    """Values on the edges, where the bin computed from the width can be off by one and
    is corrected against the edges (as NumPy does)."""
    edges = np.histogram_bin_edges(np.zeros(0), 30, (0.1, 7.3))
    check_histogram(backend, np.repeat(edges, 3), 30, (0.1, 7.3))
    check_histogram(backend, np.linspace(-1, 1, 10_001).astype(np.float32), 333)


def test_histogram_with_given_edges_matches_numpy(backend):
    x = numbers(np.float64, 5000, -10, 10)
    check_histogram(backend, x, np.array([-8.0, -1.0, 0.0, 0.0, 2.5, 7.0, 9.0]))
    check_histogram(backend, numbers(np.int32, 5000, -10, 10), np.array([-5, 0, 3, 9]))
    check_histogram(backend, x, np.linspace(-12, 12, 3001))


def test_histogram_of_many_bins_counts_in_global_memory(backend):
    assert 5000 > searching.LOCAL_BINS
    check_histogram(backend, numbers(np.float32, 20_000), 5000)


def test_histogram_of_empty_constant_and_2d_arrays(backend):
    check_histogram(backend, np.zeros(0, np.float32))
    check_histogram(backend, np.full(100, 5, np.int64))
    check_histogram(backend, numbers(np.float32, 600).reshape(20, 30)[::2, 1::3], 6)


# -- errors -------------------------------------------------------------------------------

def test_searchsorted_refuses_a_2d_array_a_bad_side_and_a_list(backend):
    values = kk.zeros(backend, np.float64, 3)
    with pytest.raises(ValueError, match="a must be 1-D"):
        ka.searchsorted(kk.zeros(backend, np.float64, (2, 2)), values, backend=backend)
    with pytest.raises(ValueError, match="'left' or 'right'"):
        ka.searchsorted(values, values, side="middle", backend=backend)
    with pytest.raises(TypeError, match=r"np\.asarray\(a\)"):
        ka.searchsorted([1, 2, 3], values, backend=backend)
    with pytest.raises(TypeError, match="bool, int8..int64"):
        ka.searchsorted(values, np.zeros(3, np.complex64), backend=backend)


def test_histogram_refuses_bad_bins_and_a_range_it_cannot_find(backend):
    x = kk.to_backend(backend, np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="must be positive"):
        ka.histogram(x, bins=0, backend=backend)
    with pytest.raises(ValueError, match="increase monotonically"):
        ka.histogram(x, bins=np.array([1.0, 0.0, 2.0]), backend=backend)
    with pytest.raises(TypeError, match="bool, int8..int64"):
        ka.histogram(np.zeros(3, np.complex128), backend=backend)
    with pytest.raises(ValueError, match="not finite"):   # found on the backend: runs last
        ka.histogram(kk.to_backend(backend, np.array([1.0, np.nan])), backend=backend)


def test_every_search_kernel_compiles_on_every_backend(backend):
    """Each kernel launched once (a search on a compile-only backend stops at its first
    launch, so the tests above compile only that one there)."""
    def launched(launcher, *args, **geometry):
        try:
            launcher(*args, **geometry)
        except Exception as error:
            if type(error).__name__ != "CompileOnlyError":
                raise

    x = kk.zeros(backend, np.float32, 1000)
    edges = kk.to_backend(backend, np.linspace(0, 1, 11))
    counts = kk.zeros(backend, np.int64, 10)
    one = np.float64(1)
    for in_local in (True, False):
        launched(searching._count_uniform_kernel(in_local)(backend, searching.GROUP), counts,
                 x, edges, np.float64(0), one, one, np.float64(10), 10, 1, ndrange=1024)
        launched(searching._count_in_edges_kernel(in_local)(backend, searching.GROUP), counts,
                 x, edges, 10, 1, ndrange=1024)
    ranges = [kk.zeros(backend, np.float32, 4), kk.zeros(backend, np.float32, 4),
              kk.zeros(backend, np.int32, 4)]
    launched(searching._group_ranges(backend, searching.GROUP), *ranges, x, 1, ndrange=1024)
    launched(searching._search_kernel(np.dtype(np.float32))(backend, searching.GROUP),
             kk.zeros(backend, np.int64, 1000), x, x, True, 10, ndrange=(1000,))
    launched(searching._convert(backend), kk.zeros(backend, np.float64, 1000), x,
             ndrange=(1000,))
