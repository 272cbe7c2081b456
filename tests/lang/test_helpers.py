"""kk.clamp, kk.lerp and kk.sign in kernels on every backend, checked against NumPy and
against the same functions called on the host: values at the edges (infinities, NaN,
signed zeros, the integer extremes) and the result types the language's promotion gives."""
import numpy as np
import pytest

import kernelkit as kk

WORKGROUP = 16


def run(backend, kernel, out_dtypes, *inputs):
    """kernel(*outputs, *inputs) with one work-item per element; the outputs as NumPy."""
    n = len(inputs[0])
    outputs = [kk.zeros(backend, dtype, n) for dtype in out_dtypes]
    kernel(backend, WORKGROUP)(*outputs, *(kk.to_backend(backend, a) for a in inputs),
                               ndrange=n)
    kk.synchronize(backend)
    return [kk.to_numpy(out) for out in outputs]


def assert_same_floats(actual, expected):
    """Equal bit for bit up to NaN payloads: the same values, NaNs and signs of zero."""
    np.testing.assert_array_equal(actual, expected)
    np.testing.assert_array_equal(np.signbit(actual), np.signbit(expected))


def edge_values(dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        info = np.finfo(dtype)
        return np.array([-3.5, -1.0, -0.25, -0.0, 0.0, 0.25, 1.0, 3.5, info.max, -info.max,
                         info.smallest_subnormal, -info.smallest_subnormal, np.inf, -np.inf,
                         np.nan], dtype)
    info = np.iinfo(dtype)
    return np.array([info.min, info.min + 1, -7, -1, 0, 1, 7, info.max - 1, info.max], dtype)


# --- clamp ---------------------------------------------------------------------------------


@kk.kernel
def clamp_arrays(out, x: kk.Const, lo: kk.Const, hi: kk.Const):
    i = kk.index(kk.Global)
    out[i] = kk.clamp(x[i], lo[i], hi[i])


@kk.kernel
def clamp_to_python_floats(out, x: kk.Const):
    i = kk.index(kk.Global)
    out[i] = kk.clamp(x[i], -0.1, 0.1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32],
                         ids=lambda d: np.dtype(d).name)
def test_clamp_is_min_of_max_and_matches_numpys_clip(backend, dtype):
    x = edge_values(dtype)
    lo = np.full_like(x, -1)
    hi = np.full_like(x, 7 if np.dtype(dtype).kind == "i" else 1)
    (out,) = run(backend, clamp_arrays, [dtype], x, lo, hi)
    host = np.array([kk.clamp(*values) for values in zip(x, lo, hi)], dtype)
    if np.dtype(dtype).kind == "f":
        assert_same_floats(out, host)
    np.testing.assert_array_equal(out, host)
    np.testing.assert_array_equal(out, np.clip(x, lo, hi))


def test_clamp_ignores_a_nan_bound_and_gives_hi_where_lo_is_above_hi(backend):
    x = np.array([5.0, -5.0, 0.5, 0.5, np.nan], np.float64)
    lo = np.array([np.nan, 0.0, 2.0, 0.0, 0.0], np.float64)
    hi = np.array([1.0, np.nan, 1.0, 1.0, 1.0], np.float64)
    (out,) = run(backend, clamp_arrays, [np.float64], x, lo, hi)
    np.testing.assert_array_equal(out, [1.0, 0.0, 1.0, 0.5, np.nan])
    np.testing.assert_array_equal(out, [kk.clamp(*values) for values in zip(x, lo, hi)])


def test_clamp_of_a_float32_to_python_float_bounds_stays_float32(backend):
    x = np.array([-1.0, 0.05, 1.0], np.float32)
    (out,) = run(backend, clamp_to_python_floats, [np.float64], x)
    # A float64 result would hold 0.1 itself; a float32 one holds the nearest float32.
    np.testing.assert_array_equal(out, np.array([-0.1, 0.05, 0.1], np.float32))
    assert out[2] != 0.1


# --- lerp ----------------------------------------------------------------------------------


@kk.kernel
def lerp_arrays(out, a: kk.Const, b: kk.Const, t: kk.Const):
    i = kk.index(kk.Global)
    out[i] = kk.lerp(a[i], b[i], t[i])


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_lerp_is_a_plus_t_times_b_minus_a_bit_for_bit(backend, dtype):
    rng = np.random.default_rng(4)
    n = 200
    a = rng.uniform(-100, 100, n).astype(dtype)
    b = rng.uniform(-100, 100, n).astype(dtype)
    t = np.concatenate([[0, 1, -0.5, 1.5], rng.uniform(0, 1, n - 4)]).astype(dtype)
    (out,) = run(backend, lerp_arrays, [dtype], a, b, t)
    expected = a + t * (b - a)
    assert expected.dtype == dtype
    assert_same_floats(out, expected)
    assert_same_floats(out[:1], a[:1])
    # The values tell rounding operation by operation from a fused multiply-add (here
    # its float32 result, computed through float64), which rounds once for two.
    if dtype == np.float32:
        fused = (a.astype(np.float64) + t.astype(np.float64) * (b - a)).astype(dtype)
        assert np.count_nonzero(fused != expected) > 0


def test_lerp_at_the_edges_follows_ieee_arithmetic(backend):
    a = np.array([0.0, 1.0, -np.inf, 2.0, np.nan, 1e308], np.float64)
    b = np.array([1.0, 1.0, np.inf, 4.0, 1.0, -1e308], np.float64)
    t = np.array([np.nan, 1e300, 0.5, np.inf, 0.5, 0.5], np.float64)
    (out,) = run(backend, lerp_arrays, [np.float64], a, b, t)
    with np.errstate(invalid="ignore", over="ignore"):
        expected = a + t * (b - a)
    assert_same_floats(out, expected)
    assert np.isnan(out[0]) and out[1] == 1.0 and out[3] == np.inf and out[5] == -np.inf


def test_lerp_of_int32_endpoints_with_a_float32_t_is_float64(backend):
    a = np.array([0, 16777217, -5], np.int32)
    b = np.array([16777217, 0, 5], np.int32)
    t = np.array([1.0, 0.0, 0.5], np.float32)
    (out,) = run(backend, lerp_arrays, [np.float64], a, b, t)
    expected = a + t * (b - a)
    assert expected.dtype == np.float64
    np.testing.assert_array_equal(out, expected)
    assert out[0] == 16777217   # not representable in float32


# --- sign ----------------------------------------------------------------------------------


@kk.kernel
def sign_of(out, x: kk.Const):
    i = kk.index(kk.Global)
    out[i] = kk.sign(x[i])


@kk.kernel
def sign_plus_small_float(out, x: kk.Const):
    i = kk.index(kk.Global)
    out[i] = kk.sign(x[i]) + 1e-10


@kk.kernel
def sign_plus_127(out, x: kk.Const):
    i = kk.index(kk.Global)
    out[i] = kk.sign(x[i]) + 127


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int8, np.uint32],
                         ids=lambda d: np.dtype(d).name)
def test_sign_matches_numpys_sign_including_nan_and_zeros(backend, dtype):
    x = edge_values(dtype) if np.dtype(dtype).kind != "u" else \
        np.array([0, 1, 7, np.iinfo(dtype).max], dtype)
    (out,) = run(backend, sign_of, [dtype], x)
    expected = np.sign(x)
    if np.dtype(dtype).kind == "f":
        assert_same_floats(out, expected)
        assert not np.signbit(out[x == 0]).any()   # sign(-0.0) is +0.0
    else:
        np.testing.assert_array_equal(out, expected)
    host = [kk.sign(value) for value in x]
    np.testing.assert_array_equal(np.array(host, dtype), expected)


def test_sign_keeps_its_arguments_type(backend):
    # float32: 1 + 1e-10 rounds to 1; in float64 it would not.
    (out,) = run(backend, sign_plus_small_float, [np.float64], np.array([2.0, -2.0], np.float32))
    np.testing.assert_array_equal(out, [1.0, -1.0])
    # int8: 1 + 127 wraps to -128; in a wider type it would be 128.
    (out,) = run(backend, sign_plus_127, [np.int64], np.array([5, -5, 0], np.int8))
    np.testing.assert_array_equal(out, [-128, 126, 127])


def test_sign_of_a_bool_is_an_error_as_in_numpy(backend):
    with pytest.raises(kk.CompileError, match="bools cannot be subtracted"):
        run(backend, sign_of, [np.bool_], np.array([True, False]))


def test_the_helpers_give_numpy_scalars_the_values_kernels_give():
    assert kk.clamp(np.float32(1.5), 0.0, 1.0) == 1.0
    assert kk.clamp(-7, 0, 10) == 0
    assert kk.lerp(np.float32(2.0), np.float32(4.0), np.float32(0.25)) == np.float32(2.5)
    assert kk.sign(np.float32(-2.5)) == -1
    assert kk.sign(np.int8(0)) == 0
    assert np.isnan(kk.sign(np.float64(np.nan)))
    assert not np.signbit(kk.sign(np.float64(-0.0)))
