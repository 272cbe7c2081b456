"""Derivative kernels in two versions by their float scalar arguments: where every one
is finite, a partial that is one of them (a step's coefficient, saxpy's `a`) needs no
strong-zero test (its product with a zero adjoint or tangent is a zero); a launch with
an infinite or NaN scalar runs the version that keeps the tests, so that a zero adjoint
through an infinite partial stays 0, as it does through an infinite constant. On every
backend (compile-only ones compile both versions)."""
import re

import numpy as np
import pytest

import kernelkit as kk
from enzyme_ext import (Const, Duplicated, Forward, Reverse, ReverseSplit, autodiff,
                        autodiff_thunk, compiler_job_from_backend)
from enzyme_ext.jobs import derivative_job
from kernelkit.compiler.driver import compile_job
from kernelkit.errors import CompileOnlyError

WORKGROUP = 64
N = 96


@kk.kernel
def scaled_or_four_times(y, x, a, pick):
    i = kk.index(kk.Global)
    scaled = x[i] * a
    y[i] = scaled if pick > 0 else 4.0 * x[i]


def on(backend, array):
    return kk.to_backend(backend, np.array(array, copy=True))


def strong_zero_products(backend, mode: str, finite: bool) -> tuple[int, int]:
    """(products by `a`, those behind a strong-zero select) in the derivative kernel's
    IR."""
    argtypes = scaled_or_four_times.argument_types(
        backend, (on(backend, np.zeros(N)), on(backend, np.zeros(N)), 2.0, 1))
    parent = compiler_job_from_backend(backend, scaled_or_four_times.function, argtypes,
                                       workgroupsize=(WORKGROUP,))
    names = (Duplicated.name, Duplicated.name, Const.name, Const.name)
    ir = compile_job(derivative_job(parent, mode, names, (None,) * 4,
                                    finite_scalars=finite)).ir
    scalar = {"%4"} | set(re.findall(r"(%\d+) = cast %4 : f64", ir))   # `a`, as a float64
    products = {name for name, right in re.findall(r"(%\d+) = mul %\d+, (%\d+) : f64", ir)
                if right in scalar}
    selected = set(re.findall(r"= select %\d+, %\d+, (%\d+) : f64", ir))
    return len(products), len(products & selected)


@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_a_partial_that_is_a_finite_scalar_argument_has_no_strong_zero_test(backend, mode):
    products, tested = strong_zero_products(backend, mode, finite=True)
    assert products >= 1 and tested == 0
    products, tested = strong_zero_products(backend, mode, finite=False)
    assert tested >= 1   # (the forward kernel's primal product is never tested)


def reverse_dx(backend, launch, a, pick, split=False):
    x = np.linspace(-1.0, 1.0, N)
    y, dy, dx = on(backend, np.zeros(N)), on(backend, np.ones(N)), on(backend, np.zeros(N))
    args = (Duplicated(y, dy), Duplicated(on(backend, x), dx), a, pick)
    if split:
        forward, reverse = autodiff_thunk(ReverseSplit, launch, Duplicated, Duplicated,
                                          Const, Const)
        reverse(*args, tape=forward(*args, ndrange=N), ndrange=N)
    else:
        autodiff(Reverse, launch, *args, ndrange=N)
    kk.synchronize(backend)
    return kk.to_numpy(dx)


def launched(function, *args):
    """`function(*args)`, or None on a compile-only backend (which compiled what it
    launches)."""
    try:
        return function(*args)
    except CompileOnlyError:
        return None


@pytest.mark.parametrize("split", [False, True])
def test_launches_of_finite_and_infinite_scalars_each_get_their_version(backend, split):
    launch = scaled_or_four_times(backend, WORKGROUP)
    for a in (2.0, np.inf, np.float64(-3.0), np.nan, 0.5):
        # (pick 0: the scaled branch is not taken; its adjoint, 0, times `a` is 0)
        dx = launched(reverse_dx, backend, launch, a, 0, split)
        if dx is not None:
            np.testing.assert_array_equal(dx, np.full(N, 4.0))
        dx = launched(reverse_dx, backend, launch, a, 1, split)
        if dx is not None:
            np.testing.assert_array_equal(dx, np.full(N, a))


def forward_dy(backend, launch, a, tangent_x):
    x = np.linspace(-1.0, 1.0, N)
    y, dy = on(backend, np.zeros(N)), on(backend, np.zeros(N))
    autodiff(Forward, launch, Duplicated(y, dy), Duplicated(on(backend, x),
                                                            on(backend, tangent_x)),
             a, 1, ndrange=N)
    return kk.to_numpy(dy)


def test_a_zero_tangent_through_an_infinite_scalar_stays_zero(backend):
    launch = scaled_or_four_times(backend, WORKGROUP)
    tangent_x = np.where(np.arange(N) % 2 == 0, 0.0, 1.0)
    for a in (2.0, np.inf, 2.0):
        dy = launched(forward_dy, backend, launch, a, tangent_x)
        if dy is not None:
            np.testing.assert_array_equal(dy, np.where(tangent_x == 0, 0.0, a))


@kk.kernel
def scaled_float32(y, x, a, pick):
    i = kk.index(kk.Global)
    scaled = x[i] * a          # a Python float, made a float32 beside x
    y[i] = scaled if pick > 0 else 4.0 * x[i]


def test_a_python_float_beside_float32_arrays_is_finite_within_float32s_range(backend):
    """Made a float32, 1e39 is infinite: its launch runs the version with the tests."""
    launch = scaled_float32(backend, WORKGROUP)
    x = np.linspace(-1.0, 1.0, N, dtype=np.float32)
    argtypes = scaled_float32.argument_types(backend, (on(backend, x), on(backend, x), 2.0, 1))
    parent = compiler_job_from_backend(backend, scaled_float32.function, argtypes,
                                       workgroupsize=(WORKGROUP,))
    names = (Duplicated.name, Duplicated.name, Const.name, Const.name)
    ir = compile_job(derivative_job(parent, "reverse", names, (None,) * 4,
                                    finite_scalars=True)).ir
    assert re.search(r"= cast %4 : f32", ir) and not re.search(r"= select .* : f32", ir)
    for a in (2.0, 1e39, 2.0):
        # (pick 0: the scaled branch is not taken; its adjoint, 0, times `a` is 0)
        y, dy = on(backend, np.zeros(N, np.float32)), on(backend, np.ones(N, np.float32))
        dx = on(backend, np.zeros(N, np.float32))

        def run():
            autodiff(Reverse, launch, Duplicated(y, dy), Duplicated(on(backend, x), dx), a,
                     0, ndrange=N)
            return kk.to_numpy(dx)
        got = launched(run)
        if got is not None:
            np.testing.assert_array_equal(got, np.full(N, 4.0, np.float32))
