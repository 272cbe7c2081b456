"""Compile errors a user can cause: each is a kk.CompileError raised at the launch that
compiles (not when the kernel is defined), whose message names the kernel, this file
and the offending line by number and by text; the backend stays usable afterwards.

Each faulty kernel is defined inside its test, so a kernel that wrongly failed at
definition time fails only that test.
"""
import functools
import math
import os

import numpy as np
import pytest

import kernelkit as kk

import source_lines

THIS_FILE = os.path.basename(__file__)
line_starting_with = functools.partial(source_lines.line_starting_with, __file__)
assert_points_at = functools.partial(source_lines.assert_points_at, path=__file__)


def inputs(backend, n=8):
    return kk.zeros(backend, np.float32, n), kk.to_backend(backend, np.arange(n, dtype=np.float32))


@kk.kernel
def add_one(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i] + 1


def assert_backend_still_works(backend):
    y, x = inputs(backend)
    add_one(backend, 4)(y, x, ndrange=8)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(y), np.arange(8) + 1)


def test_error_classes_share_the_kernelkit_base():
    assert issubclass(kk.CompileError, kk.KernelkitError)
    assert issubclass(kk.LaunchError, kk.KernelkitError)
    assert issubclass(kk.KernelkitError, Exception)


# --- unsupported syntax --------------------------------------------------------------


def test_with_statement_is_rejected(backend):
    @kk.kernel
    def uses_with(y, x: kk.Const):
        i = kk.index(kk.Global)
        with open("never-opened.txt") as handle:
            y[i] = x[i]

    y, x = inputs(backend)
    with pytest.raises(kk.CompileError) as info:
        uses_with(backend, 4)(y, x, ndrange=8)
    assert_points_at(info.value, "uses_with", 'with open("never-opened.txt") as handle:')


def test_try_statement_is_rejected(backend):
    @kk.kernel
    def uses_try(y, x: kk.Const):
        i = kk.index(kk.Global)
        try:  # kernel-with-try
            y[i] = x[i]
        except IndexError:
            y[i] = 0

    y, x = inputs(backend)
    with pytest.raises(kk.CompileError) as info:
        uses_try(backend, 4)(y, x, ndrange=8)
    assert_points_at(info.value, "uses_try", "try:  # kernel-with-try")


def test_lambda_is_rejected(backend):
    @kk.kernel
    def uses_lambda(y, x: kk.Const):
        i = kk.index(kk.Global)
        twice = lambda v: 2 * v  # noqa: E731
        y[i] = twice(x[i])

    y, x = inputs(backend)
    with pytest.raises(kk.CompileError) as info:
        uses_lambda(backend, 4)(y, x, ndrange=8)
    assert_points_at(info.value, "uses_lambda", "twice = lambda v: 2 * v")


def test_list_comprehension_is_rejected(backend):
    @kk.kernel
    def uses_list_comprehension(y, x: kk.Const):
        i = kk.index(kk.Global)
        values = [x[j] for j in range(3)]
        y[i] = values[0]

    y, x = inputs(backend)
    with pytest.raises(kk.CompileError) as info:
        uses_list_comprehension(backend, 4)(y, x, ndrange=8)
    assert_points_at(info.value, "uses_list_comprehension", "values = [x[j] for j in range(3)]")


def test_unsupported_syntax_inside_a_device_function_names_the_launched_kernel(backend):
    def helper_with_try(v):
        try:  # helper-with-try
            return v
        except ValueError:
            return 0

    @kk.kernel
    def calls_helper_with_try(y, x: kk.Const):
        i = kk.index(kk.Global)
        y[i] = helper_with_try(x[i])

    y, x = inputs(backend)
    with pytest.raises(kk.CompileError) as info:
        calls_helper_with_try(backend, 4)(y, x, ndrange=8)
    assert_points_at(info.value, "calls_helper_with_try", "try:  # helper-with-try")


# --- names and types -----------------------------------------------------------------


def test_undefined_name_is_reported(backend):
    @kk.kernel
    def uses_undefined_name(y, x: kk.Const):
        i = kk.index(kk.Global)
        y[i] = x[i] + name_that_is_defined_nowhere  # noqa: F821

    y, x = inputs(backend)
    with pytest.raises(kk.CompileError) as info:
        uses_undefined_name(backend, 4)(y, x, ndrange=8)
    assert_points_at(info.value, "uses_undefined_name", "y[i] = x[i] + name_that_is_defined_nowhere")
    assert "name_that_is_defined_nowhere" in str(info.value)


def test_indexing_with_a_float_is_rejected(backend):
    @kk.kernel
    def float_index(y, x: kk.Const):
        i = kk.index(kk.Global)
        y[i] = x[i / 2]

    y, x = inputs(backend)
    with pytest.raises(kk.CompileError) as info:
        float_index(backend, 4)(y, x, ndrange=8)
    assert_points_at(info.value, "float_index", "y[i] = x[i / 2]")


def test_assigning_an_array_to_an_element_is_rejected(backend):
    @kk.kernel
    def array_into_element(out, whole: kk.Const):
        i = kk.index(kk.Global)
        out[i] = whole

    y, x = inputs(backend)
    with pytest.raises(kk.CompileError) as info:
        array_into_element(backend, 4)(y, x, ndrange=8)
    assert_points_at(info.value, "array_into_element", "out[i] = whole")


def test_too_many_indices_for_the_array_dimension_are_rejected(backend):
    @kk.kernel
    def two_indices_into_a_vector(y, x: kk.Const):
        i = kk.index(kk.Global)
        y[i] = x[i, i]

    y, x = inputs(backend)
    with pytest.raises(kk.CompileError) as info:
        two_indices_into_a_vector(backend, 4)(y, x, ndrange=8)
    assert_points_at(info.value, "two_indices_into_a_vector", "y[i] = x[i, i]")


def test_assigning_a_float_to_an_int_array_element_is_allowed_and_truncates(backend):
    @kk.kernel
    def float_into_int(y, x: kk.Const):
        i = kk.index(kk.Global)
        y[i] = x[i] * 0.75

    host = np.array([-3.0, -1.0, 1.0, 2.0, 5.0, 9.0], np.float64)
    y = kk.zeros(backend, np.int32, len(host))
    float_into_int(backend, 4)(y, kk.to_backend(backend, host), ndrange=len(host))
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(y), (host * 0.75).astype(np.int32))


def test_writing_to_a_const_array_is_rejected(backend):
    @kk.kernel
    def writes_const(y, x: kk.Const):
        i = kk.index(kk.Global)
        x[i] = y[i]

    y, x = inputs(backend)
    with pytest.raises(kk.CompileError) as info:
        writes_const(backend, 4)(y, x, ndrange=8)
    assert_points_at(info.value, "writes_const", "x[i] = y[i]")


def test_augmented_assignment_to_a_const_array_is_rejected(backend):
    @kk.kernel
    def increments_const(y, x: kk.Const):
        i = kk.index(kk.Global)
        x[i] += 1

    y, x = inputs(backend)
    with pytest.raises(kk.CompileError) as info:
        increments_const(backend, 4)(y, x, ndrange=8)
    assert_points_at(info.value, "increments_const", "x[i] += 1")


@pytest.mark.parametrize("function", ["radians", "degrees"])
def test_a_math_function_given_too_many_arguments_is_named_in_the_error(backend, function):
    convert = getattr(math, function)

    @kk.kernel
    def converts(y, x: kk.Const):
        i = kk.index(kk.Global)
        y[i] = convert(x[i], 2.0)

    y, x = inputs(backend)
    with pytest.raises(kk.CompileError) as info:
        converts(backend, 4)(y, x, ndrange=8)
    assert f"math.{function}() takes 1 arguments, got 2" in str(info.value)
    assert_points_at(info.value, "converts", "y[i] = convert(x[i], 2.0)")


# --- local memory --------------------------------------------------------------------


def test_local_memory_with_a_runtime_shape_is_rejected(backend):
    @kk.kernel
    def runtime_localmem(y, x: kk.Const, n):
        i = kk.index(kk.Global)
        scratch = kk.localmem(np.float32, n)
        scratch[0] = x[i]
        y[i] = scratch[0]

    y, x = inputs(backend)
    with pytest.raises(kk.CompileError) as info:
        runtime_localmem(backend, 4)(y, x, 8, ndrange=8)
    assert_points_at(info.value, "runtime_localmem", "scratch = kk.localmem(np.float32, n)")


# --- recursion -----------------------------------------------------------------------


def factorial(n):
    if n <= 1:
        return 1
    return n * factorial(n - 1)


def is_even(n):
    return True if n == 0 else is_odd(n - 1)


def is_odd(n):
    return False if n == 0 else is_even(n - 1)


def test_direct_recursion_is_rejected(backend):
    @kk.kernel
    def calls_factorial(y, x: kk.Const):
        i = kk.index(kk.Global)
        y[i] = factorial(i)

    y, x = inputs(backend)
    with pytest.raises(kk.CompileError) as info:
        calls_factorial(backend, 4)(y, x, ndrange=8)
    message = str(info.value)
    assert "calls_factorial" in message and "factorial" in message and THIS_FILE in message
    assert "return n * factorial(n - 1)" in message or "y[i] = factorial(i)" in message


def test_mutual_recursion_is_rejected(backend):
    @kk.kernel
    def calls_is_even(y, x: kk.Const):
        i = kk.index(kk.Global)
        y[i] = is_even(i)

    y, x = inputs(backend)
    with pytest.raises(kk.CompileError) as info:
        calls_is_even(backend, 4)(y, x, ndrange=8)
    message = str(info.value)
    assert "calls_is_even" in message and THIS_FILE in message
    assert "is_even" in message or "is_odd" in message


# --- after an error ------------------------------------------------------------------


def test_a_failing_kernel_fails_again_on_the_next_launch(backend):
    @kk.kernel
    def always_fails(y, x: kk.Const):
        i = kk.index(kk.Global)
        y[i] = x[i] + another_undefined_name  # noqa: F821

    y, x = inputs(backend)
    for _ in range(2):
        with pytest.raises(kk.CompileError) as info:
            always_fails(backend, 4)(y, x, ndrange=8)
        assert "always_fails" in str(info.value)


def test_backend_runs_a_good_kernel_after_a_compile_error(backend):
    @kk.kernel
    def broken(y, x: kk.Const):
        i = kk.index(kk.Global)
        y[i] = (lambda v: v)(x[i])

    y, x = inputs(backend)
    with pytest.raises(kk.CompileError):
        broken(backend, 4)(y, x, ndrange=8)
    assert_backend_still_works(backend)


def test_failed_compile_writes_nothing(backend):
    @kk.kernel
    def writes_then_fails(y, x: kk.Const):
        i = kk.index(kk.Global)
        y[i] = 5.0
        y[i] = x[i] + yet_another_undefined_name  # noqa: F821

    y, x = inputs(backend)
    with pytest.raises(kk.CompileError):
        writes_then_fails(backend, 4)(y, x, ndrange=8)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(y), np.zeros(8, np.float32))


# --- barriers that only some work-items reach ------------------------------------------


def store_and_wait(scratch, i):
    scratch[i] = 1.0
    kk.synchronize()  # barrier inside a device function


def test_barrier_in_a_device_function_called_under_a_varying_branch_is_rejected(backend):
    @kk.kernel
    def divergent_helper_call(y):
        i = kk.index(kk.Local)
        scratch = kk.localmem(np.float32, 8)
        if i < 3:
            store_and_wait(scratch, i)
        y[i] = scratch[0]

    y, _ = inputs(backend)
    with pytest.raises(kk.CompileError) as info:
        divergent_helper_call(backend, 8)(y, ndrange=8)
    assert_points_at(info.value, "divergent_helper_call", "kk.synchronize()  # barrier inside")
    assert "only some work-items" in str(info.value)
    assert_backend_still_works(backend)


def test_barrier_in_a_loop_with_a_per_item_trip_count_is_rejected(backend):
    @kk.kernel
    def divergent_loop_barrier(y):
        i = kk.index(kk.Local)
        for _ in range(i):
            kk.synchronize()  # the trip count depends on the work-item
        y[i] = 1.0

    y, _ = inputs(backend)
    with pytest.raises(kk.CompileError) as info:
        divergent_loop_barrier(backend, 8)(y, ndrange=8)
    assert_points_at(info.value, "divergent_loop_barrier", "kk.synchronize()  # the trip count")


def test_barrier_after_a_varying_branch_and_under_a_uniform_loop_is_accepted(backend):
    @kk.kernel
    def uniform_barriers(y):
        i = kk.index(kk.Local)
        scratch = kk.localmem(np.float32, 8)
        scratch[i] = 0.0
        for step in range(3):
            if i == step:
                scratch[i] = step + 1.0
            kk.synchronize()
        y[i] = scratch[0] + scratch[1] + scratch[2]

    y, _ = inputs(backend)
    uniform_barriers(backend, 8)(y, ndrange=8)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(y), np.full(8, 6.0, np.float32))
