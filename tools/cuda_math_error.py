"""`python tools/cuda_math_error.py`: the largest error, in ulps, of every math function
kernels compute through libdevice on CUDA, per dtype, against mpmath at 128 bits, with
the argument where it occurs: the tables of `docs/cuda-math.md`.

Two ways to compute the results, one measurement (`measure`):

- on this machine, the default: libdevice's own code, compiled for the host with what
  only a GPU has emulated (`libdevice_on_host.py`: exact but for the approximate
  instructions, which it rounds correctly). For each function that reaches an
  approximate instruction, the report says how many of its results change, and by how
  much, when the approximations are off by a relative 2**-22 (`PERTURBATION`): where
  none change, the host's error is the GPU's; elsewhere NVIDIA's bound is what holds.
- `--gpu`: kernels on `kk.CUDABackend()` calling `kk.<name>`, compiled as users' kernels
  are, on the same arguments: how a machine with a GPU confirms, or corrects, the table.

Arguments, per function and dtype (`--count`, 200,000 by default, the same on every
run): uniform samples where the function changes fastest, log-uniform magnitudes of both
signs over the whole range, random bit patterns, samples within 16 ulps and within a
relative 1e-17 to 0.25 of the function's zeros, poles and thresholds (and of multiples of
pi/2 up to the largest arguments, for the trigonometric functions), and the special
values (zeros, infinities, NaN, the extreme finite and subnormal numbers; each pair of
them for the functions of two arguments). At the special values the reference is the C
library's result (C99's Annex F), and a NaN, infinity or zero that differs from it, the
sign of zero included, is listed. `--jobs` spreads mpmath's work over processes."""
from __future__ import annotations

import argparse
import functools
import math
import multiprocessing
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

TOOLS = Path(__file__).resolve().parent
for _path in (TOOLS.parent, TOOLS):   # kernelkit's checkout, and libdevice_on_host beside
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from backends.cuda.libdevice import PREFIX  # noqa: E402
from kernelkit.ir.math_functions import MATH_FUNCTIONS, MathFunction  # noqa: E402
from libdevice_on_host import DEFAULT_ARCH, LibdeviceOnHost, approximations_reached  # noqa: E402

DTYPES = (np.float32, np.float64)

# -- what is measured ---------------------------------------------------------------------

# The functions kernels compute through libdevice (the others are PTX instructions, exact).
MEASURED: tuple[MathFunction, ...] = tuple(
    f for f in MATH_FUNCTIONS.values() if not f.exact or f.name == "fmod")

# The largest error NVIDIA states for each function (float32, float64), in ulps, in the
# CUDA C++ Programming Guide's appendix on mathematical functions (CUDA 13); lgamma's
# holds outside -10.001 to -2.264 (float32), -23.0001 to -2.2637 (float64).
NVIDIA_BOUNDS: dict[str, tuple[int, int]] = {
    "exp": (2, 1), "exp2": (2, 1), "expm1": (1, 1), "log": (1, 1), "log2": (1, 1),
    "log10": (2, 1), "log1p": (1, 1), "sin": (2, 2), "cos": (2, 2), "tan": (4, 2),
    "asin": (2, 2), "acos": (2, 2), "atan": (2, 2), "sinh": (3, 2), "cosh": (2, 1),
    "tanh": (2, 1), "asinh": (3, 3), "acosh": (4, 3), "atanh": (3, 2), "erf": (2, 2),
    "erfc": (4, 5), "gamma": (5, 10), "lgamma": (6, 4), "cbrt": (1, 1), "pow": (4, 2),
    "atan2": (3, 2), "hypot": (3, 2), "fmod": (0, 0), "sqrt": (0, 0),
}


def symbol(function: MathFunction, dtype) -> str:
    """libdevice's name for `function` on `dtype` (`__nv_sinf`, `__nv_sin`)."""
    return PREFIX + function.c_name + ("f" if np.dtype(dtype) == np.float32 else "")


# -- arguments ----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Limits:
    """A float type's numbers, as float64 or int."""

    dtype: type
    precision: int          # significand bits, the implicit one included
    min_exponent: int       # of the smallest normal number
    max_exponent: int       # of the largest finite number
    max: float

    @staticmethod
    def of(dtype) -> Limits:
        info = np.finfo(dtype)
        return Limits(np.dtype(dtype).type, info.nmant + 1, int(info.minexp),
                      int(info.maxexp) - 1, float(info.max))

    @property
    def subnormal_exponent(self) -> int:   # of the smallest subnormal number
        return self.min_exponent - self.precision + 1


def arguments(function: MathFunction, dtype, count: int) -> tuple[np.ndarray, ...]:
    """About `count` arguments for `function` on `dtype`, the same on every run."""
    limits = Limits.of(dtype)
    rng = np.random.default_rng(zlib.crc32(f"{function.name} {limits.dtype.__name__}".encode()))
    if function.arity == 1:
        columns = (_unary_arguments(function.name, limits, count, rng),)
    else:
        columns = _BINARY_ARGUMENTS[function.name](limits, count // 6, rng)
        grid = _specials(limits)
        columns = tuple(np.concatenate([c, np.ravel(g)]) for c, g in
                        zip(columns, np.meshgrid(grid, grid, indexing="ij")))
    with np.errstate(over="ignore"):
        return tuple(c.astype(dtype) for c in columns)


def _specials(limits: Limits) -> np.ndarray:
    values = [0.0, math.inf, math.nan, 2.0 ** limits.subnormal_exponent,
              2.0 ** limits.min_exponent, limits.max, 1.0, 0.5, 2.0, 3.0, 10.0]
    return np.array(values + [-v for v in values])


def _log_uniform(limits: Limits, count: int, rng, signed: bool = True) -> np.ndarray:
    """Magnitudes uniform in their exponent, from the smallest subnormal to the largest."""
    exponents = rng.uniform(limits.subnormal_exponent, limits.max_exponent + 1, count)
    values = np.minimum(np.exp2(exponents), limits.max)
    return values * rng.choice([-1.0, 1.0], count) if signed else values


def _random_bits(limits: Limits, count: int, rng) -> np.ndarray:
    """Uniformly random bit patterns of finite numbers."""
    bits = 8 * np.dtype(limits.dtype).itemsize
    unsigned = np.dtype(f"u{bits // 8}")
    values = rng.integers(0, 2 ** bits, count, dtype=unsigned).view(limits.dtype)
    return values[np.isfinite(values)].astype(np.float64)


def _near(points: list[float], limits: Limits, count: int, rng) -> np.ndarray:
    """Each point's neighbours within 16 ulps, and points a relative 1e-17 to 0.25 away."""
    samples = []
    share = max(count // max(len(points), 1) - 33, 1)
    for point in points:
        value = limits.dtype(point)
        neighbours = [value]
        for direction in (-math.inf, math.inf):
            current = value
            for _ in range(16):
                current = np.nextafter(current, limits.dtype(direction))
                neighbours.append(current)
        offsets = 10.0 ** rng.uniform(-17, math.log10(0.25), share) * rng.choice([-1, 1], share)
        with np.errstate(over="ignore"):
            spread = float(point) * (1 + offsets) if point != 0 else offsets
        samples += [np.array(neighbours, np.float64), spread]
    return np.concatenate(samples) if samples else np.empty(0)


def _pi_multiples(limits: Limits, rng, count: int = 200) -> list[float]:
    """The numbers nearest k pi / 2 for random k up to 2**(precision + 10), and for
    random k up to the largest argument's (where the reduction needs most bits of pi)."""
    import mpmath
    with mpmath.workprec(2 * limits.max_exponent + 200):
        small = rng.integers(1, 2 ** min(limits.precision + 10, 62), count // 2)
        large = [mpmath.floor(mpmath.mpf(limits.max) * u / (mpmath.pi / 2))
                 for u in rng.uniform(0, 1, count // 2)]
        return [float(k * mpmath.pi / 2) for k in list(map(int, small)) + large]


def _unary_arguments(name: str, limits: Limits, count: int, rng) -> np.ndarray:
    intervals, points = _unary_domain(name, limits, rng)
    uniform = count * 2 // 5 // len(intervals)
    return np.concatenate(
        [rng.uniform(low, high, uniform) for low, high in intervals]
        + [_log_uniform(limits, count // 4, rng), _random_bits(limits, count // 10, rng),
           _near(points, limits, count // 4, rng), _specials(limits)])


def _unary_domain(name: str, limits: Limits, rng) -> tuple[list, list]:
    """(intervals to sample uniformly, points to sample near) for a function of one
    argument: where its values change fastest, its zeros, poles and thresholds."""
    log_max = math.log(limits.max)                               # exp overflows above
    log_min = math.log(2.0 ** limits.subnormal_exponent)         # exp underflows below
    log_tiny = limits.min_exponent * math.log(2)                 # exp becomes subnormal
    single = limits.precision == 24
    gamma_max = 35.0401 if single else 171.62438                 # gamma overflows above
    lgamma_max = 4.0850e36 if single else 2.5563e305
    erfc_zero = 10.0546 if single else 27.2263                   # erfc underflows above
    negative_integers = [-float(k) for k in range(1, 21)] + [-gamma_max]
    logarithm = ([(0.0, 4.0), (0.0, 1e4)], [1.0])
    trigonometric = ([(-10.0, 10.0), (-1e5, 1e5)], [0.0] + _pi_multiples(limits, rng))
    inverse_trigonometric = ([(-1.0, 1.0)], [0.0, 1.0, -1.0, 0.5, -0.5])
    hyperbolic = ([(-log_max - 2, log_max + 2), (-1.0, 1.0)],
                  [0.0, log_max + math.log(2), -log_max - math.log(2)])
    table = {
        "exp": ([(log_min - 2, log_max + 2), (-1.0, 1.0)], [0.0, log_max, log_min, log_tiny]),
        "exp2": ([(limits.subnormal_exponent - 2, limits.max_exponent + 3), (-1.0, 1.0)],
                 [0.0, limits.max_exponent + 1, limits.subnormal_exponent, limits.min_exponent]),
        "expm1": ([(-40.0, log_max + 2), (-1.0, 1.0)], [0.0, log_max]),
        "log": logarithm, "log2": logarithm, "log10": logarithm,
        "log1p": ([(-1.0, 1.0), (-1.0, 1e4)], [0.0, -1.0]),
        "sin": trigonometric, "cos": trigonometric, "tan": trigonometric,
        "asin": inverse_trigonometric, "acos": inverse_trigonometric,
        "atan": ([(-10.0, 10.0), (-1e4, 1e4)], [0.0, 1.0, -1.0]),
        "sinh": hyperbolic, "cosh": hyperbolic,
        "tanh": ([(-20.0, 20.0), (-1.0, 1.0)], [0.0, 0.55, -0.55]),
        "asinh": ([(-10.0, 10.0), (-1e4, 1e4)], [0.0]),
        "acosh": ([(1.0, 10.0), (1.0, 1e4)], [1.0]),
        "atanh": inverse_trigonometric,
        "erf": ([(-6.0, 6.0), (-1.0, 1.0)], [0.0]),
        "erfc": ([(-6.0, erfc_zero + 1), (0.0, 5.0)], [0.0, erfc_zero]),
        "gamma": ([(-gamma_max - 5, gamma_max + 5), (0.0, 10.0), (-10.0, 0.0)],
                  [0.0, 1.0, 2.0, gamma_max] + negative_integers),
        "lgamma": ([(-50.0, 50.0), (0.0, 10.0), (-10.0, 0.0)],
                   [1.0, 2.0, lgamma_max] + _lgamma_zeros() + negative_integers),
        "cbrt": ([(-10.0, 10.0)], [0.0, 1.0, -1.0]),
        "sqrt": logarithm,
    }
    return table[name]


@functools.lru_cache(maxsize=1)
def _lgamma_zeros() -> list[float]:
    """The zeros of lgamma below 0 down to -6 (two between each pair of integers)."""
    import mpmath
    with mpmath.workprec(128):
        return [float(mpmath.findroot(lambda t: mpmath.loggamma(t).real, guess)) for guess in
                (-2.457, -2.747, -3.143, -3.955, -4.039, -4.991, -5.008)]


def _pow_arguments(limits: Limits, share: int, rng):
    x = _log_uniform(limits, share, rng, signed=False)
    # results spread over the whole range, overflow and underflow included
    target = rng.uniform(limits.subnormal_exponent - 4, limits.max_exponent + 4, share)
    with np.errstate(divide="ignore", invalid="ignore"):
        y = target / np.log2(x)
    near_one = 1 + rng.choice([-1, 1], share) * np.exp2(
        rng.uniform(-limits.precision - 2, -1, share))
    negative = -_log_uniform(limits, share, rng, signed=False)
    integers = rng.integers(-100, 101, share).astype(np.float64)
    simple = rng.choice([0.5, -0.5, 2.0, 3.0, -1.0, -2.0, 1 / 3, 1.5], share)
    xs = [x, rng.uniform(0, 10, share), near_one, negative, _log_uniform(limits, share, rng),
          _log_uniform(limits, share, rng, signed=False)]
    ys = [y, rng.uniform(-40, 40, share),
          rng.choice([-1, 1], share) * np.exp2(rng.uniform(0, limits.precision + 10, share)),
          integers, _log_uniform(limits, share, rng), simple]
    return np.concatenate(xs), np.concatenate(ys)


def _atan2_arguments(limits: Limits, share: int, rng):
    y = _log_uniform(limits, 3 * share, rng)
    x = _log_uniform(limits, 3 * share, rng)
    square = rng.uniform(-10, 10, (2, share))
    ratio = rng.choice([-1, 1], share) * (1 + rng.uniform(-1e-3, 1e-3, share))
    near_diagonal = _log_uniform(limits, share, rng)
    steep = _log_uniform(limits, share, rng)
    return (np.concatenate([y, square[0], near_diagonal * ratio, steep]),
            np.concatenate([x, square[1], near_diagonal,
                            steep * np.exp2(rng.uniform(-limits.precision - 4, limits.precision + 4,
                                                        share))]))


def _hypot_arguments(limits: Limits, share: int, rng):
    x = _log_uniform(limits, 2 * share, rng)
    y = _log_uniform(limits, 2 * share, rng)
    close = _log_uniform(limits, share, rng)
    big = limits.max * rng.uniform(0.3, 1, (2, share)) * rng.choice([-1, 1], (2, share))
    tiny = 2.0 ** limits.min_exponent * rng.uniform(0, 2, (2, share))
    return (np.concatenate([x, close, big[0], tiny[0]]),
            np.concatenate([y, close * np.exp2(rng.uniform(-limits.precision - 3,
                                                           limits.precision + 3, share)),
                            big[1], tiny[1]]))


def _fmod_arguments(limits: Limits, share: int, rng):
    x = _log_uniform(limits, 3 * share, rng)
    y = _log_uniform(limits, 3 * share, rng)
    small = rng.uniform(-10, 10, share)
    multiples = small * rng.integers(1, 2 ** 20, share)
    return (np.concatenate([x, rng.uniform(-100, 100, share), multiples,
                            np.nextafter(multiples, 0)]),
            np.concatenate([y, rng.uniform(-10, 10, share), small, small]))


_BINARY_ARGUMENTS = {"pow": _pow_arguments, "atan2": _atan2_arguments,
                     "hypot": _hypot_arguments, "fmod": _fmod_arguments}


# -- the reference and the error in ulps --------------------------------------------------

PRECISION = 128   # bits of mpmath's results


def _exact(name: str, args: tuple[float, ...]):
    """`name` at finite, nonzero `args` in mpmath (an mpf, infinite where the function
    has a pole), or math.nan where it has no real value (or C gives NaN)."""
    import mpmath as mp
    if name == "fmod":
        return mp.mpf(math.fmod(*args))   # exact in C
    far = _far_beyond_range(name, args)
    if far is not None:
        return far
    try:
        if name == "lgamma":
            return mp.loggamma(args[0]).real
        if name == "cbrt":
            return mp.cbrt(args[0]) if args[0] > 0 else -mp.cbrt(-args[0])
        value = _MPMATH[name](*[mp.mpf(a) for a in args])
    except ValueError:   # a pole of gamma
        return math.nan if name == "gamma" else mp.inf
    if isinstance(value, mp.mpc):
        return math.nan if value.imag != 0 else value.real
    return value


def _far_beyond_range(name: str, args: tuple[float, ...]):
    """The value of `name` at `args` where it is far beyond the float64 range (0, -1, 2
    or an infinity: what it rounds to), which mpmath takes long to compute; else None."""
    import mpmath as mp
    x = args[0]
    is_integer = x == math.floor(x)
    if name in ("exp", "exp2", "expm1", "sinh", "cosh") and abs(x) > 5000:
        if x > 0 or name == "cosh":
            return mp.inf
        return {"sinh": -mp.inf, "expm1": mp.mpf(-1)}.get(name, mp.mpf(0))
    if name == "erfc" and abs(x) > 40:
        return mp.mpf(0) if x > 0 else mp.mpf(2)
    if name == "gamma" and abs(x) > 200:
        return mp.inf if x > 0 else math.nan if is_integer else mp.mpf(0)
    if name == "pow" and abs(args[1] * math.log2(abs(x))) > 5000:
        y = args[1]
        if x < 0 and y != math.floor(y):
            return math.nan
        magnitude = mp.inf if y * math.log2(abs(x)) > 0 else mp.mpf(0)
        odd = y == math.floor(y) and math.fmod(y, 2) != 0
        return -magnitude if x < 0 and odd else magnitude
    return None


def _mpmath_functions() -> dict[str, Callable]:
    import mpmath as mp
    return {"exp": mp.exp, "exp2": lambda x: mp.power(2, x), "expm1": mp.expm1,
            "log": mp.log, "log2": lambda x: mp.log(x, 2), "log10": mp.log10,
            "log1p": mp.log1p, "sin": mp.sin, "cos": mp.cos, "tan": mp.tan, "asin": mp.asin,
            "acos": mp.acos, "atan": mp.atan, "sinh": mp.sinh, "cosh": mp.cosh,
            "tanh": mp.tanh, "asinh": mp.asinh, "acosh": mp.acosh, "atanh": mp.atanh,
            "erf": mp.erf, "erfc": mp.erfc, "gamma": mp.gamma, "pow": mp.power,
            "atan2": mp.atan2, "hypot": mp.hypot, "sqrt": mp.sqrt}


_MPMATH: dict[str, Callable] = {}


def _ulp_error(exact, result: float, limits: Limits, relative_to_one: bool = False) -> float:
    """|result - exact| in ulps of `exact` in `limits`' type (the ulp of the subnormals
    below the normal range, of the largest binade above it; `relative_to_one`: of the
    larger of |exact| and 1); infinite where the result is NaN, or infinite, and should
    not be, or the reverse."""
    import mpmath as mp
    if isinstance(exact, float) and math.isnan(exact):
        return 0.0 if math.isnan(result) else math.inf
    if math.isnan(result):
        return math.inf
    if mp.isinf(exact):
        return 0.0 if result == exact else math.inf
    if math.isinf(result):
        # the float nearest exact is infinite from (2 - 2**-precision) * 2**max_exponent up
        overflow = mp.ldexp(2 * 2 ** limits.precision - 1, limits.max_exponent - limits.precision)
        return 0.0 if abs(exact) >= overflow and (exact > 0) == (result > 0) else math.inf
    exponent = limits.min_exponent if exact == 0 else mp.frexp(exact)[1] - 1
    lowest = 0 if relative_to_one else limits.min_exponent
    exponent = min(max(exponent, lowest), limits.max_exponent)
    return float(abs(mp.mpf(result) - exact) * mp.ldexp(1, limits.precision - 1 - exponent))


def _chunk_errors(task) -> np.ndarray:
    """The errors of one chunk of results. `task`: (name, dtype, argument columns,
    results, the C library's results at special arguments (NaN elsewhere), which
    arguments are special, which errors are in ulps of the larger of |exact| and 1)."""
    import mpmath
    name, dtype, columns, results, c_results, special, relative_to_one = task
    if not _MPMATH:
        _MPMATH.update(_mpmath_functions())
    limits = Limits.of(dtype)
    errors = np.empty(len(results))
    with mpmath.workprec(PRECISION):
        for i in range(len(results)):
            if special[i]:
                c_result = float(c_results[i])
                exact = c_result if math.isnan(c_result) else mpmath.mpf(c_result)
            else:
                exact = _exact(name, tuple(float(c[i]) for c in columns))
            errors[i] = _ulp_error(exact, float(results[i]), limits, bool(relative_to_one[i]))
    return errors


def c_library_results(name: str, columns: tuple[np.ndarray, ...]) -> np.ndarray:
    """What the C library gives (in float64) at the arguments `columns`: its special
    values (C99's Annex F) are the reference at zeros, infinities and NaN."""
    function = MATH_FUNCTIONS[name]
    wide = [c.astype(np.float64) for c in columns]
    if isinstance(function.host, np.ufunc):
        with np.errstate(all="ignore"):
            return function.host(*wide).astype(np.float64)

    def at(x):
        try:
            return function.host(x)
        except ValueError:   # gamma and lgamma at their poles and -inf
            if name == "lgamma" or x == 0:
                return math.copysign(math.inf, x) if name == "gamma" else math.inf
            return math.nan
    return np.array([at(float(x)) for x in wide[0]], np.float64)


# -- measuring ----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Region:
    """Part of a function's domain measured on its own (by its first argument)."""

    label: str
    contains: Callable[[np.ndarray, Limits], np.ndarray]
    relative_to_one: bool = False     # errors in ulps of the larger of |exact| and 1


def _nvidia_lgamma_interval(x: np.ndarray, limits: Limits) -> np.ndarray:
    low, high = (-10.001, -2.264) if limits.precision == 24 else (-23.0001, -2.2637)
    return (x >= low) & (x <= high)


# Where NVIDIA's bound holds in part of the domain only: lgamma has zeros in every unit
# interval below -2, where its relative error has no bound; there, in ulps of 1.
REGIONS: dict[str, tuple[Region, ...]] = {
    "lgamma": (Region("x outside -10.001 to -2.264 (float32), -23.0001 to -2.2637 (float64)",
                      lambda x, limits: ~_nvidia_lgamma_interval(x, limits)),
               Region("x inside them, in ulps of the larger of \\|lgamma(x)\\| and 1",
                      _nvidia_lgamma_interval, relative_to_one=True)),
}
WHOLE_DOMAIN = (Region("", lambda x, limits: np.ones(len(x), bool)),)


@dataclass
class Measurement:
    function: str
    dtype: str
    region: str
    count: int
    max_ulps: float                     # over the results that are numbers where due
    arguments: tuple[float, ...]        # where the largest error occurs
    result: float                       # what was computed there
    wrong_kind: list[str]               # NaN or an infinity where a number is due, or
                                        # the reverse (not at special arguments)
    special_differences: list[str]      # at special arguments, from the C library's
    changed: float = math.nan           # the fraction of results that change, and by how
    change_ulps: float = math.nan       # many ulps at most, when approximations are off
    seconds: float = 0.0


def measure(function: MathFunction, dtype, evaluate, count: int, map_chunks=map,
            perturbed=None, chunk: int = 4000) -> list[Measurement]:
    """`function`'s largest error on `dtype` over `arguments(...)` (one measurement per
    `REGIONS` entry), its results computed by `evaluate(function, dtype, columns)`;
    `map_chunks` maps `_chunk_errors` (a pool's map, to spread the reference's work).
    `perturbed`, an evaluator like `evaluate` whose approximate instructions are off: how
    many results change with it, and by how much."""
    start = time.monotonic()
    limits = Limits.of(dtype)
    columns = arguments(function, dtype, count)
    results = np.asarray(evaluate(function, dtype, columns))
    special = np.zeros(len(results), bool)
    for column in columns:
        special |= ~np.isfinite(column) | (column == 0)
    c_results = np.full(len(results), np.nan)
    c_results[special] = c_library_results(function.name, tuple(c[special] for c in columns))
    regions = REGIONS.get(function.name, WHOLE_DOMAIN)
    masks = [region.contains(columns[0], limits) for region in regions]
    relative_to_one = np.zeros(len(results), bool)
    for region, mask in zip(regions, masks):
        relative_to_one |= mask if region.relative_to_one else False
    dtype_name = np.dtype(dtype).name
    tasks = [(function.name, dtype_name, tuple(c[i:i + chunk] for c in columns),
              results[i:i + chunk], c_results[i:i + chunk], special[i:i + chunk],
              relative_to_one[i:i + chunk]) for i in range(0, len(results), chunk)]
    errors = np.concatenate(list(map_chunks(_chunk_errors, tasks)))
    changes = None if perturbed is None else _changes(
        results, np.asarray(perturbed(function, dtype, columns)))
    measurements = []
    for region, mask in zip(regions, masks):
        numbers = mask & np.isfinite(errors)
        worst = int(np.flatnonzero(numbers)[np.argmax(errors[numbers])]) if numbers.any() else 0
        wrong = np.flatnonzero(mask & ~np.isfinite(errors) & ~special)
        measurement = Measurement(
            function.name, dtype_name, region.label, int(mask.sum()),
            float(errors[worst]) if numbers.any() else math.nan,
            tuple(float(c[worst]) for c in columns), float(results[worst]),
            [_call(function, columns, results, i) for i in wrong],
            _special_differences(function, columns, results, c_results, special & mask))
        if changes is not None:
            measurement.changed = float(np.mean(changes[mask] != 0))
            measurement.change_ulps = float(np.max(changes[mask], initial=0))
        measurements.append(measurement)
    measurements[-1].seconds = time.monotonic() - start
    return measurements


def _changes(results: np.ndarray, other: np.ndarray) -> np.ndarray:
    """How many ulps of `results` `other` differs by, element by element (infinite where
    one is NaN or infinite and the other not the same)."""
    same = (results == other) | (np.isnan(results) & np.isnan(other))
    with np.errstate(all="ignore"):
        ulps = np.abs(results.astype(np.float64) - other) / np.spacing(np.abs(results))
    return np.where(same, 0.0, np.where(np.isfinite(ulps), ulps, math.inf))


def _call(function: MathFunction, columns, results, i: int) -> str:
    arguments = ", ".join(repr(float(c[i])) for c in columns)
    return f"{function.name}({arguments}) = {float(results[i])!r}"


def _special_differences(function, columns, results, c_results, special) -> list[str]:
    """`f(args) = result (C: value)` where a special argument gives a NaN, an infinity
    or a zero that is not the C library's (the sign of zero included)."""
    differences = []
    for i in np.flatnonzero(special):
        got, expected = float(results[i]), float(c_results[i])
        exact_kind = math.isnan(expected) or math.isinf(expected) or expected == 0
        same = (math.isnan(got) and math.isnan(expected)) or (
            got == expected and math.copysign(1, got) == math.copysign(1, expected))
        if (exact_kind or math.isnan(got)) and not same:
            differences.append(f"{_call(function, columns, results, i)} (C: {expected!r})")
    return differences


class HostEvaluator:
    """Results from libdevice's code on this machine (`LibdeviceOnHost`); with
    `perturbation`, its approximate instructions' results are off by that much."""

    def __init__(self, functions, arch: str = DEFAULT_ARCH, perturbation: float = 0.0):
        self.library = LibdeviceOnHost([symbol(f, d) for f in functions for d in DTYPES], arch,
                                       perturbation)

    def __call__(self, function: MathFunction, dtype, columns) -> np.ndarray:
        return self.library.evaluate(symbol(function, dtype), *columns)


# -- on a GPU -----------------------------------------------------------------------------

class GPUEvaluator:
    """Results from kernels on `kk.CUDABackend()`, one launch per function and dtype, each
    compiled as a user's kernel calling `kk.<name>` is."""

    def __init__(self):
        import kernelkit as kk
        self.kk = kk
        self.backend = kk.CUDABackend()

    def __call__(self, function: MathFunction, dtype, columns) -> np.ndarray:
        kk = self.kk
        out = kk.empty(self.backend, dtype, len(columns[0]))
        on_device = [kk.to_backend(self.backend, np.ascontiguousarray(c)) for c in columns]
        _applying(function.name, function.arity)(self.backend, 256)(
            out, *on_device, ndrange=len(columns[0]))
        kk.synchronize(self.backend)
        return kk.to_numpy(out)


@functools.lru_cache(maxsize=None)
def _applying(name: str, arity: int):
    """A kernel that applies `kk.<name>` to each element (of two arrays, for two
    arguments)."""
    import kernelkit as kk
    math_function = getattr(kk, name)
    if arity == 1:
        @kk.kernel
        def apply(out, x: kk.Const):
            i = kk.index(kk.Global)
            out[i] = math_function(x[i])
        return apply

    @kk.kernel
    def apply_to_pairs(out, x: kk.Const, y: kk.Const):
        i = kk.index(kk.Global)
        out[i] = math_function(x[i], y[i])
    return apply_to_pairs


# -- the report ---------------------------------------------------------------------------

PERTURBATION = 2.0 ** -22   # about the error of the approximate instructions


def report(measurements: list[Measurement], approximations: dict) -> str:
    """Markdown: a row per function (and region) with its largest error on each dtype;
    where `approximations` ({(function, dtype): instructions}) is given, a row per
    function and dtype that reaches approximate instructions, with how many of its
    results change when they are off; then the results of the wrong kind, and the
    special values that differ from the C library's."""
    rows: dict[tuple[str, str], dict[str, Measurement]] = {}
    for m in measurements:
        rows.setdefault((m.function, m.region), {})[m.dtype] = m
    lines = ["| function | float32 | largest at | float64 | largest at | NVIDIA's bound |",
             "|---|---|---|---|---|---|"]
    for (name, region), row in rows.items():
        depends = any(m.changed > 0 for m in row.values())
        cells = [f"`{name}`" + (" *" if depends else "") + (f", {region}" if region else "")]
        for dtype in ("float32", "float64"):
            m = row.get(dtype)
            cells += ["", ""] if m is None else [_ulps(m.max_ulps), _where(m)]
        bound = NVIDIA_BOUNDS.get(name)
        cells.append("" if bound is None or region.startswith("x inside") else
                     f"{bound[0]} / {bound[1]}")
        lines.append("| " + " | ".join(cells) + " |")
    if approximations:
        lines += ["", "| function | dtype | approximate instructions it reaches | results that "
                  "change when they are off | by up to |", "|---|---|---|---|---|"]
        for m in measurements:
            reached = approximations.get((m.function, m.dtype))
            if reached and not m.region.startswith("x inside"):
                lines.append(f"| `{m.function}` | {m.dtype} | "
                             f"{', '.join(f'`{p}`' for p in reached)} | {_share(m.changed)} | "
                             f"{_ulps(m.change_ulps)} ulps |")
    for title, attribute in (("Results of the wrong kind (NaN or infinite where a number is "
                              "due, or the reverse)", "wrong_kind"),
                             ("Special values that differ from the C library's",
                              "special_differences")):
        listed = [m for m in measurements if getattr(m, attribute)]
        if listed:
            lines += ["", f"{title}:", ""]
            for m in listed:
                found = getattr(m, attribute)
                shown = "; ".join(f"`{d}`" for d in found[:3])
                more = f" and {len(found) - 3} more" if len(found) > 3 else ""
                lines.append(f"- {m.function}, {m.dtype}: {shown}{more}")
    return "\n".join(lines) + "\n"


def _share(fraction: float) -> str:
    return "< 0.1%" if 0 < fraction < 0.001 else f"{fraction:.1%}"


def _ulps(value: float) -> str:
    return "-" if math.isnan(value) else "inf" if math.isinf(value) else f"{value:.2f}"


def _where(m: Measurement) -> str:
    if math.isnan(m.max_ulps):
        return ""
    return f"{', '.join(_short(a, m.dtype) for a in m.arguments)} -> {_short(m.result, m.dtype)}"


def _short(value: float, dtype: str) -> str:
    """`value` as the shortest decimal that gives it back in `dtype`."""
    if dtype == "float32":
        return np.format_float_positional(np.float32(value), unique=True, trim="-") \
            if 1e-4 <= abs(value) < 1e7 else \
            np.format_float_scientific(np.float32(value), unique=True, trim="-")
    return repr(float(value))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/cuda_math_error.py",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpu", action="store_true",
                        help="compute the results with kernels on the GPU (kk.CUDABackend())")
    parser.add_argument("--count", type=int, default=200_000,
                        help="arguments per function and dtype (default 200,000)")
    parser.add_argument("--functions", help="comma-separated names (default: all measured)")
    parser.add_argument("--dtypes", default="float32,float64")
    parser.add_argument("--arch", default=DEFAULT_ARCH,
                        help=f"the GPU architecture libdevice's code is emulated for "
                             f"(__CUDA_ARCH; default {DEFAULT_ARCH})")
    parser.add_argument("--jobs", type=int, default=1,
                        help="processes computing the reference (default 1)")
    parser.add_argument("--output", help="also write the report to this file")
    args = parser.parse_args(argv)
    functions = [MATH_FUNCTIONS[n] for n in args.functions.split(",")] if args.functions \
        else list(MEASURED)
    dtypes = [np.dtype(d).type for d in args.dtypes.split(",")]
    start = time.monotonic()
    if args.gpu:
        from kernelkit.errors import BackendError
        try:
            evaluate, perturbed, approximations = GPUEvaluator(), None, {}
        except BackendError as error:
            parser.error(str(error))
    else:
        evaluate = HostEvaluator(functions, args.arch)
        perturbed = HostEvaluator(functions, args.arch, PERTURBATION)
        approximations = {(f.name, np.dtype(d).name):
                          approximations_reached(symbol(f, d), args.arch)
                          for f in functions for d in dtypes}
    pool = multiprocessing.get_context("fork").Pool(args.jobs) if args.jobs > 1 else None
    measurements = []
    try:
        for function in functions:
            for dtype in dtypes:
                found = measure(function, dtype, evaluate, args.count,
                                pool.map if pool else map, perturbed)
                measurements += found
                for m in found:
                    print(f"{m.function} {m.dtype} {m.region}: {_ulps(m.max_ulps)} ulps at "
                          f"{_where(m)} ({m.count} arguments)", file=sys.stderr, flush=True)
                print(f"  {found[-1].seconds:.1f} s", file=sys.stderr, flush=True)
    finally:
        if pool:
            pool.close()
    where = "kernels on a GPU (kk.CUDABackend())" if args.gpu else \
        f"libdevice's code on this machine, as for {args.arch}"
    text = (f"Results computed by {where}, {args.count} arguments per function and dtype, "
            f"in {time.monotonic() - start:.0f} s.\n\n" + report(measurements, approximations))
    print(text)
    if args.output:
        Path(args.output).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
