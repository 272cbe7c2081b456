"""kk.random: Philox4x32-10 against Random123's published known answers, on the host and
in kernels; kernels drawing the same bits as the host; the layout of seed and counter;
and the distributions of uniform, uniform_bits and normal.

The statistical tests draw a million numbers from fixed seeds, so they are
deterministic; each threshold is where a true uniform or normal generator would fail
with a probability of about 1e-6 (5 standard deviations, or the tabulated quantile
named), so a failure means a defect, not bad luck."""
import math

import numpy as np
import pytest

import kernelkit as kk

WORKGROUP = 256
SAMPLES = 1_000_000

# Random123's kat_vectors for philox4x32 with 10 rounds: counter, key, output.
KNOWN_ANSWERS = [
    ((0x00000000, 0x00000000, 0x00000000, 0x00000000), (0x00000000, 0x00000000),
     (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
    ((0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff), (0xffffffff, 0xffffffff),
     (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
    ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
     (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1)),
]


@kk.kernel
def philox_blocks(out, counters: kk.Const, keys: kk.Const):
    i = kk.index(kk.Global)
    words = kk.random.philox4x32((counters[i, 0], counters[i, 1], counters[i, 2],
                                  counters[i, 3]), (keys[i, 0], keys[i, 1]))
    for w in range(4):
        out[i, w] = words[w]


@kk.kernel
def draw(uniforms, normals, bits, seed, base):
    i = kk.index(kk.Global)
    counter = base + np.uint64(i)
    uniforms[i] = kk.random.uniform(seed, counter)
    normals[i] = kk.random.normal(seed, counter)
    bits[i] = kk.random.uniform_bits(seed, counter)


@kk.kernel
def draw_one(bits, seed, counter):
    bits[0] = kk.random.uniform_bits(seed, counter)


@kk.kernel
def convert_words(uniforms, normals, first: kk.Const, second: kk.Const):
    i = kk.index(kk.Global)
    uniforms[i] = kk.random.uniform_from_word(first[i])
    normals[i] = kk.random.normal_from_words(first[i], second[i])


def draws(backend, seed, n=SAMPLES, base=0):
    """uniform, normal and uniform_bits of (seed, base + i) for i < n, drawn by a kernel."""
    outputs = [kk.zeros(backend, dtype, n) for dtype in (np.float32, np.float32, np.uint32)]
    draw(backend, WORKGROUP)(*outputs, np.uint64(seed), np.uint64(base), ndrange=n)
    kk.synchronize(backend)
    return [kk.to_numpy(out) for out in outputs]


# --- Philox4x32-10 -----------------------------------------------------------------------


@pytest.mark.parametrize("counter, key, expected", KNOWN_ANSWERS,
                         ids=["zeros", "all-ones", "pi-digits"])
def test_philox4x32_gives_random123s_known_answers_on_the_host(counter, key, expected):
    words = kk.random.philox4x32(counter, key)
    assert all(isinstance(word, np.uint32) for word in words)
    assert tuple(int(word) for word in words) == expected


def test_philox4x32_gives_random123s_known_answers_in_a_kernel(backend):
    counters = np.array([counter for counter, _, _ in KNOWN_ANSWERS], np.uint32)
    keys = np.array([key for _, key, _ in KNOWN_ANSWERS], np.uint32)
    out = kk.zeros(backend, np.uint32, (len(KNOWN_ANSWERS), 4))
    philox_blocks(backend, 4)(out, kk.to_backend(backend, counters),
                              kk.to_backend(backend, keys), ndrange=len(KNOWN_ANSWERS))
    kk.synchronize(backend)
    expected = np.array([output for _, _, output in KNOWN_ANSWERS], np.uint32)
    np.testing.assert_array_equal(kk.to_numpy(out), expected)


def test_seed_and_counter_are_split_into_the_key_and_counter_words_low_word_first():
    seed, counter = 0x0123456789ABCDEF, 0xFEDCBA9876543210
    words = kk.random.words(seed, counter)
    assert words == kk.random.philox4x32((0x76543210, 0xFEDCBA98, 0, 0),
                                         (0x89ABCDEF, 0x01234567))
    assert kk.random.uniform_bits(seed, counter) == words[0]
    assert kk.random.uniform(seed, counter) == kk.random.uniform_from_word(words[0])
    assert kk.random.normal(seed, counter) == kk.random.normal_from_words(words[2], words[3])


def test_the_host_functions_take_arrays_of_counters_element_by_element():
    counters = np.array([0, 5, 2**40 + 3], np.uint64)
    bits = kk.random.uniform_bits(7, counters)
    assert bits.dtype == np.uint32
    assert list(bits) == [kk.random.uniform_bits(7, int(c)) for c in counters]


# --- kernels and the host ----------------------------------------------------------------


@pytest.mark.parametrize("seed, base", [(0, 0), (2**40 + 7, 2**53 + 1), (2**64 - 1, 2**64 - 2**16)],
                         ids=["zero", "above-2**32", "near-2**64"])
def test_a_kernel_draws_the_bits_the_host_draws(backend, seed, base):
    n = 2**16
    uniforms, normals, bits = draws(backend, seed, n, base)
    counters = np.uint64(base) + np.arange(n, dtype=np.uint64)
    np.testing.assert_array_equal(bits, kk.random.uniform_bits(seed, counters))
    np.testing.assert_array_equal(uniforms, kk.random.uniform(seed, counters))
    # normal calls log and cos, which may differ in the last bit from the host's.
    np.testing.assert_allclose(normals, kk.random.normal(seed, counters), rtol=4e-7, atol=1e-6)


def test_the_integer_types_of_seed_and_counter_do_not_change_the_bits(backend):
    expected = kk.random.uniform_bits(2**64 - 3, 2**64 - 5)
    for seed, counter in [(np.uint64(2**64 - 3), np.uint64(2**64 - 5)), (-3, -5),
                          (np.int64(-3), np.int32(-5)), (np.int8(-3), np.int16(-5))]:
        bits = kk.zeros(backend, np.uint32, 1)
        draw_one(backend, 1)(bits, seed, counter, ndrange=1)
        kk.synchronize(backend)
        assert kk.to_numpy(bits)[0] == expected, (seed, counter)


def test_the_conversions_of_the_extreme_words_stay_in_range(backend):
    first = np.array([0, 0, 0xFFFFFFFF, 0xFFFFFFFF, 0x000000FF], np.uint32)
    second = np.array([0, 0x40000000, 0, 0xFFFFFFFF, 0x80000000], np.uint32)
    uniforms, normals = kk.zeros(backend, np.float32, 5), kk.zeros(backend, np.float32, 5)
    convert_words(backend, 8)(uniforms, normals, kk.to_backend(backend, first),
                              kk.to_backend(backend, second), ndrange=5)
    kk.synchronize(backend)
    uniforms, normals = kk.to_numpy(uniforms), kk.to_numpy(normals)
    largest = np.float32(1 - 2.0**-24)
    np.testing.assert_array_equal(uniforms, [0, 0, largest, largest, 0])
    # first = 0 is u1 = 2**-24, the largest radius sqrt(48 log 2); first = all ones is u1 = 1.
    radius = math.sqrt(48 * math.log(2))
    np.testing.assert_allclose(normals[[0, 1, 4]], [radius, 0, -radius], rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(normals[[2, 3]], [0, 0])
    assert np.isfinite(normals).all() and np.abs(normals).max() <= 5.78


# --- distributions -----------------------------------------------------------------------


def test_different_counters_and_seeds_give_different_numbers(backend):
    _, _, bits = draws(backend, seed=1)
    _, _, other_seed = draws(backend, seed=2)
    _, _, other_high_word = draws(backend, seed=1 + 2**32)
    # 10**6 draws of 32 bits repeat about n**2 / 2**33 = 116 values.
    assert len(np.unique(bits)) > SAMPLES - 300
    assert np.count_nonzero(bits == other_seed) < 10
    assert np.count_nonzero(bits == other_high_word) < 10


def test_uniform_is_in_zero_one_with_a_uniforms_mean_and_variance(backend):
    uniforms, _, _ = draws(backend, seed=12345)
    assert uniforms.min() >= 0 and uniforms.max() < 1
    values = uniforms.astype(np.float64)
    # standard deviations of the estimates: sqrt(1/12 / n), and sqrt((1/80 - 1/144) / n)
    assert abs(values.mean() - 0.5) < 5 * math.sqrt(1 / 12 / SAMPLES)
    assert abs(values.var() - 1 / 12) < 5 * math.sqrt((1 / 80 - 1 / 144) / SAMPLES)


def test_uniform_passes_chi_square_and_kolmogorov_smirnov_tests(backend):
    uniforms, _, _ = draws(backend, seed=777)
    counts = np.bincount((uniforms * 256).astype(np.int64), minlength=256)
    expected = SAMPLES / 256
    chi_square = ((counts - expected) ** 2 / expected).sum()
    assert chi_square < 377.1   # the chi-square distribution's 1 - 1e-6 quantile, 255 dof
    ordered = np.sort(uniforms.astype(np.float64))
    ranks = np.arange(1, SAMPLES + 1) / SAMPLES
    distance = max((ranks - ordered).max(), (ordered - (ranks - 1 / SAMPLES)).max())
    assert distance * math.sqrt(SAMPLES) < 2.69   # Kolmogorov's 1 - 1e-6 quantile


def test_every_bit_of_uniform_bits_is_set_half_the_time(backend):
    _, _, bits = draws(backend, seed=99)
    fractions = [np.count_nonzero(bits & np.uint32(1 << b)) / SAMPLES for b in range(32)]
    assert max(abs(f - 0.5) for f in fractions) < 5 * 0.5 / math.sqrt(SAMPLES)


def test_normal_has_mean_zero_variance_one_and_normal_tails(backend):
    _, normals, _ = draws(backend, seed=2024)
    assert np.isfinite(normals).all() and np.abs(normals).max() <= 5.78
    values = normals.astype(np.float64)
    assert abs(values.mean()) < 5 / math.sqrt(SAMPLES)
    assert abs(values.var() - 1) < 5 * math.sqrt(2 / SAMPLES)
    for threshold in (2.0, 3.0):
        tail = math.erfc(threshold / math.sqrt(2))   # P(|z| > threshold)
        observed = np.count_nonzero(np.abs(values) > threshold) / SAMPLES
        assert abs(observed - tail) < 5 * math.sqrt(tail * (1 - tail) / SAMPLES)
    grid = np.linspace(-4, 4, 401)
    empirical = np.searchsorted(np.sort(values), grid, side="right") / SAMPLES
    cdf = np.array([0.5 * math.erfc(-x / math.sqrt(2)) for x in grid])
    assert np.abs(empirical - cdf).max() * math.sqrt(SAMPLES) < 2.69


def test_draws_of_neighbouring_counters_and_of_one_counter_are_uncorrelated(backend):
    uniforms, normals, _ = draws(backend, seed=31337)
    limit = 5 / math.sqrt(SAMPLES)
    assert abs(np.corrcoef(uniforms[:-1], uniforms[1:])[0, 1]) < limit
    assert abs(np.corrcoef(normals[:-1], normals[1:])[0, 1]) < limit
    assert abs(np.corrcoef(uniforms, normals)[0, 1]) < limit
