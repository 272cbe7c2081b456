"""`kk.random`: counter-based random numbers, the same on every backend and on the host.

A counter-based generator has no state: a draw is a pure function of a key (the seed)
and a counter, so each work-item draws its own numbers with no setup and no
communication, and a kernel that draws `kk.random.uniform(seed, i)` gives the same
numbers on the CPU, on a GPU and on the host. The generator is Philox4x32-10 (Salmon
et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011; Random123), which
passes the BigCrush statistical tests.

    @kk.kernel
    def noise(out, seed):
        i = kk.index(kk.Global)
        out[i] = kk.random.normal(seed, i)

Layout. `seed` and `counter` are integers in [0, 2**64): Python ints or any NumPy
integers (pass a seed of 2**63 or more to a kernel as an np.uint64; in a kernel a
negative one is taken modulo 2**64, as NumPy's casts do, while on the host NumPy raises
for a negative Python int). Compute a counter in integers of one signedness: by NumPy's
promotion, an np.uint64 plus an int64 such as `kk.index(kk.Global)` is a float64, which
rounds above 2**53 (write `base + np.uint64(i)`). One (seed, counter) selects one
128-bit block, `philox4x32(counter words, key words)` with

    key     = (seed % 2**32, seed // 2**32)
    counter = (counter % 2**32, counter // 2**32, 0, 0)

whose four 32-bit output words x0..x3 (`words(seed, counter)`) the functions read:
`uniform_bits` and `uniform` read x0, `integers` x0 and x1, `normal` x2 and x3. So
`uniform(seed, c)` and `normal(seed, c)` are independent, but two draws that read the
same word of the same block are not: give each draw its own counter
(`counter = i * draws_per_item + k`, for instance) or its own seed, or convert the four words of one block yourself
(`uniform_from_word`, `normal_from_words`).

Exactness. `philox4x32`, `words`, `uniform_bits`, `uniform` and `uniform_from_word` are
integer arithmetic and one exact conversion: the same bits everywhere. `normal` calls
`log` and `cos`, whose last bit differs between the host's C library, NumPy and
libdevice, so backends agree on it to within a few float32 ulps, not bit for bit.

Each function is plain Python in the kernel language, compiled as a device function in
a kernel. On the host it also takes NumPy arrays of counters (or seeds) and computes
element by element."""
from __future__ import annotations

import math

import numpy as np

from .math import cos, log, sqrt

# Philox4x32's round multipliers and key increments (Random123, philox.h).
PHILOX_M0 = 0xD2511F53
PHILOX_M1 = 0xCD9E8D57
PHILOX_W0 = 0x9E3779B9
PHILOX_W1 = 0xBB67AE85
PHILOX_ROUNDS = 10

LOW_32_BITS = 0xFFFFFFFF
SIGN_BIT = np.uint64(1 << 63)
TWO_TO_MINUS_24 = np.float32(2.0 ** -24)
TWO_PI = np.float32(2.0 * math.pi)


def multiply_high_low(a, multiplier):
    """The high and low 32-bit words of a 32 x 32-bit product, as uint32s. The product
    is computed in uint64, where it cannot wrap."""
    product = np.uint64(a) * multiplier
    return np.uint32(product >> 32), np.uint32(product & LOW_32_BITS)


def philox4x32(counter, key):
    """Philox4x32-10: the four uint32 output words for a counter of four 32-bit words and
    a key of two, as Random123's `philox4x32(ctr, key)` gives them.

        philox4x32((0, 0, 0, 0), (0, 0))   # 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8
    """
    c0, c1, c2, c3 = counter
    k0, k1 = key
    c0, c1, c2, c3 = np.uint32(c0), np.uint32(c1), np.uint32(c2), np.uint32(c3)
    # The keys are bumped in uint64 and cut back to 32 bits: in uint32, NumPy scalars
    # would warn on the host each time the sum wraps.
    k0, k1 = np.uint64(k0), np.uint64(k1)
    for _ in range(PHILOX_ROUNDS):
        high0, low0 = multiply_high_low(c0, PHILOX_M0)
        high1, low1 = multiply_high_low(c2, PHILOX_M1)
        c0, c1, c2, c3 = (high1 ^ c1 ^ np.uint32(k0), low1,
                          high0 ^ c3 ^ np.uint32(k1), low0)
        k0 = (k0 + PHILOX_W0) & LOW_32_BITS
        k1 = (k1 + PHILOX_W1) & LOW_32_BITS
    return c0, c1, c2, c3


def words(seed, counter):
    """The four uint32 words x0, x1, x2, x3 of the block that (seed, counter) selects
    (see the module's docstring for the layout). Where a work-item needs several
    numbers, one call gives four words to convert:

        x0, x1, x2, x3 = kk.random.words(seed, i)
        a, b = kk.random.uniform_from_word(x0), kk.random.uniform_from_word(x1)
    """
    seed, counter = np.uint64(seed), np.uint64(counter)
    return philox4x32((counter & LOW_32_BITS, counter >> 32, 0, 0),
                      (seed & LOW_32_BITS, seed >> 32))


def uniform_bits(seed, counter):
    """32 uniformly random bits, a uint32: word x0.

        kk.random.uniform_bits(0, 0)   # np.uint32(0x6627e8d5)
    """
    x0, _, _, _ = words(seed, counter)
    return x0


def uniform(seed, counter, low=0.0, high=1.0):
    """A float32 uniform on [0, 1), from word x0 (`uniform_from_word`); with `low` and
    `high`, `low + (high - low) * u` (on [low, high) but for rounding; float32 unless
    the bounds are float64):

        kk.random.uniform(0, 0)              # np.float32(0.39904642), 0x6627e8 / 2**24
        kk.random.uniform(0, 0, -1.0, 1.0)   # np.float32(-0.20190716)
    """
    return low + (high - low) * uniform_from_word(uniform_bits(seed, counter))


def integers(seed, counter, low, high=None):
    """An int64 uniform on [low, high), as NumPy's `Generator.integers(low, high)`;
    `integers(seed, counter, high)` draws from [0, high). From words x0 and x1 (so not
    independent of `uniform` and `uniform_bits` at the same counter): the 64 bits
    `x1 * 2**32 + x0` scaled to the range by Lemire's multiply-shift, the high 64 bits
    of `bits * (high - low)`. Each value's probability is 1 / (high - low) within a
    relative (high - low) / 2**64 (below 2**-32 for any range below 2**32). Where
    `high <= low`, the result is `low` (NumPy raises there).

        kk.random.integers(seed, i, 1, 7)   # a die
    """
    if high is None:
        low, high = 0, low
    # int64s as uint64s in the same order (the sign bit flipped): the span and the sum
    # below cannot wrap.
    low_key = np.uint64(np.int64(low)) ^ SIGN_BIT
    high_key = np.uint64(np.int64(high)) ^ SIGN_BIT
    span = high_key - min(low_key, high_key)
    x0, x1, _, _ = words(seed, counter)
    bits = (np.uint64(x1) << np.uint64(32)) | np.uint64(x0)
    return np.int64((low_key + multiply_high(bits, span)) ^ SIGN_BIT)


def multiply_high(a, b):
    """The high 64 bits of the 128-bit product of two uint64s, from 32-bit halves (no
    partial sum wraps)."""
    a_low, a_high = a & LOW_32_BITS, a >> np.uint64(32)
    b_low, b_high = b & LOW_32_BITS, b >> np.uint64(32)
    cross = ((a_low * b_low) >> np.uint64(32)) + ((a_high * b_low) & LOW_32_BITS) + \
        a_low * b_high
    return a_high * b_high + ((a_high * b_low) >> np.uint64(32)) + (cross >> np.uint64(32))


def normal(seed, counter):
    """A float32 from the standard normal distribution (mean 0, variance 1), from words
    x2 and x3 (`normal_from_words`).

        kk.random.normal(0, 0)   # about -0.6176
    """
    _, _, x2, x3 = words(seed, counter)
    return normal_from_words(x2, x3)


def uniform_from_word(word):
    """A uint32 as a float32 uniform on [0, 1): its top 24 bits times 2**-24, so one of
    the 2**24 evenly spaced values k / 2**24, each as likely; never 1.0. Exact: the
    conversion and the product are."""
    return np.float32(word >> 8) * TWO_TO_MINUS_24


def normal_from_words(first, second):
    """Two uint32s as a standard normal float32, by the Box-Muller transform:

        u1 = (first // 2**8 + 1) / 2**24     in (0, 1], so log(u1) is finite
        u2 = (second // 2**8) / 2**24        in [0, 1)
        sqrt(-2 * log(u1)) * cos(2 * pi * u2)

    computed in float32. |result| <= sqrt(48 * log(2)), about 5.77, reached at
    `first` = 0: a deviation beyond 5.77 sigma (probability 8e-9) is never drawn."""
    u1 = (np.float32(first >> 8) + 1) * TWO_TO_MINUS_24
    u2 = np.float32(second >> 8) * TWO_TO_MINUS_24
    return sqrt(-2 * log(u1)) * cos(TWO_PI * u2)


__all__ = ["uniform", "normal", "integers", "uniform_bits", "words", "uniform_from_word",
           "normal_from_words", "philox4x32"]
