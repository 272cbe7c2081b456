"""kk.deferred(fn, *args): a reference to `fn` compiled for the argument types, which the
driver's worklist translates into the module after the kernel is typed (the module's
text then holds the function, so it is cached and replayed like any module); calling the
reference calls the function. On every backend."""
import numpy as np
import pytest

import kernelkit as kk
from kernelkit.frontend.specialize import resolve_deferred, translate_kernel
from kernelkit.ir import types as T
from kernelkit.ir.printer import print_module


def cube(v):
    return v * v * v


def weighted(a, i, w):
    return a[i] * w + square_later(w)


def square_later(w):
    f = kk.deferred(square, w)
    return f(w)


def square(w):
    return w * w


@kk.kernel
def cubes(y, x: kk.Const):
    i = kk.index(kk.Global)
    f = kk.deferred(cube, x[i])
    y[i] = f(x[i]) + 1


@kk.kernel
def nested_deferred(y, x: kk.Const, w):
    i = kk.index(kk.Global)
    g = kk.deferred(weighted, x, i, w)
    y[i] = g(x, i, w)


def test_a_deferred_function_is_called_through_its_reference(backend):
    x = np.arange(-5, 5, dtype=np.float32)
    y = kk.zeros(backend, np.float32, 10)
    cubes(backend, 4)(y, kk.to_backend(backend, x), ndrange=10)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(y), x ** 3 + 1)


def test_deferred_functions_may_ask_for_more_deferred_functions(backend):
    x = np.arange(8, dtype=np.float64)
    y = kk.zeros(backend, np.float64, 8)
    nested_deferred(backend, 8)(y, kk.to_backend(backend, x), 3.0, ndrange=8)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(y), x * 3 + 9)


def test_the_worklist_adds_each_requested_function_to_the_module_once():
    f64 = T.ArrayType(T.float64, 1, "C")
    module = translate_kernel(nested_deferred.function,
                              (f64, T.ArrayType(T.float64, 1, "C", const=True), T.weak_float),
                              (8,))
    text = print_module(module)
    assert 'function = "weighted.deferred0"' in text
    assert "funcref<array<f64, 1, C, const>, i64, float -> f64>" in text
    assert "@weighted.deferred0" not in text            # not translated while typing
    resolve_deferred(module, (8,))
    assert sorted(module.functions) == ["nested_deferred", "square.deferred1",
                                        "square_later.0", "weighted.deferred0"]


def test_calling_a_reference_with_other_argument_types_is_an_error():
    @kk.kernel
    def wrong_types(y, x: kk.Const):
        i = kk.index(kk.Global)
        f = kk.deferred(cube, x[i])
        y[i] = f(i)

    x = np.zeros(4, np.float32)
    with pytest.raises(kk.CompileError, match=r"reference takes \(f32\), got \(i64\)"):
        kk.code_ir(wrong_types, kk.CPU(threads=1), x, x, ndrange=4, workgroupsize=4)


def test_a_reference_chosen_at_run_time_is_a_clear_error():
    @kk.kernel
    def chosen(y, x: kk.Const):
        i = kk.index(kk.Global)
        f = kk.deferred(cube, x[i]) if i % 2 == 0 else kk.deferred(square, x[i])
        y[i] = f(x[i])

    x = np.zeros(4, np.float32)
    with pytest.raises(kk.CompileError, match="not called where it is made"):
        kk.code_ir(chosen, kk.CPU(threads=1), x, x, ndrange=4, workgroupsize=4)


def test_deferring_something_that_is_not_a_function_is_an_error():
    @kk.kernel
    def not_a_function(y):
        i = kk.index(kk.Global)
        f = kk.deferred(3, y[i])
        y[i] = f(y[i])

    with pytest.raises(kk.CompileError, match="kk.deferred needs a plain Python function"):
        kk.code_ir(not_a_function, kk.CPU(threads=1), np.zeros(4, np.float32), ndrange=4,
                   workgroupsize=4)


def test_a_module_with_references_round_trips_through_its_text():
    from kernelkit.ir.parser import parse_module
    f64 = T.ArrayType(T.float64, 1, "C")
    module = translate_kernel(nested_deferred.function,
                              (f64, T.ArrayType(T.float64, 1, "C", const=True), T.weak_float),
                              (8,))
    resolve_deferred(module, (8,))
    text = print_module(module)
    assert print_module(parse_module(text)) == text
