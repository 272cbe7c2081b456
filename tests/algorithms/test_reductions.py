"""kernelkit.algorithms' reductions against NumPy, on every backend: values, result
dtypes (NEP 50) and shapes, axes, empty inputs, NaN and tie rules, accuracy of float32
sums, user operators, errors, and gradients of programs that sum."""
import operator

import numpy as np
import pytest

import kernelkit as kk
import kernelkit.algorithms as ka
from enzyme_ext import Duplicated, Reverse, autodiff, gradient
from kernelkit.algorithms._reduction_kernels import reduction_kernels

# Sizes around the work-group (256), a row reduction's smallest segment (8 groups' worth)
# and enough for several passes.
SIZES = [1, 7, 255, 256, 257, 2048, 4097, 100_003]


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


# -- sums ------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", SIZES)
def test_a_float32_sum_is_a_shape_0_float32_array_as_accurate_as_pairwise_summation(
        backend, n):
    x = uniform(n)
    total = ka.sum(on(backend, x), backend=backend)
    assert total.shape == () and total.dtype == np.float32
    exact = np.sum(x, dtype=np.float64)
    assert float(host(total)) == pytest.approx(exact, rel=2e-7)


def test_a_float32_sum_of_a_million_values_is_within_numpy_s_accuracy(backend):
    x = np.random.default_rng(1).uniform(-1, 3, 1_000_000).astype(np.float32)
    exact = np.sum(x, dtype=np.float64)
    ours = float(host(ka.sum(on(backend, x), backend=backend)))
    assert abs(ours - exact) <= max(abs(float(np.sum(x)) - exact), 1e-6 * abs(exact))


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8,
                                   np.uint16, np.uint32, np.uint64, np.float16, np.float32,
                                   np.float64])
def test_sum_gives_numpy_s_result_dtype(backend, dtype):
    x = (np.arange(3000) % 7).astype(dtype)
    total = ka.sum(on(backend, x), backend=backend)
    expected = np.sum(x)
    assert host(total).dtype == expected.dtype
    assert host(total) == expected


def test_sum_of_float16_adds_in_float32_and_rounds_once(backend):
    x = np.ones(5000, np.float16)
    total = ka.sum(on(backend, x), backend=backend)
    assert host(total).dtype == np.float16 and host(total) == np.float16(5000)


def test_sum_with_a_dtype_sums_in_that_dtype(backend):
    x = np.full(1000, 100, np.int8)
    assert host(ka.sum(on(backend, x), dtype=np.int8, backend=backend)) == \
        np.sum(x, dtype=np.int8)            # wraps around, as NumPy's
    total = ka.sum(on(backend, uniform(1000)), dtype=np.float64, backend=backend)
    assert host(total).dtype == np.float64


def test_sum_propagates_nan_and_infinity(backend):
    x = uniform(3000)
    x[1234] = np.nan
    assert np.isnan(host(ka.sum(on(backend, x), backend=backend)))
    x[1234] = np.inf
    assert host(ka.sum(on(backend, x), backend=backend)) == np.inf


# -- axes and shapes ----------------------------------------------------------------------


AXIS_CASES = [((3, 4, 5), None), ((3, 4, 5), 0), ((3, 4, 5), 1), ((3, 4, 5), -1),
              ((7, 3000), 1), ((7, 3000), 0), ((3000, 7), 0), ((3000, 7), -1),
              ((2, 1000, 3), 1), ((5,), 0), ((), None)]


@pytest.mark.parametrize("shape, axis", AXIS_CASES)
@pytest.mark.parametrize("name", ["sum", "min", "max", "argmin", "argmax", "any", "all"])
def test_a_reduction_along_an_axis_matches_numpy(backend, shape, axis, name):
    rng = np.random.default_rng(2)
    x = rng.integers(-50, 50, shape).astype(np.float32)
    if name in ("any", "all"):
        x = (x > -45).astype(np.float32)
    result = getattr(ka, name)(on(backend, x), axis=axis, backend=backend)
    expected = getattr(np, name)(x, axis=axis)
    assert result.shape == np.shape(expected)
    assert host(result).dtype == np.asarray(expected).dtype
    np.testing.assert_array_equal(host(result), expected)


@pytest.mark.parametrize("view", ["strided", "transposed", "sliced"])
def test_a_non_contiguous_input_is_reduced_as_numpy_reduces_it(backend, view):
    x = uniform(6000).reshape(60, 100)
    base = on(backend, x)
    viewed, expected = {"strided": (base[:, ::3], x[:, ::3]),
                        "transposed": (base.T, x.T),
                        "sliced": (base[5:, 1:], x[5:, 1:])}[view]
    np.testing.assert_allclose(host(ka.sum(viewed, axis=1, backend=backend)),
                               np.sum(expected, axis=1), rtol=1e-6)
    assert host(ka.argmax(viewed, backend=backend)) == np.argmax(expected)
    np.testing.assert_array_equal(host(ka.min(viewed[0], backend=backend)),
                                  np.min(expected[0]))


# -- empty inputs ---------------------------------------------------------------------------


def test_an_empty_sum_is_0_and_an_empty_min_or_argmin_is_numpy_s_error(backend):
    empty = on(backend, np.zeros(0, np.float32))
    total = ka.sum(empty, backend=backend)
    assert total.shape == () and host(total) == 0 and host(total).dtype == np.float32
    assert host(ka.any(empty, backend=backend)) == np.False_
    assert host(ka.all(empty, backend=backend)) == np.True_
    with pytest.raises(ValueError, match="zero-size array to reduction operation minimum"):
        ka.min(empty, backend=backend)
    with pytest.raises(ValueError, match="attempt to get argmax of an empty sequence"):
        ka.argmax(empty, backend=backend)


def test_reducing_an_axis_of_length_0_or_an_empty_outer_axis(backend):
    x = on(backend, np.zeros((0, 3), np.float32))
    np.testing.assert_array_equal(host(ka.sum(x, axis=0, backend=backend)), np.zeros(3))
    assert ka.min(x, axis=1, backend=backend).shape == (0,)
    with pytest.raises(ValueError, match="no identity"):
        ka.max(x, axis=0, backend=backend)
    assert host(ka.reduce(operator.add, x, axis=0, init=5, backend=backend)).tolist() == \
        [5, 5, 5]


# -- NaN and ties ---------------------------------------------------------------------------


@pytest.mark.parametrize("n", [10, 3000, 100_003])
def test_min_and_max_propagate_nan_and_argmin_argmax_find_the_first_nan(backend, n):
    x = uniform(n, seed=3)
    x[n // 3] = np.nan
    x[n // 2] = np.nan
    device = on(backend, x)
    assert np.isnan(host(ka.min(device, backend=backend)))
    assert np.isnan(host(ka.max(device, backend=backend)))
    assert host(ka.argmin(device, backend=backend)) == np.argmin(x) == n // 3
    assert host(ka.argmax(device, backend=backend)) == np.argmax(x) == n // 3


@pytest.mark.parametrize("n", [10, 3000, 100_003])
def test_argmin_and_argmax_give_the_first_of_equal_elements(backend, n):
    x = np.zeros(n, np.int32)
    x[n - 1] = x[n // 2] = x[n // 4] = 9
    x[n // 5] = x[n // 7 + 1] = -9
    device = on(backend, x)
    assert host(ka.argmax(device, backend=backend)) == np.argmax(x)
    assert host(ka.argmin(device, backend=backend)) == np.argmin(x)


def test_any_and_all_take_nan_as_true(backend):
    x = np.zeros(1000, np.float32)
    assert not host(ka.any(on(backend, x), backend=backend))
    x[700] = np.nan
    assert host(ka.any(on(backend, x), backend=backend))
    assert host(ka.all(on(backend, np.full(1000, np.nan, np.float32)), backend=backend))


# -- reduce and mapreduce --------------------------------------------------------------------


@pytest.mark.parametrize("op, ufunc", [(operator.add, np.add), (operator.mul, np.multiply),
                                       (min, np.minimum), (max, np.maximum),
                                       (operator.and_, np.bitwise_and),
                                       (operator.or_, np.bitwise_or),
                                       (operator.xor, np.bitwise_xor)])
def test_reduce_by_python_s_operators_is_numpy_s_ufunc_reduce(backend, op, ufunc):
    x = np.random.default_rng(4).integers(1, 4, (6, 500)).astype(np.int16)
    for axis in (None, 0, 1):
        result = ka.reduce(op, on(backend, x), axis=axis, backend=backend)
        expected = ufunc.reduce(x, axis=axis)
        assert host(result).dtype == expected.dtype
        np.testing.assert_array_equal(host(result), expected)


def add_modulo_1000(a, b):
    return (a + b) % 1000


def test_reduce_by_a_device_function_of_one_s_own_with_init_first(backend):
    x = np.random.default_rng(5).integers(0, 1000, 5000)
    expected = int(np.sum(x)) % 1000
    assert host(ka.reduce(add_modulo_1000, on(backend, x), backend=backend)) == expected
    assert host(ka.reduce(add_modulo_1000, on(backend, x), init=999, backend=backend)) == \
        (expected + 999) % 1000


def bitwise_or(a, b):
    return a | b


def test_reduce_by_a_device_function_needs_init_only_for_no_elements(backend):
    x = on(backend, np.array([1, 2, 4, 8], np.uint8))
    assert host(ka.reduce(bitwise_or, x, backend=backend)) == 15
    empty = on(backend, np.zeros(0, np.uint8))
    with pytest.raises(ValueError, match="give init"):
        ka.reduce(bitwise_or, empty, backend=backend)
    assert host(ka.reduce(bitwise_or, empty, init=np.uint8(16), backend=backend)) == 16


def square(v):
    return v * v


def as_float64(v):
    return np.float64(v)


def test_mapreduce_reduces_f_of_each_element_in_f_s_result_type(backend):
    x = uniform(10_000, seed=6)
    result = ka.mapreduce(square, operator.add, on(backend, x), backend=backend)
    assert host(result).dtype == np.float32
    assert float(host(result)) == pytest.approx(np.sum(x.astype(np.float64) ** 2), rel=1e-6)
    result = ka.mapreduce(as_float64, max, on(backend, x.reshape(100, 100)), axis=0,
                          backend=backend)
    assert host(result).dtype == np.float64
    np.testing.assert_array_equal(host(result), x.reshape(100, 100).max(axis=0))


def test_reducing_again_with_the_same_functions_makes_no_new_kernels(backend):
    x = on(backend, uniform(1000))
    run_or_compile(lambda: ka.mapreduce(square, operator.add, x, backend=backend))
    made = reduction_kernels.cache_info().misses
    for _ in range(3):
        run_or_compile(lambda: ka.mapreduce(square, operator.add, x, backend=backend))
    assert reduction_kernels.cache_info().misses == made


def test_every_kernel_compiles_and_agrees_with_numpy(backend):
    """One call for each kernel and path: rows and columns, one and several passes,
    arg-reductions, and the flat copy of a non-contiguous input."""
    x = uniform(300_000, seed=7)
    calls = [
        (lambda a: ka.sum(a, backend=backend), np.sum(x, dtype=np.float64), 1e-6),
        (lambda a: ka.sum(a.reshape(300, 1000), axis=0, backend=backend),
         x.reshape(300, 1000).sum(0), 1e-6),
        (lambda a: ka.argmin(a, backend=backend), np.argmin(x), 0),
        (lambda a: ka.argmax(a.reshape(3000, 100), axis=0, backend=backend),
         x.reshape(3000, 100).argmax(0), 0),
        (lambda a: ka.max(a.reshape(600, 500)[:, ::2], axis=1, backend=backend),
         x.reshape(600, 500)[:, ::2].max(1), 0),
    ]
    for call, expected, tolerance in calls:
        result = run_or_compile(lambda: call(on(backend, x)))
        if result is not None:
            np.testing.assert_allclose(host(result), expected, rtol=tolerance)


# -- errors ------------------------------------------------------------------------------------


def test_bad_arguments_raise_numpy_s_exceptions_with_what_to_do(backend):
    x = on(backend, uniform(10))
    with pytest.raises(TypeError, match="takes an array"):
        ka.sum([1.0, 2.0], backend=backend)
    with pytest.raises(np.exceptions.AxisError):
        ka.sum(x, axis=1, backend=backend)
    with pytest.raises(TypeError, match="axis must be an int or None"):
        ka.max(x, axis=(0,), backend=backend)
    with pytest.raises(TypeError, match="plain Python function of 2 arguments"):
        ka.reduce("add", x, backend=backend)
    with pytest.raises(TypeError, match="lambda, which kernels cannot compile; define it "
                                        "with def"):
        ka.reduce(lambda a, b: a + b, x, backend=backend)
    with pytest.raises(TypeError, match="must take 2 positional arguments"):
        ka.reduce(square, x, backend=backend)
    with pytest.raises(TypeError, match="plain Python function of 1 argument"):
        ka.mapreduce(np.sin, operator.add, x, backend=backend)
    with pytest.raises(TypeError, match="bitwise_and takes bools and integers"):
        ka.reduce(operator.and_, x, backend=backend)


# -- gradients ---------------------------------------------------------------------------------


@kk.kernel
def copy_total(out, total: kk.Const):
    out[0] = total[()]


@kk.kernel
def weighted_sum(out, y: kk.Const, weights: kk.Const):
    total = 0.0
    for k in range(len(y)):
        total += weights[k] * y[k]
    out[0] = total


@pytest.mark.parametrize("n", [10, 100_003])
def test_the_gradient_of_a_program_through_sum_is_ones(backend, n):
    def program(x, out):
        copy_total(backend, 1)(out, ka.sum(x, backend=backend), ndrange=1)

    dx = kk.zeros(backend, np.float64, n)
    out = kk.zeros(backend, np.float64, 1)
    autodiff(Reverse, program, Duplicated(on(backend, uniform(n, np.float64)), dx),
             Duplicated(out, on(backend, np.ones(1))))
    np.testing.assert_array_equal(host(dx), np.ones(n))


def test_the_gradient_through_sums_along_axes_of_a_3d_array(backend):
    """While a program is recorded, an input of several dimensions is read through a flat
    copy of its own, and a result of several dimensions written through one (the
    recording follows arrays, not views of them)."""
    x = uniform(3000, np.float64, seed=8).reshape(6, 5, 100)
    weights = np.linspace(0.5, 2.0, 6)

    def loss(x):
        out = kk.zeros(backend, np.float64, 1)
        sums = ka.sum(ka.sum(x, axis=2, backend=backend), axis=1, backend=backend)
        weighted_sum(backend, 1)(out, sums, on(backend, weights), ndrange=1)
        return out

    dx = gradient(loss)(on(backend, x))
    np.testing.assert_allclose(host(dx), np.broadcast_to(weights[:, None, None], x.shape))


def test_the_cpu_keeps_a_chunk_a_loop_and_sums_in_the_same_order(monkeypatch):
    """On a GPU a work-item's chunk of CHUNK loads is unrolled (its loads in flight at
    once); on the CPU, whose work-items are a vector loop, an unrolled chunk made each
    vector read CHUNK rows a kilobyte apart, so the chunk stays a loop there
    (`chunk_length`). Both combine the elements in the same order: the same bits."""
    import re

    from kernelkit.algorithms import _reduction_kernels as kernels
    from kernelkit.algorithms._reduction_operators import ADD, same
    backend = kk.CPU()
    assert kernels.chunk_length(backend) is kernels._chunk_known_at_launch
    from kernelkit.backend import backend_class
    assert kernels.chunk_length(backend_class("cuda").compile_only("sm_90")) \
        is kernels._chunk_constant
    x = on(backend, np.random.default_rng(3).standard_normal(300_007).astype(np.float32))
    looped = host(ka.sum(x))
    monkeypatch.setattr(kernels, "chunk_length", lambda _: kernels._chunk_constant)
    unrolled = host(ka.sum(x))
    assert looped.tobytes() == unrolled.tobytes()

    def widest_vector_body(chunk) -> int:
        """The most vector loads of float32 in one vector loop body of the rows kernel."""
        rows = kernels.reduction_kernels(same, ADD.function, np.dtype(np.float32),
                                         chunk).rows
        values, out = np.zeros(1 << 20, np.float32), np.zeros(16, np.float32)
        llvm_ir = kk.code_llvm(rows, backend, out, values, values.size, 16,
                               np.float32(0), False, ndrange=16 * 256, workgroupsize=256)
        bodies = re.findall(r"^vector\.body\d*:.*?(?=^\S+:)", llvm_ir, re.S | re.M)
        return max(len(re.findall(r"load <\d+ x float>", body)) for body in bodies)

    assert widest_vector_body(kernels._chunk_constant) >= kernels.CHUNK
    assert widest_vector_body(kernels._chunk_known_at_launch) < kernels.CHUNK
