"""The scalar functions Warp users reach for (`kk.bitcast`, `kk.erfinv`, `kk.erfcinv`,
`kk.round`, `kk.frac`, `kk.step`, `kk.smoothstep`, `kk.nonzero`) and bounded random
draws (`kk.random.integers`, `kk.random.uniform(seed, counter, low, high)`): in kernels
against their host versions and NumPy/SciPy on every backend, their types, their host
versions on arrays, their derivatives against central finite differences, and the errors
for what they refuse."""
import functools
import math

import numpy as np
import pytest

import kernelkit as kk
from enzyme_ext import Duplicated, Forward, Reverse, autodiff

import source_lines

assert_points_at = functools.partial(source_lines.assert_points_at, path=__file__)

N = 64


def launch(backend, kernel, *args, ndrange=N):
    kernel(backend, 16)(*args, ndrange=ndrange)
    kk.synchronize(backend)


@kk.kernel
def scalar_functions(out, x: kk.Const):
    i = kk.index(kk.Global)
    v = x[i]
    out[i, 0] = kk.frac(v * 3.0)
    out[i, 1] = kk.step(v)
    out[i, 2] = kk.nonzero(v)
    out[i, 3] = kk.smoothstep(-0.5, 0.75, v)
    out[i, 4] = kk.round(v * 4.0)
    out[i, 5] = kk.erfinv(v)
    out[i, 6] = kk.erfcinv(v + 1.0)


def host_scalar_functions(x):
    return np.stack([kk.frac(x * 3.0), kk.step(x), kk.nonzero(x),
                     kk.smoothstep(-0.5, 0.75, x), kk.round(x * 4.0), kk.erfinv(x),
                     kk.erfcinv(x + 1.0)], axis=1)


def inputs(dtype):
    x = np.linspace(-1.0, 1.0, N - 8)
    return np.concatenate([x, [0.0, -0.0, 0.125, -0.125, 0.625, np.nan, 1.0, -1.0]]).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_kernels_compute_what_the_host_versions_compute(backend, dtype):
    x = inputs(dtype)
    out = kk.zeros(backend, dtype, (N, 7))
    launch(backend, scalar_functions, out, kk.to_backend(backend, x))
    expected = host_scalar_functions(x)
    assert expected.dtype == dtype
    # erf and erfc differ by an ulp between libraries: erfinv's last bit may too
    np.testing.assert_array_equal(kk.to_numpy(out)[:, :5], expected[:, :5])
    np.testing.assert_allclose(kk.to_numpy(out)[:, 5:], expected[:, 5:],
                               rtol=4 * np.finfo(dtype).eps, atol=0)


def test_the_functions_are_warps_and_numpys():
    x = np.array([-1.25, -0.5, -0.0, 0.0, 0.5, 1.5, 2.5, np.nan, np.inf])
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(kk.frac(x), x - np.trunc(x))
    np.testing.assert_array_equal(kk.step(x), [1, 1, 0, 0, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(kk.nonzero(x), [1, 1, 0, 0, 1, 1, 1, 1, 1])
    np.testing.assert_array_equal(kk.round(x), [-1.0, -0.0, -0.0, 0.0, 0.0, 2.0, 2.0, np.nan,
                                                np.inf])   # half to even
    t = np.clip((x[:7] - -1.0) / 3.0, 0, 1)
    np.testing.assert_allclose(kk.smoothstep(-1.0, 2.0, x[:7]), t * t * (3 - 2 * t))
    assert kk.smoothstep(0.0, 1.0, 5.0) == 1.0 and kk.smoothstep(0.0, 1.0, -5.0) == 0.0
    for value, dtype in ((np.float32(1.5), np.float32), (np.float16(-2.0), np.float16)):
        for function in (kk.frac, kk.step, kk.nonzero, kk.round, kk.erfinv, kk.erfcinv):
            assert type(function(value)) is dtype
    assert type(kk.erfinv(0.5)) is float and type(kk.step(-3)) is float
    assert type(kk.step(np.int32(-3))) is np.float64


def test_erfinv_and_erfcinv_invert_erf_and_erfc_to_a_few_ulps_and_at_the_ends():
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    y = np.concatenate([np.linspace(-1, 1, 201)[1:-1], [1 - 2**-53, -1 + 2**-53, 1e-300,
                                                         5e-5, 0.5, 0.5 + 2**-53]])
    exact = [float(mpmath.erfinv(mpmath.mpf(v))) for v in y]
    np.testing.assert_allclose(kk.erfinv(y), exact, rtol=4e-16, atol=0)
    z = np.concatenate([np.linspace(0, 2, 201)[1:-1], 2 - 10.0 ** -np.arange(1, 16, 2)])
    exact = [float(mpmath.erfinv(1 - mpmath.mpf(v))) for v in z]
    tiny = 10.0 ** -np.arange(20, 308, 36)
    with mpmath.workdps(320):   # 1 - z exactly, for z down to 1e-300
        exact += [float(mpmath.erfinv(1 - mpmath.mpf(v))) for v in tiny]
    np.testing.assert_allclose(kk.erfcinv(np.concatenate([z, tiny])), exact, rtol=6e-16,
                               atol=0)
    special = pytest.importorskip("scipy.special")
    many = np.linspace(-1, 1, 100_001)
    np.testing.assert_allclose(kk.erfinv(many), special.erfinv(many), rtol=1e-15, atol=0)
    assert kk.erfinv(1.0) == math.inf and kk.erfinv(-1.0) == -math.inf
    assert math.isnan(kk.erfinv(1.5)) and math.isnan(kk.erfinv(math.nan))
    assert kk.erfcinv(0.0) == math.inf and kk.erfcinv(2.0) == -math.inf
    assert math.isnan(kk.erfcinv(-0.5)) and math.isnan(kk.erfcinv(2.5))
    assert math.copysign(1.0, kk.erfinv(-0.0)) == -1.0


@kk.kernel
def rounds(out, ints, x: kk.Const):
    i = kk.index(kk.Global)
    out[i] = kk.round(x[i])
    ints[i] = round(x[i]) + round(7)


def test_round_is_half_to_even_and_pythons_round_gives_an_int(backend):
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 2.4999999999999996, 2.0**52 + 0.5, -3.5] * 8)
    out, ints = kk.zeros(backend, np.float64, N), kk.zeros(backend, np.int64, N)
    launch(backend, rounds, out, ints, kk.to_backend(backend, x))
    np.testing.assert_array_equal(kk.to_numpy(out), np.round(x))
    expected = [round(v) + 7 for v in x]
    np.testing.assert_array_equal(kk.to_numpy(ints), expected)


@kk.kernel
def bitcasts(bits, floats, halves, x: kk.Const, words: kk.Const):
    i = kk.index(kk.Global)
    bits[i] = kk.bitcast(x[i], np.uint64)
    floats[i] = kk.bitcast(words[i], np.float32)
    halves[i] = kk.bitcast(kk.bitcast(np.float16(x[i]), np.int16) ^ np.int16(-32768),
                           np.float16)


def test_bitcast_reads_the_bits_as_numpys_view(backend):
    x = np.array([1.0, -0.0, np.inf, 3.5e-310, -2.5, np.pi, 0.1, 1e300] * 8)
    words = np.array([0x3F800000, 0x80000000, 0x7F800000, 1, 0xC0490FDB, 0, 0x3DCCCCCD,
                      0x7F7FFFFF] * 8, dtype=np.uint32).view(np.int32)
    bits, floats = kk.zeros(backend, np.uint64, N), kk.zeros(backend, np.float32, N)
    halves = kk.zeros(backend, np.float16, N)
    launch(backend, bitcasts, bits, floats, halves, kk.to_backend(backend, x),
           kk.to_backend(backend, words))
    np.testing.assert_array_equal(kk.to_numpy(bits), x.view(np.uint64))
    np.testing.assert_array_equal(kk.to_numpy(floats).view(np.int32), words)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(kk.to_numpy(halves), -x.astype(np.float16))  # sign bit
    assert kk.bitcast(np.float32(1.0), np.uint32) == 0x3F800000
    assert kk.bitcast(-1, np.uint64) == 2**64 - 1 and kk.bitcast(1.0, np.int64) == 0x3FF << 52
    np.testing.assert_array_equal(kk.bitcast(x, np.int64), x.view(np.int64))


@kk.kernel
def draws(dice, spans, uniforms, seed):
    i = kk.index(kk.Global)
    dice[i] = kk.random.integers(seed, i, 1, 7)
    spans[i, 0] = kk.random.integers(seed, i, 10)
    spans[i, 1] = kk.random.integers(seed, i, -2**63, 2**63 - 1)
    spans[i, 2] = kk.random.integers(seed, i, 5, 5)
    uniforms[i] = kk.random.uniform(seed, i, -2.0, 3.0)


def test_bounded_draws_are_in_range_and_the_same_on_every_backend_and_the_host(backend):
    n, seed = 4096, 12345
    dice, spans = kk.zeros(backend, np.int64, n), kk.zeros(backend, np.int64, (n, 3))
    uniforms = kk.zeros(backend, np.float32, n)
    launch(backend, draws, dice, spans, uniforms, seed, ndrange=n)
    dice, spans, uniforms = kk.to_numpy(dice), kk.to_numpy(spans), kk.to_numpy(uniforms)
    for i in (0, 1, 77, n - 1):
        assert dice[i] == kk.random.integers(seed, i, 1, 7)
        assert list(spans[i]) == [kk.random.integers(seed, i, 10),
                                  kk.random.integers(seed, i, -2**63, 2**63 - 1), 5]
        assert uniforms[i] == kk.random.uniform(seed, i, -2.0, 3.0)
    assert dice.min() == 1 and dice.max() == 6
    assert spans[:, 0].min() == 0 and spans[:, 0].max() == 9 and (spans[:, 2] == 5).all()
    assert (spans[:, 1] < 0).any() and (spans[:, 1] > 0).any()
    assert uniforms.dtype == np.float32 and -2.0 <= uniforms.min() and uniforms.max() < 3.0


def test_integers_are_uniform_over_their_range():
    counts = np.bincount([kk.random.integers(3, c, -3, 4) + 3 for c in range(14_000)])
    expected = 2_000
    chi_square = np.sum((counts - expected) ** 2 / expected)
    assert len(counts) == 7 and chi_square < 33.0   # 6 degrees of freedom, p = 1e-5


# --- derivatives ---------------------------------------------------------------------------


@kk.kernel
def smooth(out, x: kk.Const):
    i = kk.index(kk.Global)
    v = x[i]
    out[i] = (kk.frac(3.0 * v) * v + kk.smoothstep(-0.5, 0.75, v) + kk.step(v) * v
              + kk.nonzero(v) * v * v + kk.round(v * 4.0) * v + kk.smoothstep(v, 2.0, 0.5))


def test_derivatives_match_central_finite_differences(backend):
    x = np.linspace(-0.95, 0.95, N) + 0.004   # away from kinks and jumps
    seed = np.random.default_rng(0).uniform(0.5, 1.5, N)

    def values(at):
        out = kk.zeros(backend, np.float64, N)
        launch(backend, smooth, out, kk.to_backend(backend, at))
        return kk.to_numpy(out)

    gradient = kk.zeros(backend, np.float64, N)
    autodiff(Reverse, smooth(backend, 16),
             Duplicated(kk.zeros(backend, np.float64, N), kk.to_backend(backend, seed.copy())),
             Duplicated(kk.to_backend(backend, x), gradient), ndrange=N)
    tangent = kk.zeros(backend, np.float64, N)
    autodiff(Forward, smooth(backend, 16), Duplicated(kk.zeros(backend, np.float64, N), tangent),
             Duplicated(kk.to_backend(backend, x), kk.ones(backend, np.float64, N)), ndrange=N)
    kk.synchronize(backend)
    h = 1e-6
    numeric = (values(x + h) - values(x - h)) / (2 * h)
    np.testing.assert_allclose(kk.to_numpy(gradient), seed * numeric, rtol=1e-6)
    np.testing.assert_allclose(kk.to_numpy(tangent), numeric, rtol=1e-6)


@kk.kernel
def inverse_error_functions(out, x: kk.Const):
    i = kk.index(kk.Global)
    out[i] = kk.erfinv(x[i]) + kk.erfcinv(1.0 - x[i])


def test_the_inverse_error_functions_have_their_analytic_derivatives_also_at_zero(backend):
    """d/dy erfinv(y) = sqrt(pi) / 2 * exp(erfinv(y)**2), and erfcinv(1 - y) is erfinv(y);
    central finite differences agree too."""
    x = np.concatenate([[0.0, -0.0, 1e-300, 1e-5], np.linspace(-0.999, 0.999, N - 4)])
    gradient, tangent = kk.zeros(backend, np.float64, N), kk.zeros(backend, np.float64, N)
    autodiff(Reverse, inverse_error_functions(backend, 16),
             Duplicated(kk.zeros(backend, np.float64, N), kk.ones(backend, np.float64, N)),
             Duplicated(kk.to_backend(backend, x), gradient), ndrange=N)
    autodiff(Forward, inverse_error_functions(backend, 16),
             Duplicated(kk.zeros(backend, np.float64, N), tangent),
             Duplicated(kk.to_backend(backend, x), kk.ones(backend, np.float64, N)), ndrange=N)
    kk.synchronize(backend)
    expected = 2 * math.sqrt(math.pi) / 2 * np.exp(kk.erfinv(x) ** 2)
    np.testing.assert_allclose(kk.to_numpy(gradient), expected, rtol=1e-12)
    np.testing.assert_allclose(kk.to_numpy(tangent), expected, rtol=1e-12)
    h = 1e-7
    inner = x[4:]
    numeric = (kk.erfinv(inner + h) + kk.erfcinv(1 - inner - h) - kk.erfinv(inner - h)
               - kk.erfcinv(1 - inner + h)) / (2 * h)
    np.testing.assert_allclose(numeric, expected[4:], rtol=1e-5)


# --- errors --------------------------------------------------------------------------------


@kk.kernel
def bitcasts_to_another_size(out):
    i = kk.index(kk.Global)
    out[i] = kk.bitcast(np.float32(1.0), np.int64)


@kk.kernel
def rounds_to_digits(out):
    i = kk.index(kk.Global)
    out[i] = round(out[i], 2)


@kk.kernel
def rounds_a_bool(out):
    i = kk.index(kk.Global)
    out[i] = kk.round(out[i] > 0)


@pytest.mark.parametrize("kernel, line, message", [
    (bitcasts_to_another_size, "out[i] = kk.bitcast(np.float32(1.0), np.int64)",
     "kk.bitcast from f32 to i64"),
    (rounds_to_digits, "out[i] = round(out[i], 2)", "round(x, ndigits) is not supported"),
    (rounds_a_bool, "out[i] = kk.round(out[i] > 0)", "kk.round takes numbers, not bools"),
])
def test_what_they_refuse_is_an_error_at_the_line(backend, kernel, line, message):
    with pytest.raises(kk.CompileError) as info:
        launch(backend, kernel, kk.zeros(backend, np.float64, N))
    assert message in str(info.value)
    assert_points_at(info.value, kernel.name, line)
