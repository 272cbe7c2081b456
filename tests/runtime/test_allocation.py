"""Allocation as users write it: KernelAbstractions' order (backend, dtype, shape) with
dtype= and shape= as keywords; empty, full and the *_like functions; the order named in
the error where NumPy's order (shape, dtype) is written; and dtypes kernels cannot use
refused when the array is made, naming the dtypes they take."""
import inspect

import numpy as np
import pytest

import kernelkit as kk
from kernelkit import memory
from kernelkit.ir import types as T


def test_empty_full_and_the_like_functions_give_arrays_of_the_dtype_and_shape(backend):
    for scalar in T.SCALAR_TYPES:    # every dtype the compiler has a scalar type for
        assert kk.empty(backend, scalar.numpy_dtype, 2).dtype == scalar.numpy_dtype
    empty = kk.empty(backend, np.int16, (2, 3))
    full = kk.full(backend, np.float32, 5, 2.5)
    assert (empty.dtype, empty.shape) == (np.int16, (2, 3))
    np.testing.assert_array_equal(kk.to_numpy(full), np.full(5, 2.5, np.float32))
    for like, fill in ((kk.zeros_like, 0), (kk.ones_like, 1), (kk.empty_like, None)):
        made = like(full)
        assert kk.get_backend(made) is kk.get_backend(full)
        assert (made.dtype, made.shape) == (np.float32, (5,))
        if fill is not None:
            np.testing.assert_array_equal(kk.to_numpy(made), np.full(5, fill, np.float32))
    other = kk.zeros_like(full, dtype=np.int8, shape=(2, 2))
    assert (other.dtype, other.shape) == (np.int8, (2, 2))


def test_dtype_and_shape_are_taken_as_keywords_in_either_order(backend):
    for make in (kk.zeros, kk.ones, kk.empty, kk.allocate):
        made = make(backend, shape=(3, 2), dtype=np.uint8)
        assert (made.dtype, made.shape) == (np.uint8, (3, 2))
    full = kk.full(backend, shape=np.int64(4), value=7, dtype=np.int32)
    np.testing.assert_array_equal(kk.to_numpy(full), [7, 7, 7, 7])


@pytest.mark.parametrize("call, expected", [
    (lambda b: kk.zeros(b, 10, np.float32), "kk.zeros(backend, np.float32, 10)"),
    (lambda b: kk.ones(b, (3, 4), "float64"), "kk.ones(backend, np.float64, (3, 4))"),
    (lambda b: kk.empty(b, np.int64(8), np.int32), "kk.empty(backend, np.int32, 8)"),
    (lambda b: kk.allocate(b, [2, 2], np.int8), "kk.allocate(backend, np.int8, (2, 2))"),
    (lambda b: kk.full(b, 4, np.float32, 0.5), "kk.full(backend, np.float32, 4, 0.5)"),
], ids=["zeros", "ones", "empty", "allocate", "full"])
def test_a_shape_where_the_dtype_goes_is_an_error_that_writes_the_call_in_order(call,
                                                                                expected):
    with pytest.raises(kk.KernelkitError, match="got a shape where the dtype goes") as info:
        call(kk.CPU(threads=1))
    assert "(backend, dtype, shape" in str(info.value)
    assert str(info.value).endswith(f"write {expected}")


@pytest.mark.parametrize("dtype, shown", [
    (np.complex64, "complex64"), (object, "object"), (str, "str"), ("datetime64[s]",
                                                                    "datetime64[s]"),
    (np.dtype(">f4"), ">f4"), ([("x", np.float32), ("y", np.float32)], "[('x', '<f4')"),
], ids=["complex64", "object", "str", "datetime", "big-endian", "structured"])
def test_a_dtype_kernels_cannot_use_is_refused_at_allocation_naming_it_and_the_accepted(
        backend, dtype, shown):
    for make in (kk.zeros, kk.ones, kk.empty, kk.allocate):
        with pytest.raises(kk.KernelkitError, match="kernels cannot use arrays of dtype") as info:
            make(backend, dtype, 4)
        message = str(info.value)
        assert shown in message
        assert all(str(scalar.numpy_dtype) in message for scalar in T.SCALAR_TYPES)
    with pytest.raises(kk.KernelkitError, match="kernels cannot use arrays of dtype"):
        kk.full(backend, dtype, 4, 0)
    with pytest.raises(kk.KernelkitError, match="kernels cannot use arrays of dtype"):
        kk.zeros_like(np.zeros(4, np.float32), dtype=dtype)


@pytest.mark.parametrize("shape", [2.5, (2, 3.0), (-1, 2), True, "3"])
def test_a_shape_that_is_not_whole_numbers_of_zero_or_more_is_refused(shape):
    with pytest.raises(kk.KernelkitError, match=r"kk.zeros\(backend, dtype, shape\): the shape"):
        kk.zeros(kk.CPU(threads=1), np.float32, shape)


@pytest.mark.parametrize("call, message", [
    (lambda b: kk.full(b, np.uint8, 3, 300), "300 cannot be an element of a uint8 array"),
    (lambda b: kk.full(b, np.int32, 3, 1.5), "1.5 is not a int32 value"),
    (lambda b: kk.zeros(b, None, 3), "give the dtype"),
    (lambda b: kk.zeros_like(np.zeros(3), (3, 4)), r"write kk.zeros_like\(array, "
                                                   r"shape=\(3, 4\)\)"),
], ids=["out of range", "a fraction for an integer", "no dtype", "a shape for a dtype"])
def test_a_value_no_element_can_hold_a_missing_dtype_and_a_misplaced_shape_are_errors(
        call, message):
    with pytest.raises(kk.BackendError, match=message):
        call(kk.CPU())


def test_every_public_function_of_the_memory_module_has_a_docstring_with_an_example():
    public = [value for name, value in vars(memory).items()
              if inspect.isfunction(value) and not name.startswith("_")
              and value.__module__ == memory.__name__]
    assert {f.__name__ for f in public} >= {"zeros", "ones", "empty", "full", "allocate",
                                            "zeros_like", "ones_like", "empty_like",
                                            "to_backend", "to_numpy", "copyto"}
    for function in public:
        # an example: a line of code, indented past the docstring's text
        examples = [line for line in function.__doc__.splitlines()
                    if line.startswith(" " * 8) and "kk." in line]
        assert examples, f"kk.{function.__name__} has no example in its docstring"
        assert getattr(kk, function.__name__) is function
