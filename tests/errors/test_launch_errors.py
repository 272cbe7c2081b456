"""Errors at launch time: kk.LaunchError for launches that do not fit the kernel or its
static sizes, and IndexError from a bounds-checking (debug=True) backend for an
out-of-bounds access, with a message naming kernel, line, index and shape, and no
memory written out of bounds. The backend stays usable after every error."""
import functools
import re

import numpy as np
import pytest

import kernelkit as kk

import source_lines

line_starting_with = functools.partial(source_lines.line_starting_with, __file__)


@kk.kernel
def add_one(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i] + 1


def inputs(backend, n=16):
    return kk.zeros(backend, np.float32, n), kk.to_backend(backend, np.arange(n, dtype=np.float32))


def assert_backend_still_works(backend):
    y, x = inputs(backend)
    add_one(backend, 4)(y, x, ndrange=16)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(y), np.arange(16) + 1)


# --- LaunchError ---------------------------------------------------------------------


def test_too_few_arguments_is_a_launch_error_naming_the_kernel(backend):
    y, _ = inputs(backend)
    with pytest.raises(kk.LaunchError) as info:
        add_one(backend, 4)(y, ndrange=16)
    assert "add_one" in str(info.value)
    assert_backend_still_works(backend)


def test_too_many_arguments_is_a_launch_error_naming_the_kernel(backend):
    y, x = inputs(backend)
    with pytest.raises(kk.LaunchError) as info:
        add_one(backend, 4)(y, x, x, ndrange=16)
    assert "add_one" in str(info.value)
    assert_backend_still_works(backend)


def test_missing_ndrange_is_a_launch_error(backend):
    y, x = inputs(backend)
    with pytest.raises(kk.LaunchError) as info:
        add_one(backend, 4)(y, x)
    assert "add_one" in str(info.value)
    assert "ndrange" in str(info.value)
    assert_backend_still_works(backend)


def test_launch_ndrange_different_from_the_static_one_is_a_launch_error(backend):
    y, x = inputs(backend)
    with pytest.raises(kk.LaunchError) as info:
        add_one(backend, 4, 16)(y, x, ndrange=8)
    message = str(info.value)
    assert "add_one" in message and "16" in message and "8" in message
    np.testing.assert_array_equal(kk.to_numpy(y), np.zeros(16, np.float32))
    assert_backend_still_works(backend)


def test_launch_workgroupsize_different_from_the_static_one_is_a_launch_error(backend):
    y, x = inputs(backend)
    with pytest.raises(kk.LaunchError) as info:
        add_one(backend, 4)(y, x, ndrange=16, workgroupsize=8)
    message = str(info.value)
    assert "add_one" in message and "4" in message and "8" in message
    assert_backend_still_works(backend)


def test_workgroupsize_with_other_dimensions_than_ndrange_is_a_launch_error(backend):
    y, x = inputs(backend)
    with pytest.raises(kk.LaunchError) as info:
        add_one(backend, (4, 4))(y, x, ndrange=16)
    assert "add_one" in str(info.value)
    assert_backend_still_works(backend)


def test_ndrange_of_five_dimensions_is_a_launch_error(backend):
    y, x = inputs(backend)
    with pytest.raises(kk.LaunchError) as info:
        add_one(backend, (1, 1, 1, 1, 1))(y, x, ndrange=(2, 2, 2, 2, 2))
    assert "add_one" in str(info.value) and "1 to 4 ints" in str(info.value)
    assert_backend_still_works(backend)


def test_launch_errors_are_kernelkit_errors(backend):
    y, x = inputs(backend)
    with pytest.raises(kk.LaunchError, match="kernel 'add_one': no ndrange given") as info:
        add_one(backend, 4)(y, x)
    assert isinstance(info.value, kk.KernelkitError)


class _Settings:
    """A plain object: kernels take its fields, not the object."""

    scale = 2.0


class _HostBuffer:
    """Speaks only NumPy's array interface (as some libraries' host buffers do)."""

    def __init__(self):
        self.array = np.zeros(16, np.float32)
        self.__array_interface__ = self.array.__array_interface__


UNTAKEABLE = {
    "list": (lambda x: [1.0, 2.0], "list", "np.asarray(x)"),
    "dict": (lambda x: {"x": x}, "dict", "arguments of their own"),
    "tuple of arrays": (lambda x: (x, x), "tuple", "each of its 2 arrays"),
    "class instance": (lambda x: _Settings(), "_Settings", "arguments of their own"),
    "complex": (lambda x: 1 + 2j, "complex", "x.real, x.imag"),
    "numpy complex": (lambda x: np.complex64(1), "complex64", "x.real, x.imag"),
    "array interface only": (lambda x: _HostBuffer(), "_HostBuffer", "np.asarray(x)"),
}


@pytest.mark.parametrize("kind", list(UNTAKEABLE))
def test_an_argument_kernels_cannot_take_is_a_launch_error_naming_it_its_type_and_what_to_pass(
        backend, kind):
    make, type_name, advice = UNTAKEABLE[kind]
    y, x = inputs(backend)
    if kind == "array interface only" and isinstance(backend, kk.CPU):
        # Host memory: the CPU backend takes it as it is (tests/runtime/test_foreign_arrays.py).
        add_one(backend, 4)(y, make(x), ndrange=16)
        kk.synchronize(backend)
        np.testing.assert_array_equal(kk.to_numpy(y), 1)   # the buffer holds zeros
        return
    with pytest.raises(kk.LaunchError) as info:
        add_one(backend, 4)(y, make(x), ndrange=16)
    message = str(info.value)
    assert "kernel 'add_one'" in message and "argument 'x'" in message
    assert f"type {type_name}" in message
    assert "hint: " in message and advice in message
    assert_backend_still_works(backend)


# --- bounds checks on a debug backend ------------------------------------------------


@kk.kernel
def read_one_past_the_end(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i + 1]


def test_out_of_bounds_read_raises_index_error_naming_kernel_line_index_and_shape(debug_backend):
    y = kk.zeros(debug_backend, np.float32, 8)
    x = kk.to_backend(debug_backend, np.arange(8, dtype=np.float32))
    with pytest.raises(IndexError) as info:
        read_one_past_the_end(debug_backend, 4)(y, x, ndrange=8)
        kk.synchronize(debug_backend)
    message = str(info.value)
    line = line_starting_with("y[i] = x[i + 1]")
    assert "read_one_past_the_end" in message
    assert f":{line}" in message or "y[i] = x[i + 1]" in message
    assert "(8,)" in message
    assert re.search(r"\b8\b", message.replace("(8,)", "")), "the message should name the index 8"


@kk.kernel
def write_one_past_the_end(y):
    i = kk.index(kk.Global)
    y[i + 1] = 7.0


def test_out_of_bounds_write_raises_and_leaves_memory_past_the_array_untouched(debug_backend):
    buffer = kk.zeros(debug_backend, np.float32, 12)
    y = buffer[:8]
    with pytest.raises(IndexError) as info:
        write_one_past_the_end(debug_backend, 4)(y, ndrange=8)
        kk.synchronize(debug_backend)
    message = str(info.value)
    assert "write_one_past_the_end" in message
    assert "(8,)" in message
    np.testing.assert_array_equal(kk.to_numpy(buffer)[8:], np.zeros(4, np.float32))


@kk.kernel
def read_past_the_last_column(y, x: kk.Const):
    i, j = kk.index(kk.Global, kk.NTuple)
    y[i, j] = x[i, j + 1]


def test_out_of_bounds_in_two_dimensions_names_the_index_tuple_and_shape(debug_backend):
    y = kk.zeros(debug_backend, np.float64, (4, 5))
    x = kk.zeros(debug_backend, np.float64, (4, 5))
    with pytest.raises(IndexError) as info:
        read_past_the_last_column(debug_backend, (2, 5))(y, x, ndrange=(4, 5))
        kk.synchronize(debug_backend)
    message = str(info.value)
    assert "read_past_the_last_column" in message
    assert "(4, 5)" in message
    # The index may be written as the tuple (i, 5) or as the offending 5 on its axis.
    assert re.search(r"\(\s*[0-3]\s*,\s*5\s*\)", message) or re.search(r"\b5\b", message.replace("(4, 5)", ""))


@kk.kernel
def atomic_past_the_end(counts):
    i = kk.index(kk.Global)
    kk.atomic_add(counts, i + 1, 1)


def test_out_of_bounds_atomic_raises_on_a_debug_backend(debug_backend):
    buffer = kk.zeros(debug_backend, np.int32, 12)
    counts = buffer[:8]
    with pytest.raises(IndexError) as info:
        atomic_past_the_end(debug_backend, 4)(counts, ndrange=8)
        kk.synchronize(debug_backend)
    assert "atomic_past_the_end" in str(info.value)
    np.testing.assert_array_equal(kk.to_numpy(buffer)[8:], np.zeros(4, np.int32))


def test_debug_backend_runs_a_good_kernel_after_an_index_error(debug_backend):
    y = kk.zeros(debug_backend, np.float32, 8)
    x = kk.to_backend(debug_backend, np.arange(8, dtype=np.float32))
    with pytest.raises(IndexError):
        read_one_past_the_end(debug_backend, 4)(y, x, ndrange=8)
        kk.synchronize(debug_backend)
    assert_backend_still_works(debug_backend)


def test_debug_backend_gives_the_same_results_as_the_default_for_in_bounds_kernels(backend, debug_backend):
    results = []
    for b in (backend, debug_backend):
        y, x = inputs(b)
        add_one(b, 4)(y, x, ndrange=16)
        kk.synchronize(b)
        results.append(kk.to_numpy(y))
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[0], np.arange(16) + 1)


@kk.kernel
def store_seed(out, seed):
    out[0] = seed


@pytest.mark.parametrize("value, advice", [(2**63, "np.uint64"), (2**64 + 3, "no 64-bit"),
                                           (-2**63 - 1, "no 64-bit")])
def test_a_python_int_outside_int64_is_a_launch_error_naming_the_argument(backend, value,
                                                                          advice):
    out = kk.zeros(backend, np.uint64, 1)
    launch = store_seed(backend, 1)
    for _ in range(2):   # the first launch, then the fast launcher's
        with pytest.raises(kk.LaunchError) as info:
            launch(out, value, ndrange=1)
        assert "argument 'seed'" in str(info.value) and str(value) in str(info.value)
        assert advice in str(info.value)
        launch(out, 7, ndrange=1)
    launch(out, np.uint64(2**63), ndrange=1)
    kk.synchronize(backend)
    assert int(kk.to_numpy(out)[0]) == 2**63
    assert_backend_still_works(backend)
