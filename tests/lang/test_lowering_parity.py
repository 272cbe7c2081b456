"""Operations whose instruction differs between targets, on crafted edge values, against
NumPy (or, where NumPy leaves the answer to the hardware, against what kernelkit defines):
float `%`, `//` and `divmod` with large and special quotients, shifts by the width or
more, integer division by zero and INT_MIN // -1, float to integer conversions of NaN,
infinities and out-of-range values, min/max/fmin/fmax with NaN and signed zeros,
copysign, rint, and NaN signs through float16 and float32 conversions.

On a CUDA build without a GPU the kernels compile (and the compiler checks their LLVM for
instructions NVPTX would compute inexactly: `backends/cuda/exactness.py`); with a GPU
they run and must give these answers."""
import numpy as np
import pytest

import kernelkit as kk

WORKGROUP = 8


def run(backend, kernel, outputs, *inputs):
    """kernel(*outputs, *inputs) with one work-item per element; the outputs as NumPy."""
    n = len(inputs[0])
    outputs = [kk.to_backend(backend, out) for out in outputs]
    kernel(backend, WORKGROUP)(*outputs, *[kk.to_backend(backend, a) for a in inputs], ndrange=n)
    kk.synchronize(backend)
    return [kk.to_numpy(out) for out in outputs]


def assert_same_floats(actual, expected):
    """Equal values, NaN where NaN, and the sign of every zero."""
    np.testing.assert_array_equal(actual, expected)
    zeros = expected == 0
    np.testing.assert_array_equal(np.signbit(actual[zeros]), np.signbit(expected[zeros]))


@kk.kernel
def floordiv_mod_divmod(quotient, remainder, pair_quotient, pair_remainder, x: kk.Const,
                        y: kk.Const):
    i = kk.index(kk.Global)
    quotient[i] = x[i] // y[i]
    remainder[i] = x[i] % y[i]
    pair_quotient[i], pair_remainder[i] = divmod(x[i], y[i])


def large_quotients(dtype):
    """Pairs whose quotient is far from exact (x - trunc(x / y) * y is wrong for them),
    and zeros, infinities and NaNs of both signs."""
    info = np.finfo(dtype)
    rng = np.random.default_rng(7)
    big = rng.uniform(1, 2, 24) * float(info.max) / 4
    small = rng.uniform(0.05, 40, 24)
    x = np.concatenate([big, -big, small * 1e5, [3.5e38 if dtype != np.float16 else 6e4] * 4,
                        [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 5.0, -5.0, 0.0]])
    y = np.concatenate([small, small, -np.sqrt(small), [1.0, -15911.0, -10.0, 13.0],
                        [3.0, 3.0, np.inf, np.inf, 2.0, 2.0, 1.0, 0.0, 0.0, -0.0]])
    with np.errstate(over="ignore"):
        return x.astype(dtype), y.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64],
                         ids=lambda d: np.dtype(d).name)
def test_float_floordiv_mod_and_divmod_are_exact_for_large_quotients(backend, dtype):
    x, y = large_quotients(dtype)
    outputs = [np.zeros(len(x), dtype) for _ in range(4)]
    quotient, remainder, pair_quotient, pair_remainder = run(backend, floordiv_mod_divmod,
                                                             outputs, x, y)
    with np.errstate(all="ignore"):
        assert_same_floats(quotient, np.floor_divide(x, y))
        assert_same_floats(remainder, np.remainder(x, y))
    assert_same_floats(pair_quotient, quotient)
    assert_same_floats(pair_remainder, remainder)


@kk.kernel
def mod_of_scaled_index(out, divisor: kk.Const):
    i = kk.index(kk.Global)
    h = 3.5e+38 * i % divisor[i]
    out[i] = np.int16(h if -32769.0 < h < 32768.0 else np.float64(0.0))


def test_a_huge_float_remainder_converted_to_int16_matches_numpy(backend):
    divisor = np.array([1, -15911, -10, 13, 9057], np.int16)
    (out,) = run(backend, mod_of_scaled_index, [np.zeros(5, np.int16)], divisor)
    expected = np.remainder(3.5e38 * np.arange(5), divisor.astype(np.float64))
    expected = np.where(np.abs(expected) < 32768, expected, 0).astype(np.int16)
    np.testing.assert_array_equal(out, expected)
    assert out[1] == -13389 and out[4] == 7226


@kk.kernel
def shifts(left, right, x: kk.Const, amount: kk.Const):
    i = kk.index(kk.Global)
    left[i] = x[i] << amount[i]
    right[i] = x[i] >> amount[i]


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint32, np.uint64],
                         ids=lambda d: np.dtype(d).name)
def test_shifts_by_the_width_or_more_match_numpy(backend, dtype):
    bits = np.iinfo(dtype).bits
    amounts = [bits, bits + 1, 2 * bits, bits - 1, 0, 1, 127 if bits > 8 else 100]
    if np.iinfo(dtype).min < 0:
        amounts += [-1, -bits]
    values = np.array([1, 5, -8, -1, 3], np.int64).astype(dtype)
    x = np.repeat(values, len(amounts))
    amount = np.tile(np.array(amounts, np.int64).astype(dtype), len(values))
    left, right = run(backend, shifts, [np.zeros(len(x), dtype), np.zeros(len(x), dtype)],
                      x, amount)
    np.testing.assert_array_equal(left, np.left_shift(x, amount))
    np.testing.assert_array_equal(right, np.right_shift(x, amount))


@kk.kernel
def integer_floordiv_mod(quotient, remainder, x: kk.Const, y: kk.Const):
    i = kk.index(kk.Global)
    quotient[i] = x[i] // y[i]
    remainder[i] = x[i] % y[i]


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint32, np.uint64],
                         ids=lambda d: np.dtype(d).name)
def test_integer_division_by_zero_and_of_the_lowest_by_minus_one_match_numpy(backend, dtype):
    info = np.iinfo(dtype)
    x = np.array([info.min, info.max, 7, 0, info.min, info.max, 5], dtype)
    y = np.array([0, 0, 0, 0, -1 if info.min < 0 else 1, 1, 2], dtype)
    quotient, remainder = run(backend, integer_floordiv_mod,
                              [np.zeros(len(x), dtype), np.zeros(len(x), dtype)], x, y)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(quotient, np.floor_divide(x, y))
        np.testing.assert_array_equal(remainder, np.remainder(x, y))


@kk.kernel
def to_integer(out, x: kk.Const):
    i = kk.index(kk.Global)
    out[i] = x[i]


@pytest.mark.parametrize("source", [np.float16, np.float32, np.float64],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint32, np.uint64],
                         ids=lambda d: np.dtype(d).name)
def test_float_to_integer_saturates_and_gives_zero_for_nan(backend, source, dtype):
    """kernelkit's definition (NumPy leaves these to the hardware): out-of-range values and
    infinities saturate to the type's bounds, NaN is 0, the rest truncate toward zero."""
    info = np.iinfo(dtype)
    with np.errstate(over="ignore"):
        x = np.array([np.nan, -np.nan, np.inf, -np.inf, 1e300, -1e300, float(info.max) * 2,
                      float(info.min) - 1e6, 2.75, -2.75, 0.0, -0.0, 100.5], np.float64).astype(source)
    (out,) = run(backend, to_integer, [np.zeros(len(x), dtype)], x)
    wide = np.nan_to_num(x.astype(np.float64), nan=0.0, posinf=np.inf, neginf=-np.inf)
    expected = [info.max if v >= float(info.max) else info.min if v <= float(info.min)
                else int(np.trunc(v)) for v in wide]
    np.testing.assert_array_equal(out, np.array(expected, dtype=object).astype(dtype))


@kk.kernel
def minima_and_maxima(smallest, largest, smallest_f, largest_f, x: kk.Const, y: kk.Const):
    i = kk.index(kk.Global)
    smallest[i] = min(x[i], y[i])
    largest[i] = max(x[i], y[i])
    smallest_f[i] = kk.fmin(x[i], y[i])
    largest_f[i] = kk.fmax(x[i], y[i])


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_min_max_fmin_fmax_with_nan_and_signed_zeros(backend, dtype):
    """`min`/`max` are Python's (the first argument unless the second is smaller or
    larger: NaN first stays, NaN second is passed over); `fmin`/`fmax` NumPy's, the
    first of two equal zeros."""
    x = np.array([np.nan, 1.0, np.nan, 0.0, -0.0, 2.0, -np.inf], dtype)
    y = np.array([1.0, np.nan, np.nan, -0.0, 0.0, 2.0, np.inf], dtype)
    outputs = [np.zeros(len(x), dtype) for _ in range(4)]
    smallest, largest, smallest_f, largest_f = run(backend, minima_and_maxima, outputs, x, y)
    assert_same_floats(smallest, np.array([min(a, b) for a, b in zip(x, y)], dtype))
    assert_same_floats(largest, np.array([max(a, b) for a, b in zip(x, y)], dtype))
    first_unless = [a if a <= b or np.isnan(b) else b for a, b in zip(x, y)]
    assert_same_floats(smallest_f, np.array(first_unless, dtype))
    first_unless = [a if a >= b or np.isnan(b) else b for a, b in zip(x, y)]
    assert_same_floats(largest_f, np.array(first_unless, dtype))


@kk.kernel
def copysign_and_rint(signed, rounded, x: kk.Const, y: kk.Const):
    i = kk.index(kk.Global)
    signed[i] = kk.copysign(x[i], y[i])
    rounded[i] = kk.rint(x[i])


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_copysign_and_rint_match_numpy_on_halves_zeros_and_nan(backend, dtype):
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.0, -0.0, np.inf, 2.0**52 + 0.5, 1e30, np.nan,
                  -3.49999], dtype)
    y = np.array([-1.0, 1.0, -0.0, 0.0, np.nan, -np.inf, 1.0, -2.0, 1.0, -1.0, -1.0, 3.0], dtype)
    signed, rounded = run(backend, copysign_and_rint, [np.zeros(len(x), dtype),
                                                       np.zeros(len(x), dtype)], x, y)
    expected = np.copysign(x, y)
    assert_same_floats(signed, expected)
    np.testing.assert_array_equal(np.signbit(signed), np.signbit(expected))
    assert_same_floats(rounded, np.rint(x))


@kk.kernel
def narrowed(out, x: kk.Const):
    i = kk.index(kk.Global)
    out[i] = x[i]


@pytest.mark.parametrize("source, target", [(np.float32, np.float16), (np.float64, np.float16),
                                            (np.float64, np.float32)],
                         ids=["float32-float16", "float64-float16", "float64-float32"])
def test_narrowing_a_nan_keeps_its_sign_and_payload_top_bits(backend, source, target):
    """As NumPy's `astype` does (x86's conversions): quieted, sign kept, the top bits of
    the payload kept."""
    bits = {np.float32: np.uint32, np.float64: np.uint64}[source]
    patterns = {np.float32: [0x7FC00000, 0xFFC00000, 0x7FC12345, 0xFFE00001, 0x7F800001],
                np.float64: [0x7FF8000000000000, 0xFFF8000000000000, 0xFFF4567800000000,
                             0x7FF0000000000001]}[source]
    x = np.array(patterns, bits).view(source)
    (out,) = run(backend, narrowed, [np.zeros(len(x), target)], x)
    expected = x.astype(target)
    width = {np.float16: np.uint16, np.float32: np.uint32}[target]
    np.testing.assert_array_equal(out.view(width), expected.view(width))
    np.testing.assert_array_equal(np.signbit(out), np.signbit(x))
