"""kernelkit.algorithms' scans against NumPy, on every backend: inclusive and exclusive
running sums, result dtypes (NEP 50) and shapes, axes, non-contiguous and empty inputs,
Python's operators and one's own with init, errors, and gradients of programs that
scan."""
import operator

import numpy as np
import pytest

import kernelkit as kk
import kernelkit.algorithms as ka
from enzyme_ext import gradient

# Sizes around the work-group (256), a scan's tile (4096) and a segment, and enough for
# the three-phase scan with several segments.
SIZES = [1, 7, 255, 256, 257, 4095, 4096, 4097, 100_003]


def on(backend, values):
    return kk.to_backend(backend, np.ascontiguousarray(values))


def host(array):
    return kk.to_numpy(array)


def uniform(n, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).random(n).astype(dtype)


def run_or_compile(call):
    """`call()`, where a compile-only backend's refusal to run after compiling counts as
    done (so that every kernel of a test is compiled for it, not only the first)."""
    try:
        return call()
    except Exception as error:
        if type(error).__name__ == "CompileOnlyError":
            return None
        raise


def relative_error(result, exact):
    return np.max(np.abs(result - exact) / np.maximum(np.abs(exact), 1.0))


# -- cumsum ---------------------------------------------------------------------------------


@pytest.mark.parametrize("n", SIZES)
def test_cumsum_of_float32_matches_numpy_in_float64(backend, n):
    x = uniform(n)
    result = ka.cumsum(on(backend, x), backend=backend)
    assert result.shape == (n,) and host(result).dtype == np.float32
    assert relative_error(host(result), np.cumsum(x, dtype=np.float64)) < 1e-6


@pytest.mark.parametrize("n", SIZES)
def test_an_exclusive_cumsum_starts_from_0(backend, n):
    x = np.random.default_rng(1).integers(0, 100, n).astype(np.int32)
    result = ka.cumsum(on(backend, x), exclusive=True, backend=backend)
    expected = np.concatenate([[0], np.cumsum(x)[:-1]])
    assert host(result).dtype == np.int64
    np.testing.assert_array_equal(host(result), expected)


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.int32, np.int64, np.uint8, np.uint32,
                                   np.uint64, np.float32, np.float64])
def test_cumsum_gives_numpy_s_result_dtype(backend, dtype):
    x = (np.arange(5000) % 3).astype(dtype)
    result = ka.cumsum(on(backend, x), backend=backend)
    expected = np.cumsum(x)
    assert host(result).dtype == expected.dtype
    np.testing.assert_array_equal(host(result), expected)


def test_cumsum_with_a_dtype_and_of_float16(backend):
    x = np.full(1000, 100, np.int8)
    np.testing.assert_array_equal(host(ka.cumsum(on(backend, x), dtype=np.int8,
                                                 backend=backend)),
                                  np.cumsum(x, dtype=np.int8))   # wrapping, as NumPy's
    ones = ka.cumsum(on(backend, np.ones(5000, np.float16)), backend=backend)
    assert host(ones).dtype == np.float16
    # Summed in float32, each rounded once: NumPy's float16 running sum stops at 2048.
    np.testing.assert_array_equal(host(ones), np.arange(1, 5001).astype(np.float16))


@pytest.mark.parametrize("shape, axis", [((3, 4, 5), None), ((3, 4, 5), 0), ((3, 4, 5), 1),
                                         ((3, 4, 5), -1), ((5, 5000), 1), ((5000, 5), 0),
                                         ((5000, 5), 1), ((2, 3000, 3), 1), ((), None)])
def test_cumsum_along_an_axis_matches_numpy(backend, shape, axis):
    x = np.random.default_rng(2).integers(-9, 9, shape).astype(np.float64)
    result = ka.cumsum(on(backend, x), axis=axis, backend=backend)
    expected = np.cumsum(x, axis=axis)
    assert result.shape == expected.shape
    np.testing.assert_array_equal(host(result), expected)


def test_a_non_contiguous_input_is_scanned_as_numpy_scans_it(backend):
    x = np.random.default_rng(3).integers(-9, 9, (40, 300)).astype(np.int64)
    base = on(backend, x)
    np.testing.assert_array_equal(host(ka.cumsum(base[:, ::2], axis=1, backend=backend)),
                                  np.cumsum(x[:, ::2], axis=1))
    np.testing.assert_array_equal(host(ka.cumsum(base.T, backend=backend)), np.cumsum(x.T))
    np.testing.assert_array_equal(host(ka.cumsum(base[3, ::3], backend=backend)),
                                  np.cumsum(x[3, ::3]))


def test_an_empty_input_gives_an_empty_result(backend):
    result = ka.cumsum(on(backend, np.zeros(0, np.int16)), backend=backend)
    assert result.shape == (0,) and host(result).dtype == np.int64
    assert ka.cumsum(on(backend, np.zeros((0, 4))), axis=1, backend=backend).shape == (0, 4)
    assert ka.accumulate(max, on(backend, np.zeros((3, 0))), axis=1,
                         backend=backend).shape == (3, 0)


# -- accumulate -------------------------------------------------------------------------------


@pytest.mark.parametrize("op, ufunc", [(operator.mul, np.multiply), (min, np.minimum),
                                       (max, np.maximum), (operator.and_, np.bitwise_and),
                                       (operator.or_, np.bitwise_or),
                                       (operator.xor, np.bitwise_xor)])
def test_accumulate_by_python_s_operators_is_numpy_s_ufunc_accumulate(backend, op, ufunc):
    x = np.random.default_rng(4).integers(1, 64, 10_000).astype(np.uint16)
    if op is operator.mul:
        x = np.where(x > 60, 3, 1).astype(np.uint16)   # products that stay exact
    result = ka.accumulate(op, on(backend, x), backend=backend)
    expected = ufunc.accumulate(x)
    assert host(result).dtype == expected.dtype
    np.testing.assert_array_equal(host(result), expected)


def test_running_min_and_max_propagate_nan(backend):
    x = uniform(10_000, seed=5)
    x[4321] = np.nan
    for op, ufunc in ((min, np.minimum), (max, np.maximum)):
        np.testing.assert_array_equal(host(ka.accumulate(op, on(backend, x), backend=backend)),
                                      ufunc.accumulate(x))


def test_an_exclusive_scan_by_a_known_operator_starts_from_its_identity(backend):
    x = np.random.default_rng(6).integers(-100, 100, 5000).astype(np.int32)
    result = ka.accumulate(max, on(backend, x), exclusive=True, backend=backend)
    expected = np.concatenate([[np.iinfo(np.int32).min], np.maximum.accumulate(x)[:-1]])
    np.testing.assert_array_equal(host(result), expected)


def add_modulo_1000(a, b):
    return (a + b) % 1000


@pytest.mark.parametrize("exclusive", [False, True])
def test_accumulate_by_a_device_function_of_one_s_own_starts_from_init(backend, exclusive):
    x = np.random.default_rng(7).integers(0, 1000, 20_000)
    result = ka.accumulate(add_modulo_1000, on(backend, x), exclusive=exclusive, init=7,
                           backend=backend)
    running = (7 + np.cumsum(x)) % 1000
    expected = np.concatenate([[7], running[:-1]]) if exclusive else running
    np.testing.assert_array_equal(host(result), expected)


def test_accumulate_along_an_axis_with_init(backend):
    x = np.random.default_rng(8).integers(0, 1000, (30, 700))
    for axis in (0, 1):
        result = ka.accumulate(add_modulo_1000, on(backend, x), axis=axis, init=1,
                               backend=backend)
        np.testing.assert_array_equal(host(result), (1 + np.cumsum(x, axis=axis)) % 1000)


def test_every_kernel_compiles_and_agrees_with_numpy(backend):
    """One call for each kernel and path: rows and columns, one and several segments."""
    x = np.random.default_rng(9).integers(-9, 9, 300_000).astype(np.int64)
    calls = [
        (lambda a: ka.cumsum(a, backend=backend), np.cumsum(x)),
        (lambda a: ka.cumsum(a[:1000], backend=backend), np.cumsum(x[:1000])),
        (lambda a: ka.cumsum(a.reshape(3000, 100), axis=0, backend=backend),
         np.cumsum(x.reshape(3000, 100), axis=0)),
        (lambda a: ka.cumsum(a.reshape(100, 3000), axis=1, exclusive=True, backend=backend),
         np.cumsum(x.reshape(100, 3000), axis=1) - x.reshape(100, 3000)),
    ]
    for call, expected in calls:
        result = run_or_compile(lambda: call(on(backend, x)))
        if result is not None:
            np.testing.assert_array_equal(host(result), expected)


# -- errors ------------------------------------------------------------------------------------


def test_bad_arguments_raise_numpy_s_exceptions_with_what_to_do(backend):
    x = on(backend, np.arange(10))
    with pytest.raises(TypeError, match="takes an array"):
        ka.cumsum(3.0, backend=backend)
    with pytest.raises(np.exceptions.AxisError):
        ka.cumsum(x, axis=-2, backend=backend)
    with pytest.raises(ValueError, match="starts from init; give init"):
        ka.accumulate(add_modulo_1000, x, exclusive=True, backend=backend)
    with pytest.raises(TypeError, match="plain Python function of 2 arguments"):
        ka.accumulate(np.add.accumulate, x, backend=backend)
    with pytest.raises(TypeError, match="bitwise_xor takes bools and integers"):
        ka.accumulate(operator.xor, on(backend, uniform(5)), backend=backend)


# -- gradients ---------------------------------------------------------------------------------


@kk.kernel
def weighted_sum(out, y: kk.Const, weights: kk.Const):
    total = 0.0
    for k in range(len(y)):
        total += weights[k] * y[k]
    out[0] = total


@pytest.mark.parametrize("n", [10, 100_003])
@pytest.mark.parametrize("exclusive", [False, True])
def test_the_gradient_of_a_program_through_cumsum_is_the_reversed_cumsum(backend, n,
                                                                           exclusive):
    weights = np.random.default_rng(10).random(n)

    def loss(x):
        out = kk.zeros(backend, np.float64, 1)
        running = ka.cumsum(x, exclusive=exclusive, backend=backend)
        weighted_sum(backend, 1)(out, running, on(backend, weights), ndrange=1)
        return out

    dx = gradient(loss)(on(backend, uniform(n, np.float64)))
    after = np.cumsum(weights[::-1])[::-1]        # d loss / d x_i = sum of weights from i on
    expected = after - weights if exclusive else after
    np.testing.assert_allclose(host(dx), expected, rtol=1e-12, atol=1e-12)


@kk.kernel
def weighted_sum_2d(out, y: kk.Const, weights: kk.Const):
    total = 0.0
    for i in range(y.shape[0]):
        for j in range(y.shape[1]):
            total += weights[i, j] * y[i, j]
    out[0] = total


def test_the_gradient_through_a_cumsum_along_an_axis_of_a_2d_array(backend):
    """While a program is recorded, the 2-d input and result go through flat copies of
    their own (the recording follows arrays, not views of them)."""
    weights = np.random.default_rng(11).random((40, 300))

    def loss(x):
        out = kk.zeros(backend, np.float64, 1)
        weighted_sum_2d(backend, 1)(out, ka.cumsum(x, axis=1, backend=backend),
                                    on(backend, weights), ndrange=1)
        return out

    dx = gradient(loss)(on(backend, uniform(12_000, np.float64).reshape(40, 300)))
    np.testing.assert_allclose(host(dx), np.cumsum(weights[:, ::-1], axis=1)[:, ::-1],
                               rtol=1e-12)
