"""float16 in kernels, on every backend, checked against NumPy: a store of any dtype or
Python scalar into a float16 array converts as `astype` does (round to nearest, ties to
even, once: float64 -> float32 -> float16 would round twice), a float16 value stored into
any dtype converts as `astype` does, and float16 arithmetic stays float16 (NEP 50) with
NumPy's results.

On the CPU, float64 -> float16 (and, without F16C, every float16 conversion) is a call to
a helper LLVM expects from a runtime library (`backends/cpu/runtime_library.py`); on CUDA
these are instructions."""
import numpy as np
import pytest

import kernelkit as kk

INTEGER_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
SOURCE_DTYPES = [np.bool_] + INTEGER_DTYPES + [np.float16, np.float32, np.float64]
WORKGROUP = 256


@kk.kernel
def store(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i]


@kk.kernel
def fill(y, value):
    i = kk.index(kk.Global)
    y[i] = value


@kk.kernel
def fill_with_a_tenth(y):
    i = kk.index(kk.Global)
    y[i] = 0.1


@kk.kernel
def twice(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = 2.0 * x[i]


@kk.kernel
def scaled(tenth, third, by_value, x: kk.Const, value):
    i = kk.index(kk.Global)
    tenth[i] = x[i] * 0.1
    third[i] = x[i] / 3.0
    by_value[i] = value * x[i]


@kk.kernel
def four_ops(total, difference, product, quotient, a: kk.Const, b: kk.Const):
    i = kk.index(kk.Global)
    total[i] = a[i] + b[i]
    difference[i] = a[i] - b[i]
    product[i] = a[i] * b[i]
    quotient[i] = a[i] / b[i]


def launch(backend, kernel, outputs, *inputs):
    """kernel(*outputs, *inputs) over the first array's length; the outputs as NumPy."""
    n = next(len(a) for a in outputs + list(inputs) if isinstance(a, np.ndarray))
    outputs = [kk.to_backend(backend, out) for out in outputs]
    args = [kk.to_backend(backend, a) if isinstance(a, np.ndarray) else a for a in inputs]
    kernel(backend, WORKGROUP)(*outputs, *args, ndrange=n)
    kk.synchronize(backend)
    return [kk.to_numpy(out) for out in outputs]


def every_finite_half() -> np.ndarray:
    halves = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    return halves[np.isfinite(halves)]


def values_to_round_to_half(dtype) -> np.ndarray:
    """Values of `dtype` where converting to float16 can go wrong: every float16 value,
    every point halfway between two and the `dtype` values next to it, the overflow and
    underflow boundaries, infinities and NaN; every integer of a small dtype, and those
    that float16 cannot hold exactly for a wider one."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.array([False, True])
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        if info.bits <= 16:
            return np.arange(info.min, info.max + 1).astype(dtype)
        wide = np.arange(max(info.min, -70_000), 70_001).astype(dtype)
        return np.concatenate([wide, np.array([info.min, info.max, info.max - 1], dtype)])
    halves = np.unique(every_finite_half().astype(np.float64))
    halfway = (halves[:-1] + halves[1:]) / 2
    special = [65504.0, 65519.0, 65520.0, 2.0**-24, 2.0**-25, 3 * 2.0**-26, 1e-30, 1e30,
               np.inf, -np.inf, np.nan, -0.0]
    with np.errstate(over="ignore"):
        exact = np.concatenate([halves, halfway, special, np.negative(special)]).astype(dtype)
        values = [exact, np.nextafter(exact, dtype.type(np.inf)),
                  np.nextafter(exact, dtype.type(-np.inf)), [np.finfo(dtype).smallest_subnormal]]
    if dtype == np.float64:
        # Rounded to float32 first, these land exactly halfway between two float16 values.
        float32_step = np.spacing(halfway.astype(np.float32)).astype(np.float64)
        values += [halfway + float32_step / 4, halfway - float32_step / 4]
    return np.concatenate(values).astype(dtype)


def expected_half(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(np.float16)


def assert_same_halves(actual: np.ndarray, expected: np.ndarray) -> None:
    """Equal as values, with the sign of every zero and NaN."""
    assert actual.dtype == expected.dtype
    np.testing.assert_array_equal(actual, expected)
    np.testing.assert_array_equal(np.signbit(actual), np.signbit(expected))


@pytest.mark.parametrize("dtype", SOURCE_DTYPES, ids=lambda d: np.dtype(d).name)
def test_storing_any_dtype_into_float16_matches_numpy_astype(backend, dtype):
    x = values_to_round_to_half(dtype)
    (y,) = launch(backend, store, [np.zeros(len(x), np.float16)], x)
    assert_same_halves(y, expected_half(x))


def test_float64_values_that_round_twice_through_float32_store_correctly(backend):
    x = values_to_round_to_half(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        twice_rounded = x.astype(np.float32).astype(np.float16)
    wrong = np.flatnonzero(twice_rounded != expected_half(x))
    assert len(wrong) > 1000   # the values discriminate
    (y,) = launch(backend, store, [np.zeros(len(x), np.float16)], x)
    assert_same_halves(y[wrong], expected_half(x)[wrong])


@pytest.mark.parametrize("value", [
    0, 1, -1, 2049, 2051, 65504, 65519, 65520, -65520, 10**6, 2**62,
    0.1, 1 / 3, -0.0, 2.0**-25, 2.0**-25 + 2.0**-60, 65519.99, 65520.0, 1e300, 5e-324,
    float("inf"), float("-inf"), float("nan"),
], ids=repr)
def test_storing_a_python_scalar_into_float16_matches_numpy(backend, value):
    (y,) = launch(backend, fill, [np.zeros(5, np.float16)], value)
    assert_same_halves(y, expected_half(np.full(5, value)))


def test_storing_a_float_literal_into_float16_matches_numpy(backend):
    (y,) = launch(backend, fill_with_a_tenth, [np.zeros(5, np.float16)])
    assert_same_halves(y, np.full(5, np.float16(0.1)))


@pytest.mark.parametrize("dtype", SOURCE_DTYPES, ids=lambda d: np.dtype(d).name)
def test_storing_float16_into_any_dtype_matches_numpy_astype(backend, dtype):
    x = every_finite_half()
    if np.dtype(dtype).kind in "iu":
        # Beyond the integer range (and for NaN) NumPy's result is undefined; the next
        # test checks that float16 converts there as the float32 of the same value does.
        info = np.iinfo(dtype)
        wide = x.astype(np.float64)
        x = x[(wide > info.min - 1) & (wide < info.max + 1)]
    else:
        x = np.concatenate([x, np.array([np.inf, -np.inf, np.nan], np.float16)])
    (y,) = launch(backend, store, [np.zeros(len(x), dtype)], x)
    expected = x.astype(dtype)
    np.testing.assert_array_equal(y, expected)
    if np.dtype(dtype).kind == "f":
        np.testing.assert_array_equal(np.signbit(y), np.signbit(expected))


@pytest.mark.parametrize("dtype", INTEGER_DTYPES, ids=lambda d: np.dtype(d).name)
def test_float16_out_of_an_integer_range_converts_as_the_same_float32_value(backend, dtype):
    x = np.concatenate([every_finite_half(), np.array([np.inf, -np.inf, np.nan], np.float16)])
    (from_half,) = launch(backend, store, [np.zeros(len(x), dtype)], x)
    (from_single,) = launch(backend, store, [np.zeros(len(x), dtype)], x.astype(np.float32))
    np.testing.assert_array_equal(from_half, from_single)


def random_halves(seed: int, n: int = 20_000) -> np.ndarray:
    """float16 values of every magnitude (subnormal to near overflow), both signs."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 0x7C00, n).astype(np.uint16) | (rng.integers(0, 2, n) << 15).astype(np.uint16)
    return np.concatenate([bits.view(np.float16), np.array([0.0, -0.0, 65504, np.inf, np.nan],
                                                            np.float16)])


def test_float16_times_a_python_float_stays_float16_and_matches_numpy(backend):
    x = random_halves(0)
    (y,) = launch(backend, twice, [np.zeros(len(x), np.float16)], x)
    with np.errstate(over="ignore"):
        assert_same_halves(y, 2.0 * x)


def test_float16_with_weak_python_floats_rounds_the_scalar_to_float16_first(backend):
    x = random_halves(1)
    n = len(x)
    tenth, third, by_value = launch(backend, scaled, [np.zeros(n, np.float16) for _ in range(3)], x, 0.3)
    with np.errstate(over="ignore", under="ignore"):
        assert_same_halves(tenth, x * 0.1)
        assert_same_halves(third, x / 3.0)
        assert_same_halves(by_value, 0.3 * x)
        assert not np.array_equal(tenth, (x.astype(np.float64) * 0.1).astype(np.float16))


def test_float16_arithmetic_matches_numpy(backend):
    a, b = random_halves(2), random_halves(3)
    outputs = launch(backend, four_ops, [np.zeros(len(a), np.float16) for _ in range(4)], a, b)
    with np.errstate(all="ignore"):
        expected = [a + b, a - b, a * b, a / b]
    for actual, wanted in zip(outputs, expected):
        assert_same_halves(actual, wanted)


def halves(*bits: int) -> np.ndarray:
    return np.array(bits, np.uint16).view(np.float16)


def test_float16_nans_from_arithmetic_are_numpys_bit_for_bit(backend):
    """Invalid operations give NumPy's (x86's) negative default NaN, and a NaN operand
    comes through quieted with its sign and payload, where PTX's f16 instructions would
    give one positive canonical NaN."""
    nan, negative_nan, signaling, payload = 0x7E00, 0xFE00, 0x7C01, 0xFD55
    inf, negative_inf, zero, one = 0x7C00, 0xFC00, 0x0000, 0x3C00
    pairs = [(inf, inf), (inf, negative_inf), (zero, zero), (zero, inf), (negative_nan, one),
             (one, negative_nan), (signaling, one), (one, payload), (payload, one),
             (nan, one), (one, zero), (negative_nan, nan), (nan, negative_nan),
             (payload, signaling)]
    a, b = halves(*(x for x, _ in pairs)), halves(*(y for _, y in pairs))
    outputs = launch(backend, four_ops, [np.zeros(len(a), np.float16) for _ in range(4)], a, b)
    with np.errstate(all="ignore"):
        expected = [a + b, a - b, a * b, a / b]
    for actual, wanted in zip(outputs, expected):
        np.testing.assert_array_equal(actual.view(np.uint16), wanted.view(np.uint16))
