"""gamma and lgamma in vector code on the CPU (backends/cpu/gamma.py), where the host has
glibc's libmvec. Checked in float32 and float64:
- the accuracy, in ulps of the result, against mpmath over each function's whole domain
  (uniform and log-uniform samples, near the zeros of lgamma, near the negative integers,
  up to the overflow and down to the underflow); for lgamma of negative arguments in
  float64 in ulps of the larger of |lgamma(x)| and lgamma(-x), the two terms that cancel
  near its zeros;
- special values as the C library gives them, and the factorials exactly;
- the same argument gives the same bits in the vector loop and in its scalar remainder;
- the loop calls the vector function, and no C library function per work-item; calls
  that the straight-line vectorizer joins give the same results;
- with libmvec's SSE versions (a host without AVX2), and without a vector library (the C
  library's functions), the same."""
import dataclasses
import math
import warnings

import mpmath
import numpy as np
import pytest
from llvmlite import ir

import kernelkit as kk
from backends.cpu.target import CPUTarget
from backends.cpu.vector_math import LIBMVEC_SSE, vector_lanes, vector_symbol

LIBRARY = CPUTarget.host().vector_library
pytestmark = pytest.mark.skipif(not LIBRARY, reason="this host has no libmvec (vector math "
                                                     "is glibc's, on x86-64 Linux)")

# The bounds held, in ulps (docs/cpu-math.md gives the figures measured).
BOUNDS = {("gamma", np.float32): 1.0, ("gamma", np.float64): 4.0,
          ("lgamma", np.float32): 1.0, ("lgamma", np.float64): 4.0}
GAMMA_REFLECTION_BOUND = 6.0
"""gamma in float64 for x <= -1/2 (4.6 measured; 5.1 below -171.62, where the pow is
squared)."""

CASES = [pytest.param(name, dtype, id=f"{name}-{np.dtype(dtype).name}")
         for name in ("gamma", "lgamma") for dtype in (np.float32, np.float64)]

_kernels = {}


def kernel_of(name: str):
    """y[i] = kk.gamma(a[i]) or kk.lgamma(a[i])."""
    if name not in _kernels:
        function = getattr(kk, name)

        def apply(y, a: kk.Const):
            i = kk.index(kk.Global)
            y[i] = function(a[i])
        apply.__name__ = apply.__qualname__ = f"apply_{name}"
        _kernels[name] = kk.kernel(apply)
    return _kernels[name]


def run(name, x, backend=None, workgroupsize=64):
    backend = backend or kk.CPU()
    y = np.zeros_like(x)
    kernel_of(name)(backend, workgroupsize)(y, x, ndrange=len(x))
    kk.synchronize(backend)
    return y


def exact(name: str, x: float):
    """gamma(x) or log|gamma(x)| to 100 bits (x not a pole)."""
    with mpmath.workprec(100):
        if name == "gamma":
            return mpmath.gamma(x)
        return mpmath.loggamma(x) if x > 0 else mpmath.log(abs(mpmath.gamma(x)))


def ulps(name, x, got, dtype) -> np.ndarray:
    """The error of each result in ulps of the exact one (lgamma of x < 0 in float64: of
    the larger of |lgamma(x)|, lgamma(-x) and 1); inf where a finite result was due and
    not given."""
    finite_max = float(np.finfo(dtype).max)
    errors = []
    for argument, result in zip(x.tolist(), got.tolist()):
        value = exact(name, argument)
        if abs(value) > finite_max:
            right = math.isinf(result) and (result > 0) == (value > 0)
            errors.append(0.0 if right else math.inf)
            continue
        scale = abs(value)
        if name == "lgamma" and argument < 0 and dtype == np.float64:
            scale = max(scale, abs(exact(name, -argument)), 1)
        spacing = float(np.spacing(dtype(float(scale))))
        errors.append(float(abs(mpmath.mpf(result) - value) / spacing)
                      if math.isfinite(result) else math.inf)
    return np.array(errors)


def near_integers(rng, low, high, n):
    """Arguments within 1e-15 .. 0.3 of the integers low .. high - 1."""
    integers = rng.integers(low, high, n).astype(np.float64)
    return integers + rng.choice([-1, 1], n) * 10.0 ** rng.uniform(-15, -0.5, n)


def log_uniform(rng, low, high, n):
    return 10.0 ** rng.uniform(math.log10(low), math.log10(high), n)


def domain(name, dtype, rng, n=1500) -> np.ndarray:
    """Arguments over the function's whole domain, the poles left out."""
    if name == "gamma":
        top, bottom = (171.62, -186.0) if dtype == np.float64 else (35.04, -46.0)
        parts = [rng.uniform(-0.5, 8, n), rng.uniform(8, top, n), rng.uniform(bottom, -0.5, n),
                 near_integers(rng, int(bottom), 0, n), near_integers(rng, 1, 31, n),
                 log_uniform(rng, 1e-30, top, n), -log_uniform(rng, 1e-30, -bottom, n),
                 rng.uniform(top - 2, top, n // 4)]
    else:
        top = 1e305 if dtype == np.float64 else 4e36
        parts = [rng.uniform(0, 8, n), rng.uniform(8, 1e3, n), log_uniform(rng, 1e-300, top, n),
                 1 + rng.choice([-1, 1], n) * log_uniform(rng, 1e-16, 0.25, n),
                 2 + rng.choice([-1, 1], n) * log_uniform(rng, 1e-16, 0.25, n),
                 rng.uniform(-8, 0, n), rng.uniform(-200, -8, n), near_integers(rng, -200, 0, n),
                 -log_uniform(rng, 1e-300, 1e15, n)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        x = np.concatenate(parts).astype(dtype)
    return x[np.isfinite(x) & ~((x <= 0) & (x == np.floor(x)))]


def zeros_of_lgamma(count: int) -> list[float]:
    """The first `count` zeros of lgamma below -2 (two in each unit interval), by
    bisection in mpmath."""
    found = []
    with mpmath.workprec(100):
        for n in range(2, 2 + count // 2):
            for low, high in ((-n - 1 + 1e-12, -n - 0.5), (-n - 0.5, -n - 1e-12)):
                low, high = mpmath.mpf(low), mpmath.mpf(high)
                sign = mpmath.log(abs(mpmath.gamma(low))) > 0
                for _ in range(80):
                    middle = (low + high) / 2
                    if (mpmath.log(abs(mpmath.gamma(middle))) > 0) == sign:
                        low = middle
                    else:
                        high = middle
                found.append(float(low))
    return found


def bounds(name, dtype, x) -> np.ndarray:
    bound = np.full(len(x), BOUNDS[name, dtype])
    if name == "gamma" and dtype == np.float64:
        bound[x <= -0.5] = GAMMA_REFLECTION_BOUND
    return bound


@pytest.mark.parametrize("name, dtype", CASES)
def test_accuracy_in_ulps_over_the_whole_domain(name, dtype):
    x = domain(name, dtype, np.random.default_rng(17))
    errors = ulps(name, x, run(name, x), dtype)
    bound = bounds(name, dtype, x)
    worst = int(np.argmax(errors - bound))
    assert errors[worst] <= bound[worst], \
        f"{name} {np.dtype(dtype).name}: {errors[worst]:.2f} ulps at x = {x[worst]!r}"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lgamma_next_to_its_zeros_below_minus_two(dtype):
    # There lgamma(x) = log(pi / |x sin(pi x)|) - lgamma(-x) cancels: in float64 the error
    # is held to the bound in ulps of lgamma(-x) (or 1), an absolute error; in float32 to
    # an ulp of the result.
    arguments = []
    for zero in zeros_of_lgamma(16):
        nearest = dtype(zero)
        arguments += [nearest, *(np.nextafter(nearest, dtype(direction)) for direction in
                                 (-np.inf, np.inf))]
        arguments += list(zero + np.linspace(-1e-6, 1e-6, 21))
    x = np.array(arguments, dtype)
    x = x[x != np.floor(x)]     # the zeros nearest -10 are within 3e-7 of it
    errors = ulps("lgamma", x, run("lgamma", x), dtype)
    assert errors.max() <= BOUNDS["lgamma", dtype], f"x = {x[np.argmax(errors)]!r}"


SPECIALS = [
    # x, gamma(x), lgamma(x); None: as mpmath gives it (to the bound)
    (math.nan, math.nan, math.nan), (math.inf, math.inf, math.inf),
    (-math.inf, math.nan, math.inf), (0.0, math.inf, math.inf), (-0.0, -math.inf, math.inf),
    (-1.0, math.nan, math.inf), (-2.0, math.nan, math.inf), (-100.0, math.nan, math.inf),
    (-2.0 ** 52, math.nan, math.inf), (1.0, 1.0, 0.0), (2.0, 1.0, 0.0), (0.5, None, None),
    (-0.5, None, None), (2.0 ** -60, 2.0 ** 60, None), (-2.0 ** -60, -2.0 ** 60, None),
    (1e300, math.inf, None)]
SPECIALS_FLOAT64 = [
    (171.62, None, None), (171.625, math.inf, None), (-171.5, None, None),
    (-177.5, None, None), (-180.5, None, None), (-190.5, -0.0, None), (-191.5, 0.0, None),
    (-1e100, math.nan, math.inf), (5e-324, math.inf, None), (2.5e305, math.inf, None),
    (2.6e305, math.inf, math.inf), (-171.62, None, None), (-3.5, None, None)]
SPECIALS_FLOAT32 = [
    (35.04, None, None), (35.05, math.inf, None), (-45.5, 0.0, None), (-46.5, -0.0, None),
    (-40.5, None, None), (4e36, math.inf, None), (4.1e36, math.inf, math.inf)]


@pytest.mark.parametrize("name, dtype", CASES)
def test_special_values_as_the_c_library_gives_them(name, dtype):
    table = SPECIALS + (SPECIALS_FLOAT64 if dtype == np.float64 else SPECIALS_FLOAT32)
    column = 1 if name == "gamma" else 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)     # 1e300 is inf in float32
        x = np.array([row[0] for row in table], dtype)
    got = run(name, x)
    for argument, result, row in zip(x.tolist(), got.tolist(), table):
        expected = row[column]
        if expected is None:
            error = ulps(name, np.array([argument]), np.array([result], dtype), dtype)[0]
            assert error <= bounds(name, dtype, np.array([argument]))[0], \
                f"{name}({argument!r}) = {result!r}"
        elif math.isnan(expected):
            assert math.isnan(result), f"{name}({argument!r}) = {result!r}"
        else:
            assert result == expected and math.copysign(1, result) == math.copysign(1, expected), \
                f"{name}({argument!r}) = {result!r}, not {expected!r}"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_positive_integers_give_the_factorials_exactly(dtype):
    x = np.arange(1, 36, dtype=dtype)
    got = run("gamma", x)
    exact_up_to = 23 if dtype == np.float64 else 14      # 22! and 13!
    assert [int(value) for value in got[:exact_up_to]] == \
        [math.factorial(n) for n in range(exact_up_to)]
    if dtype == np.float32:     # computed in float64, then correctly rounded up to 34!
        with mpmath.workprec(24):
            expected = [float(mpmath.mpf(math.factorial(n - 1))) for n in range(1, 36)]
        np.testing.assert_array_equal(got, np.array(expected, dtype))


def same_bits(values: np.ndarray) -> bool:
    integers = values.view(np.uint32 if values.dtype == np.float32 else np.uint64)
    return bool(np.all(integers == integers[0]))


ONE_PER_PATH = [0.3, -0.3, 1.0, 2.0, 2.5, 5.25, 7.999, 8.0, 30.7, 171.5, 171.7, -3.7, -170.3,
                -175.5, 1e-20, -1e-20, 0.74, 2.3, 1e10, -1e10 - 0.5, 1e300, 4.0]


@pytest.mark.parametrize("name, dtype", CASES)
def test_the_vector_loop_and_its_remainder_give_the_same_bits(name, dtype):
    # 133 work-items in groups of 64: two groups run in the vector loop, the last five in
    # the scalar code; the same argument everywhere must give the same bits.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        arguments = np.array(ONE_PER_PATH, dtype)
    for value in arguments:
        got = run(name, np.full(133, value, dtype))
        assert same_bits(got), f"{name}({value!r}): {np.unique(got)}"
    # and among other arguments in the lanes of a vector
    rng = np.random.default_rng(8)
    head = arguments[:5]
    x = np.concatenate([head, rng.uniform(-20, 40, 123).astype(dtype), head])
    got = run(name, x)
    np.testing.assert_array_equal(got[:5].view(np.uint8), got[-5:].view(np.uint8))


@pytest.mark.parametrize("name, dtype", CASES)
def test_calls_joined_by_the_straight_line_vectorizer_give_what_the_loop_gives(name, dtype):
    # Eight calls in straight-line code, of array elements and of constants, which the
    # SLP vectorizer turns into calls of the vector function: they must run it (a call
    # with another calling convention than the function's deleted them and their stores).
    function = getattr(kk, name)
    constants = tuple(dtype(value) for value in (0.5, 2.5, -3.7, 10.0, 30.2, 1e-3, 7.0, 171.5))

    def straight_line(out, a: kk.Const):
        for k in (0, 1, 2, 3, 4, 5, 6, 7):
            out[k] = function(a[k])
            out[k + 8] = function(constants[k])
    straight_line.__name__ = straight_line.__qualname__ = \
        f"straight_line_{name}_{np.dtype(dtype).name}"
    straight_line = kk.kernel(straight_line)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)     # 171.5 is inf in float32
        a = np.array(constants, dtype)
    out = np.zeros(16, dtype)
    backend = kk.CPU(threads=1)
    straight_line(backend, 1)(out, a, ndrange=1)
    kk.synchronize(backend)
    expected = run(name, a)
    np.testing.assert_array_equal(out[:8], expected)
    np.testing.assert_array_equal(out[8:], expected)


def vector_function_call(name: str, dtype, library: str) -> str:
    """How the loop calls our vector function, in LLVM IR."""
    scalar = ir.FloatType() if dtype == np.float32 else ir.DoubleType()
    lanes = vector_lanes(library, scalar)
    symbol = name + ("f" if dtype == np.float32 else "")
    return f"@kk_{symbol}_x{lanes}(<{lanes} x {scalar}>"


@pytest.mark.parametrize("name, dtype", CASES)
def test_the_vector_loop_calls_the_vector_function(name, dtype):
    x = np.ones(256, dtype)
    text = kk.code_llvm(kernel_of(name), kk.CPU(), np.zeros_like(x), x, ndrange=256,
                        workgroupsize=64)
    assert vector_function_call(name, dtype, LIBRARY) in text
    library_function = vector_symbol(LIBRARY, "pow" if name == "gamma" else "log",
                                     2 if name == "gamma" else 1, 64)[0]
    assert f"@{library_function}(<" in text
    for c_function in ("tgamma", "tgammaf", "lgamma", "lgammaf"):
        assert f"@{c_function}(" not in text


def test_without_a_vector_library_the_c_library_is_called():
    backend = kk.CPU(threads=1)
    backend._target = dataclasses.replace(backend._target, vector_library="")
    x = np.linspace(-5.5, 30, 200)
    for name, c_function in (("gamma", "tgamma"), ("lgamma", "lgamma")):
        text = kk.code_llvm(kernel_of(name), backend, np.zeros_like(x), x, ndrange=len(x),
                            workgroupsize=64)
        assert f"@{c_function}(double" in text and "@kk_" + name not in text
        errors = ulps(name, x, run(name, x, backend), np.float64)
        assert errors.max() <= 10     # the C library's own accuracy


def test_the_sse_versions_where_a_host_has_no_avx2():
    # A host without AVX2 gets 4 float32 or 2 float64 lanes, with libmvec's SSE pow and
    # log: the same code, exercised here on this host's SSE units.
    backend = kk.CPU(threads=1)
    backend._target = dataclasses.replace(backend._target, vector_library=LIBMVEC_SSE)
    rng = np.random.default_rng(9)
    for name, dtype in [(case.values[0], case.values[1]) for case in CASES]:
        x = domain(name, dtype, rng, n=200)
        got = run(name, x, backend)
        errors = ulps(name, x, got, dtype) - bounds(name, dtype, x)
        assert errors.max() <= 0, f"{name} {np.dtype(dtype).name} x = {x[errors.argmax()]!r}"
        x = np.concatenate([x[:5], x[5:128], x[:5]])
        got = run(name, x, backend)
        np.testing.assert_array_equal(got[:5].view(np.uint8), got[-5:].view(np.uint8))
        text = kk.code_llvm(kernel_of(name), backend, got, x, ndrange=len(x),
                            workgroupsize=64)
        assert vector_function_call(name, dtype, LIBMVEC_SSE) in text
