"""A choice (`a if c else b`, `min`, `max`, a clamp) passes on the chosen operand's
derivative and 0 for the other, even where the other's is infinite: `x / 0` clamped away
has the derivative 0 in both modes, not `inf * 0`, nan."""
import numpy as np

import kernelkit as kk
from enzyme_ext import Duplicated, Forward, Reverse, autodiff


@kk.kernel
def clamped_ramp(y, x: kk.Const, low, high):
    i = kk.index(kk.Global)
    y[i] = min(max((x[i] - low) / (high - low), 0.0), 1.0)   # an empty ramp at low == high


@kk.kernel
def guarded_ratio(y, x: kk.Const, d):
    i = kk.index(kk.Global)
    ratio = x[i] / d
    y[i] = ratio if d != 0.0 else x[i]


def test_a_ramp_of_width_zero_has_the_derivative_zero_in_both_modes(backend):
    n = 64
    x = np.linspace(-1.0, 1.0, n)
    tangent = kk.zeros(backend, np.float64, n)
    autodiff(Forward, clamped_ramp(backend, 32), Duplicated(kk.zeros(backend, np.float64, n),
                                                            tangent),
             Duplicated(kk.to_backend(backend, x), kk.to_backend(backend, np.ones(n))),
             0.25, 0.25, ndrange=n)
    gradient = kk.zeros(backend, np.float64, n)
    autodiff(Reverse, clamped_ramp(backend, 32),
             Duplicated(kk.zeros(backend, np.float64, n), kk.to_backend(backend, np.ones(n))),
             Duplicated(kk.to_backend(backend, x), gradient), 0.25, 0.25, ndrange=n)
    np.testing.assert_array_equal(kk.to_numpy(tangent), np.zeros(n))
    np.testing.assert_array_equal(kk.to_numpy(gradient), np.zeros(n))


def test_the_branch_not_taken_carries_no_derivative(backend):
    n = 16
    x = np.arange(1.0, n + 1.0)
    tangent = kk.zeros(backend, np.float64, n)
    autodiff(Forward, guarded_ratio(backend, 16), Duplicated(kk.zeros(backend, np.float64, n),
                                                             tangent),
             Duplicated(kk.to_backend(backend, x), kk.to_backend(backend, np.full(n, 2.0))),
             0.0, ndrange=n)
    np.testing.assert_array_equal(kk.to_numpy(tangent), np.full(n, 2.0))


@kk.kernel
def kept_against_nan(y, t: kk.Const, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = max(t[i], kk.sqrt(x[i])) + min(t[i], kk.sqrt(x[i]))


def test_min_and_max_against_a_nan_pass_on_the_operand_they_keep(backend):
    """Python's max(t, nan) and min(t, nan) keep t (nan compares false), and so do the
    kernel's: the derivative goes to t as well, not to the nan (found by the AD fuzzer's
    seed 31, an erfcinv outside its domain)."""
    n = 8
    t, x = np.linspace(-1.0, 1.0, n), np.where(np.arange(n) % 2 == 0, -1.0, 4.0)
    seed = kk.to_backend(backend, np.ones(n))
    d_t = kk.zeros(backend, np.float64, n)
    autodiff(Reverse, kept_against_nan(backend, 4), Duplicated(kk.zeros(backend, np.float64, n),
                                                               seed),
             Duplicated(kk.to_backend(backend, t), d_t), kk.to_backend(backend, x), ndrange=n)
    # where sqrt(x) is nan both keep t (2); where it is 2, one of them keeps t (1)
    expected = np.where(np.arange(n) % 2 == 0, 2.0, 1.0)
    np.testing.assert_array_equal(kk.to_numpy(d_t), expected)
    tangent = kk.zeros(backend, np.float64, n)
    autodiff(Forward, kept_against_nan(backend, 4), Duplicated(kk.zeros(backend, np.float64, n),
                                                               tangent),
             Duplicated(kk.to_backend(backend, t), kk.to_backend(backend, np.ones(n))),
             kk.to_backend(backend, x), ndrange=n)
    np.testing.assert_array_equal(kk.to_numpy(tangent), expected)
