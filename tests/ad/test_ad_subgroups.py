"""Derivatives through subgroup operations (`enzyme_ext/transform/derivatives.py`'s
subgroup rules): a subgroup sum in both modes (its transpose is a sum again), a shuffle
in forward mode, each checked against central differences of the kernel itself, with a
partial last group; and the reverse of a shuffle, which has no rule, refused by name."""
import numpy as np
import pytest

import kernelkit as kk
from enzyme_ext import Duplicated, Forward, Reverse, autodiff

N, GROUP = 100, 64     # a partial last group: subgroups of 32, 32, 32 and 4 members


@kk.kernel
def weighted_subgroup_sums(y, x, w: kk.Const):
    i = kk.index(kk.Global)
    v = x[i]
    y[i] = w[i] * kk.subgroup_sum(v * v) + kk.sin(v)


@kk.kernel
def neighbour_products(y, x):
    i = kk.index(kk.Global)
    v = x[i]
    y[i] = v * kk.shuffle_down(v, 1) + kk.shuffle(v * v, 3)


def evaluate(backend, kernel, x, *constants):
    y = kk.zeros(backend, np.float64, N)
    kernel(backend, GROUP)(y, kk.to_backend(backend, x),
                           *(kk.to_backend(backend, c) for c in constants), ndrange=N)
    kk.synchronize(backend)
    return kk.to_numpy(y)


def central_jacobian_vector(backend, kernel, x, direction, *constants, h=1e-6):
    return (evaluate(backend, kernel, x + h * direction, *constants)
            - evaluate(backend, kernel, x - h * direction, *constants)) / (2 * h)


@pytest.mark.parametrize("kernel", [weighted_subgroup_sums, neighbour_products])
def test_forward_mode_through_subgroup_operations_matches_central_differences(backend,
                                                                              kernel):
    rng = np.random.default_rng(1)
    x, direction = rng.uniform(-1, 1, N), rng.uniform(-1, 1, N)
    constants = (rng.uniform(0.5, 2, N),) if kernel is weighted_subgroup_sums else ()
    dy = kk.zeros(backend, np.float64, N)
    autodiff(Forward, kernel(backend, GROUP),
             Duplicated(kk.zeros(backend, np.float64, N), dy),
             Duplicated(kk.to_backend(backend, x), kk.to_backend(backend, direction)),
             *(kk.to_backend(backend, c) for c in constants), ndrange=N)
    kk.synchronize(backend)
    np.testing.assert_allclose(kk.to_numpy(dy),
                               central_jacobian_vector(backend, kernel, x, direction,
                                                       *constants), rtol=1e-6, atol=1e-8)


def test_reverse_mode_through_a_subgroup_sum_matches_central_differences(backend):
    rng = np.random.default_rng(2)
    x, w, seed = rng.uniform(-1, 1, N), rng.uniform(0.5, 2, N), rng.uniform(-1, 1, N)
    dx = kk.zeros(backend, np.float64, N)
    autodiff(Reverse, weighted_subgroup_sums(backend, GROUP),
             Duplicated(kk.zeros(backend, np.float64, N), kk.to_backend(backend, seed.copy())),
             Duplicated(kk.to_backend(backend, x), dx), kk.to_backend(backend, w), ndrange=N)
    kk.synchronize(backend)
    # The reverse gives g = seed^T J: along any direction v, g . v is seed . (J v).
    gradient = kk.to_numpy(dx)
    for direction in rng.uniform(-1, 1, (3, N)):
        along = central_jacobian_vector(backend, weighted_subgroup_sums, x, direction, w)
        np.testing.assert_allclose(gradient @ direction, seed @ along, rtol=1e-6)


def test_reverse_mode_through_a_shuffle_is_refused_naming_the_operation(backend):
    x = kk.to_backend(backend, np.ones(N))
    with pytest.raises(kk.CompileError, match="no reverse derivative rule for "
                                              "'subgroup.shuffle'"):
        autodiff(Reverse, neighbour_products(backend, GROUP),
                 Duplicated(kk.zeros(backend, np.float64, N), kk.ones(backend, np.float64, N)),
                 Duplicated(x, kk.zeros(backend, np.float64, N)), ndrange=N)
