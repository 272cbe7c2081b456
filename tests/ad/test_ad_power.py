"""The derivative of x ** y with respect to x where y is 0: x ** 0 is 1 for every x, so
it is 0, also at x = 0 (where y * x ** (y - 1) would be 0 * inf); in both modes, for
integer and float exponents (found by enzyme_ext.fuzz, seed 33)."""
import numpy as np
import pytest

import kernelkit as kk
from enzyme_ext import Const, Duplicated, Forward, Reverse, autodiff


@kk.kernel
def power(out, x: kk.Const, e: kk.Const):
    i = kk.index(kk.Global)
    out[i] = x[i] ** e[i]


@pytest.mark.parametrize("dtype", [np.int64, np.uint32, np.float64], ids=lambda d: np.dtype(d).name)
def test_the_derivative_of_a_zeroth_power_is_zero_also_at_zero(backend, dtype):
    x = np.array([2.0, 0.5, 2.0, 0.0, 0.0, 3.0])
    e = np.array([0, 0, 1, 0, 2, 3]).astype(dtype)
    expected = np.array([0.0, 0.0, 1.0, 0.0, 0.0, 27.0])
    to = lambda a: kk.to_backend(backend, a)   # noqa: E731
    dx = to(np.zeros(6))
    autodiff(Reverse, power(backend, 4), Duplicated(to(np.zeros(6)), to(np.ones(6))),
             Duplicated(to(x), dx), Const(to(e)), ndrange=6)
    tangent = to(np.zeros(6))
    autodiff(Forward, power(backend, 4), Duplicated(to(np.zeros(6)), tangent),
             Duplicated(to(x), to(np.ones(6))), Const(to(e)), ndrange=6)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(dx), expected)
    np.testing.assert_array_equal(kk.to_numpy(tangent), expected)
