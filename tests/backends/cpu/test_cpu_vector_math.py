"""Vectorized math on the CPU (backends/cpu/vector_math.py): where the host has glibc's
libmvec, kernels' math calls become its vector versions in the vectorized work-item loop.
Checked here for every function that has one, in float32 and float64:
- the accuracy, in ulps of the result, against float64 (for float32) and extended
  precision (for float64) references, over each function's whole domain (uniform and
  log-uniform samples, magnitudes from 1e-30 to the domain's edge);
- special values (nan, +-inf, +-0.0, the largest finite values) as NumPy gives them;
- the same argument gives the same bits in the vector loop and in its scalar remainder;
- the vector version is what the loop calls."""
import math
import re
import warnings

import numpy as np
import pytest
from llvmlite import ir

import kernelkit as kk
from backends.cpu.target import CPUTarget
from backends.cpu.vector_math import vector_lanes, vector_symbol
from kernelkit.ir.math_functions import MATH_FUNCTIONS

LIBRARY = CPUTarget.host().vector_library
pytestmark = pytest.mark.skipif(not LIBRARY, reason="this host has no libmvec (vector math "
                                                     "is glibc's, on x86-64 Linux)")

MAX_ULPS = 4.0   # glibc documents at most 4 ulps for libmvec's functions

# Each function's domain: (low, high) for the unary ones.
DOMAINS = {
    "exp": (-100, 100), "exp2": (-150, 150), "expm1": (-100, 100), "log": (0, 1e30),
    "log2": (0, 1e30), "log10": (0, 1e30), "log1p": (-1, 1e30), "sin": (-1e6, 1e6),
    "cos": (-1e6, 1e6), "tan": (-1e6, 1e6), "asin": (-1, 1), "acos": (-1, 1),
    "atan": (-1e30, 1e30), "sinh": (-90, 90), "cosh": (-90, 90), "tanh": (-20, 20),
    "asinh": (-1e30, 1e30), "acosh": (1, 1e30), "atanh": (-1, 1), "erf": (-10, 10),
    "erfc": (-10, 30), "cbrt": (-1e30, 1e30)}
BINARY = {"pow": ((0, 100), (-30, 30)), "atan2": ((-1e6, 1e6), (-1e6, 1e6)),
          "hypot": ((-1e15, 1e15), (-1e15, 1e15))}
SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0]


def vectorized(name: str, bits: int) -> bool:
    function = MATH_FUNCTIONS[name]
    return vector_symbol(LIBRARY, function.c_name + ("f" if bits == 32 else ""),
                         function.arity, bits) is not None


def cases():
    for name in list(DOMAINS) + list(BINARY):
        for dtype in (np.float32, np.float64):
            yield pytest.param(name, dtype, id=f"{name}-{np.dtype(dtype).name}")


_kernels = {}


def kernel_of(name: str):
    """y[i] = name(a[i]) or name(a[i], b[i])."""
    if name not in _kernels:
        function = getattr(kk, name)
        if MATH_FUNCTIONS[name].arity == 1:
            def apply(y, a: kk.Const):
                i = kk.index(kk.Global)
                y[i] = function(a[i])
        else:
            def apply(y, a: kk.Const, b: kk.Const):
                i = kk.index(kk.Global)
                y[i] = function(a[i], b[i])
        apply.__name__ = apply.__qualname__ = f"apply_{name}"
        _kernels[name] = kk.kernel(apply)
    return _kernels[name]


def run(name, *arguments, workgroupsize=64):
    backend = kk.CPU()
    y = np.zeros_like(arguments[0])
    kernel_of(name)(backend, workgroupsize)(y, *arguments, ndrange=len(y))
    kk.synchronize(backend)
    return y


def samples(rng, low, high, n=20000):
    """Uniform in [low, high] and log-uniform magnitudes from 1e-30 up, both signs."""
    uniform = rng.uniform(low, high, n)
    top = math.log10(max(abs(low), abs(high)))
    magnitudes = 10.0 ** rng.uniform(-30, top, n) * np.where(rng.random(n) < 0.5, -1, 1)
    return np.concatenate([uniform, magnitudes[(magnitudes >= low) & (magnitudes <= high)]])


def reference(name, dtype, *arguments):
    """float64 for float32 arguments; extended precision (x86's long double) for float64
    arguments, but for erf and erfc (Python's float64 math.erf: the bound is widened)."""
    if name in ("erf", "erfc"):
        return np.array([getattr(math, name)(float(a)) for a in arguments[0]])
    wide = np.float64 if dtype == np.float32 else np.longdouble
    numpy_name = {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh",
                  "acosh": "arccosh", "atanh": "arctanh", "atan2": "arctan2",
                  "pow": "power"}.get(name, name)
    return getattr(np, numpy_name)(*(a.astype(wide) for a in arguments))


def ulps(got, expected, dtype):
    finite = np.isfinite(expected) & (np.abs(expected) <= np.finfo(dtype).max)
    exact = expected[finite]
    spacing = np.spacing(np.abs(exact).astype(dtype)).astype(np.longdouble)
    return np.abs(got[finite].astype(np.longdouble) - exact.astype(np.longdouble)) / spacing


@pytest.mark.parametrize("name, dtype", cases())
def test_accuracy_in_ulps_over_the_whole_domain(name, dtype):
    if not vectorized(name, np.dtype(dtype).itemsize * 8):
        pytest.skip(f"libmvec on this host has no vector {name}")
    rng = np.random.default_rng(7)
    if name in BINARY:
        (low_a, high_a), (low_b, high_b) = BINARY[name]
        a, b = samples(rng, low_a, high_a), samples(rng, low_b, high_b)
        n = min(len(a), len(b))
        arguments = (a[:n].astype(dtype), b[:n].astype(dtype))
    else:
        arguments = (samples(rng, *DOMAINS[name]).astype(dtype),)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = reference(name, dtype, *arguments)
    got = run(name, *arguments)
    bound = MAX_ULPS + (1.0 if name in ("erf", "erfc") and dtype == np.float64 else 0.0)
    error = ulps(got, expected, dtype)
    assert error.max() <= bound, f"{name} {np.dtype(dtype).name}: {error.max():.2f} ulps"


@pytest.mark.parametrize("name, dtype", cases())
def test_special_values_as_numpy_gives_them(name, dtype):
    if not vectorized(name, np.dtype(dtype).itemsize * 8):
        pytest.skip(f"libmvec on this host has no vector {name}")
    specials = np.array(SPECIALS + [np.finfo(dtype).max, -np.finfo(dtype).max], dtype)
    if name in BINARY:
        a, b = (grid.ravel() for grid in np.meshgrid(specials, specials))
        arguments = (a.astype(dtype), b.astype(dtype))
    else:
        arguments = (specials,)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = reference(name, dtype, *arguments).astype(dtype)
    got = run(name, *arguments)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    infinite = np.isinf(expected)
    np.testing.assert_array_equal(got[infinite], expected[infinite])
    zero = expected == 0
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(expected[zero]))
    close = ~np.isnan(expected) & ~infinite
    np.testing.assert_allclose(got[close], expected[close], rtol=4 * np.finfo(dtype).eps)


@pytest.mark.parametrize("name, dtype", cases())
def test_the_vector_loop_and_its_remainder_give_the_same_bits(name, dtype):
    if not vectorized(name, np.dtype(dtype).itemsize * 8):
        pytest.skip(f"libmvec on this host has no vector {name}")
    rng = np.random.default_rng(8)
    low, high = BINARY[name][0] if name in BINARY else DOMAINS[name]
    head = rng.uniform(low, min(high, 1e3), 5).astype(dtype)
    # 64 work-items per group: the first five run in the vector loop of a whole group,
    # the same five again as the last group's five (its remainder).
    a = np.concatenate([head, rng.uniform(low, min(high, 1e3), 123).astype(dtype), head])
    arguments = (a, np.full_like(a, 1.5)) if name in BINARY else (a,)
    got = run(name, *arguments)
    np.testing.assert_array_equal(got[:5], got[-5:])


def vector_calls(text: str, symbol: str) -> int:
    """How many calls of the vector function `symbol` the module's IR makes: one is the
    scalar function's that names it (on its argument in every lane), the others the
    vector loop's."""
    return len(re.findall(rf"call [^\n]*@{re.escape(symbol)}\(<", text))


def test_the_vector_loop_calls_the_vector_version():
    backend = kk.CPU()
    x = np.ones(256, np.float32)
    text = kk.code_llvm(kernel_of("sin"), backend, np.zeros_like(x), x, ndrange=256,
                        workgroupsize=64)
    assert vector_calls(text, vector_symbol(LIBRARY, "sinf", 1, 32)[0]) >= 2


def test_the_sse_versions_where_a_host_has_no_avx2():
    # A host without AVX2 gets libmvec's SSE versions (4 float32 or 2 float64 lanes):
    # the same code path, exercised here on this host's SSE units.
    import dataclasses

    from backends.cpu.vector_math import LIBMVEC_SSE
    backend = kk.CPU(threads=1)
    backend._target = dataclasses.replace(backend._target, vector_library=LIBMVEC_SSE)
    rng = np.random.default_rng(9)
    for dtype in (np.float32, np.float64):
        head = rng.uniform(-100, 100, 5).astype(dtype)
        x = np.concatenate([head, rng.uniform(-100, 100, 123).astype(dtype), head])
        y = np.zeros_like(x)
        kernel_of("sin")(backend, 64)(y, x, ndrange=len(x))
        kk.synchronize(backend)
        error = ulps(y, reference("sin", dtype, x), dtype)
        assert error.max() <= MAX_ULPS
        np.testing.assert_array_equal(y[:5], y[-5:])
        text = kk.code_llvm(kernel_of("sin"), backend, y, x, ndrange=len(x),
                            workgroupsize=64)
        symbol = vector_symbol(LIBMVEC_SSE, "sinf" if dtype == np.float32 else "sin", 1,
                               np.dtype(dtype).itemsize * 8)[0]
        assert f"@{symbol}(<" in text


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fmod_of_ours_is_exact_in_the_vector_loop_and_its_remainder(dtype):
    # libmvec has no fmod: ours (vector_math.vectorizable_fmod) divides in float64 and
    # corrects by one fma, and calls the C library for the lanes that cannot be done so
    # (infinities, nan, y = 0, quotients of 2**51 and more). fmod is exact: every bit
    # must be NumPy's (the C library's), the sign of zero too.
    rng = np.random.default_rng(10)
    finite = float(np.finfo(dtype).max)
    x = np.concatenate([samples(rng, -finite / 2, finite / 2, 3000),
                        rng.uniform(-100, 100, 3000)]).astype(dtype)
    y = np.concatenate([samples(rng, -1e6, 1e6, 3000), rng.uniform(-3, 3, 3000)]).astype(dtype)
    x, y = x[:min(len(x), len(y))], y[:min(len(x), len(y))]
    specials = np.array(SPECIALS + [finite, -finite, np.finfo(dtype).tiny,
                                    np.finfo(dtype).smallest_subnormal], dtype)
    a, b = (grid.ravel() for grid in np.meshgrid(specials, specials))
    x, y = np.concatenate([x, a, x[:5]]), np.concatenate([y, b, y[:5]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = np.fmod(x, y)
    got = run("fmod", x, y)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))
    text = kk.code_llvm(kernel_of("fmod"), kk.CPU(), got, x, y, ndrange=len(x),
                        workgroupsize=64)
    symbol = "fmodf" if dtype == np.float32 else "fmod"
    lanes = vector_lanes(LIBRARY, ir.FloatType() if dtype == np.float32 else ir.DoubleType())
    assert "frem" not in text and "fdiv <" in text   # a vector division, no C call per lane
    assert vector_calls(text, f"kk_fmod_{symbol}_x{lanes}") >= 2


@kk.kernel
def power_of_a_constant(y, a: kk.Const):
    i = kk.index(kk.Global)
    y[i] = a[i] ** 2.5


def test_a_constant_argument_keeps_the_call_vectorized():
    # Every work-item passes pow the same 2.5: the vector loop still calls the vector
    # version (LLVM once took the constant out of the scalar function, which then no
    # longer matched its vector version).
    x = np.linspace(0.5, 4.0, 200, dtype=np.float32)
    y = np.zeros_like(x)
    backend = kk.CPU()
    power_of_a_constant(backend, 64)(y, x, ndrange=len(x))
    kk.synchronize(backend)
    np.testing.assert_allclose(y, x.astype(np.float64) ** 2.5, rtol=4e-7)
    text = kk.code_llvm(power_of_a_constant, backend, y, x, ndrange=len(x), workgroupsize=64)
    assert vector_calls(text, vector_symbol(LIBRARY, "powf", 2, 32)[0]) >= 2
