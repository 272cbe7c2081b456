"""kk.print from inside kernels (output captured at the file-descriptor level, since it
comes from native code) and the reflection functions code_ir / code_llvm / code_native."""
import numpy as np

import kernelkit as kk

# --- kk.print ------------------------------------------------------------------------


@kk.kernel
def greet_from_item_two(x: kk.Const):
    i = kk.index(kk.Global)
    if i == 2:
        kk.print("hello from", i)


def test_print_from_one_work_item_writes_one_line_like_print(backend, capfd):
    x = kk.zeros(backend, np.float32, 8)
    capfd.readouterr()
    greet_from_item_two(backend, 4)(x, ndrange=8)
    kk.synchronize(backend)
    assert capfd.readouterr().out == "hello from 2\n"


@kk.kernel
def announce_every_item(x: kk.Const):
    i = kk.index(kk.Global)
    kk.print("item", i, "of", len(x))


def test_print_from_every_work_item_writes_one_line_each(backend, capfd):
    n = 12
    x = kk.zeros(backend, np.float32, n)
    capfd.readouterr()
    announce_every_item(backend, 4)(x, ndrange=n)
    kk.synchronize(backend)
    lines = capfd.readouterr().out.splitlines()
    assert sorted(lines) == sorted(f"item {i} of {n}" for i in range(n))


@kk.kernel
def show_first_element(x: kk.Const):
    kk.print("value", x[0])


def test_print_formats_integer_and_float_elements_like_print(backend, capfd):
    cases = [
        (np.array([7], np.int32), "value 7"),
        (np.array([-12345678901], np.int64), "value -12345678901"),
        (np.array([0.5], np.float64), "value 0.5"),
        (np.array([2.25], np.float32), "value 2.25"),
    ]
    for host, expected in cases:
        capfd.readouterr()
        show_first_element(backend, 1)(kk.to_backend(backend, host), ndrange=1)
        kk.synchronize(backend)
        assert capfd.readouterr().out == expected + "\n"


@kk.kernel
def say_done(x: kk.Const):
    kk.print("done")


def test_print_of_a_string_alone(backend, capfd):
    x = kk.zeros(backend, np.float32, 1)
    capfd.readouterr()
    say_done(backend, 1)(x, ndrange=1)
    kk.synchronize(backend)
    assert capfd.readouterr().out == "done\n"


# --- reflection ----------------------------------------------------------------------


@kk.kernel
def reflected_axpy(y, a, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = a * x[i] + y[i]


def reflection_arguments(backend, dtype=np.float32):
    return (kk.zeros(backend, dtype, 16), 2.0, kk.ones(backend, dtype, 16))


def test_code_ir_is_text_naming_the_kernel(backend):
    text = kk.code_ir(reflected_axpy, backend, *reflection_arguments(backend), ndrange=16, workgroupsize=8)
    assert isinstance(text, str)
    assert "reflected_axpy" in text


def test_code_llvm_is_llvm_ir_defining_the_kernel(backend):
    text = kk.code_llvm(reflected_axpy, backend, *reflection_arguments(backend), ndrange=16, workgroupsize=8)
    assert isinstance(text, str)
    assert "define" in text
    assert "reflected_axpy" in text


def test_code_native_is_assembly_naming_the_kernel(backend):
    text = kk.code_native(reflected_axpy, backend, *reflection_arguments(backend), ndrange=16, workgroupsize=8)
    llvm = kk.code_llvm(reflected_axpy, backend, *reflection_arguments(backend), ndrange=16, workgroupsize=8)
    assert isinstance(text, str)
    assert "reflected_axpy" in text
    assert text != llvm


def test_reflection_accepts_numpy_arrays_in_place_of_backend_arrays(backend):
    y = np.zeros(16, np.float32)
    x = np.ones(16, np.float32)
    for reflect in (kk.code_ir, kk.code_llvm, kk.code_native):
        text = reflect(reflected_axpy, backend, y, 2.0, x, ndrange=16, workgroupsize=8)
        assert "reflected_axpy" in text


def test_code_ir_is_deterministic(backend):
    first = kk.code_ir(reflected_axpy, backend, *reflection_arguments(backend), ndrange=16, workgroupsize=8)
    second = kk.code_ir(reflected_axpy, backend, *reflection_arguments(backend), ndrange=16, workgroupsize=8)
    assert first == second


def test_code_ir_differs_between_dtype_specializations(backend):
    single = kk.code_ir(reflected_axpy, backend, *reflection_arguments(backend, np.float32), ndrange=16,
                        workgroupsize=8)
    double = kk.code_ir(reflected_axpy, backend, *reflection_arguments(backend, np.float64), ndrange=16,
                        workgroupsize=8)
    assert single != double


def test_reflection_does_not_run_the_kernel(backend):
    y, a, x = reflection_arguments(backend)
    kk.code_ir(reflected_axpy, backend, y, a, x, ndrange=16, workgroupsize=8)
    kk.code_llvm(reflected_axpy, backend, y, a, x, ndrange=16, workgroupsize=8)
    kk.code_native(reflected_axpy, backend, y, a, x, ndrange=16, workgroupsize=8)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(y), np.zeros(16, np.float32))
