"""Custom rules of device functions that return several numbers (a tuple or a vector):
`bwd` takes their adjoints, `jvp` gives their tangents, in that shape, in both modes and
on every backend; and a function called in its own rule is a plain call there."""
import numpy as np
import pytest

import kernelkit as kk
from enzyme_ext import (Const, Duplicated, Forward, Reverse, autodiff, custom_jvp,
                        custom_vjp)
from kernelkit.errors import CompileError


@custom_vjp
def mixed(x, y):
    return x * 3.0 + y / 3.0, y ** 2.5


def mixed_forward(x, y):
    return mixed(x, y), (x, y)        # the function itself: a plain call in its rule


def mixed_backward(residuals, adjoints):
    x, y = residuals
    da, db = adjoints
    return 3.0 * da, da / 3.0 + 2.5 * y ** 1.5 * db


mixed.defvjp(mixed_forward, mixed_backward)


@kk.kernel
def mixed_outputs(a, b, x, y):
    i = kk.index(kk.Global)
    p, q = mixed(x[i], y[i])
    a[i] = p
    b[i] = q


def mixed_numpy(x, y):
    return x * 3.0 + y / 3.0, y ** 2.5


def test_a_custom_vjp_of_two_results_takes_both_adjoints_in_reverse_mode(backend):
    n = 8
    x, y = np.linspace(-1.0, 2.0, n), np.linspace(0.5, 3.0, n)
    a, b = kk.zeros(backend, np.float64, n), kk.zeros(backend, np.float64, n)
    da, db = kk.full(backend, np.float64, n, 1.0), kk.full(backend, np.float64, n, 2.0)
    dx, dy = kk.zeros(backend, np.float64, n), kk.zeros(backend, np.float64, n)
    autodiff(Reverse, mixed_outputs(backend, 4), Duplicated(a, da), Duplicated(b, db),
             Duplicated(kk.to_backend(backend, x), dx),
             Duplicated(kk.to_backend(backend, y), dy), ndrange=n)
    expected_a, expected_b = mixed_numpy(x, y)
    np.testing.assert_allclose(kk.to_numpy(a), expected_a)
    np.testing.assert_allclose(kk.to_numpy(b), expected_b)
    h = 1e-6
    for argument, gradient in ((0, dx), (1, dy)):
        step = np.zeros((2, n))
        step[argument] = h
        up, down = mixed_numpy(x + step[0], y + step[1]), mixed_numpy(x - step[0], y - step[1])
        expected = sum(weight * (u - d) / (2 * h) for weight, u, d in zip((1.0, 2.0), up, down))
        np.testing.assert_allclose(kk.to_numpy(gradient), expected, rtol=1e-7)


@custom_vjp
def spread(x):
    return kk.vec3(x, 2.0 * x, x * x)


def spread_forward(x):
    return spread(x), x


def spread_backward(x, adjoint):
    return kk.dot(adjoint, kk.vec3(1.0, 2.0, 2.0 * x)) + 100.0 * (x == 0.0)   # marks the rule


spread.defvjp(spread_forward, spread_backward)


@kk.kernel
def spread_out(out, x):
    i = kk.index(kk.Global)
    kk.store(out, i, spread(x[i]))


def test_a_custom_vjp_of_a_vector_takes_its_adjoint_as_a_vector(backend):
    x = np.array([0.0, 1.0, -2.0, 0.5])
    out = kk.zeros(backend, np.float64, (4, 3))
    dx = kk.zeros(backend, np.float64, 4)
    weights = np.array([[1.0, 10.0, 100.0]] * 4)
    autodiff(Reverse, spread_out(backend, 4), Duplicated(out, kk.to_backend(backend, weights)),
             Duplicated(kk.to_backend(backend, x), dx), ndrange=4)
    np.testing.assert_allclose(kk.to_numpy(out), np.stack([x, 2 * x, x * x], axis=1))
    # bwd runs once per number with the others' adjoints 0: the marker counts three times
    np.testing.assert_allclose(kk.to_numpy(dx), 1.0 + 20.0 + 200.0 * x + 300.0 * (x == 0))


@custom_jvp
def polar(r, angle):
    return r * kk.cos(angle), r * kk.sin(angle)


def polar_jvp(primals, tangents):
    r, angle = primals
    dr, dangle = tangents
    x, y = polar(r, angle)
    return (x, y), (dr * kk.cos(angle) - y * dangle, dr * kk.sin(angle) + x * dangle)


polar.defjvp(polar_jvp)


@kk.kernel
def to_cartesian(x, y, r, angle):
    i = kk.index(kk.Global)
    x[i], y[i] = polar(r[i], angle[i])


def test_a_custom_jvp_of_two_results_gives_both_tangents_in_forward_mode(backend):
    n = 6
    r, angle = np.linspace(0.5, 2.0, n), np.linspace(-1.0, 2.0, n)
    x, y = kk.zeros(backend, np.float64, n), kk.zeros(backend, np.float64, n)
    dx, dy = kk.zeros(backend, np.float64, n), kk.zeros(backend, np.float64, n)
    autodiff(Forward, to_cartesian(backend, 2), Duplicated(x, dx), Duplicated(y, dy),
             Duplicated(kk.to_backend(backend, r), kk.full(backend, np.float64, n, 1.0)),
             Duplicated(kk.to_backend(backend, angle), kk.full(backend, np.float64, n, 0.5)),
             ndrange=n)
    np.testing.assert_allclose(kk.to_numpy(x), r * np.cos(angle))
    np.testing.assert_allclose(kk.to_numpy(y), r * np.sin(angle))
    np.testing.assert_allclose(kk.to_numpy(dx), np.cos(angle) - 0.5 * r * np.sin(angle))
    np.testing.assert_allclose(kk.to_numpy(dy), np.sin(angle) + 0.5 * r * np.cos(angle))


def test_functions_with_custom_rules_of_several_results_run_plainly_where_not_differentiated(
        backend):
    x, y = np.array([1.0, 2.0]), np.array([0.25, 4.0])
    a, b = kk.zeros(backend, np.float64, 2), kk.zeros(backend, np.float64, 2)
    mixed_outputs(backend, 2)(a, b, kk.to_backend(backend, x), kk.to_backend(backend, y),
                              ndrange=2)
    to_cartesian(backend, 2)(a, b, kk.to_backend(backend, x), kk.to_backend(backend, y),
                             ndrange=2)
    np.testing.assert_allclose(kk.to_numpy(a), x * np.cos(y))
    np.testing.assert_allclose(kk.to_numpy(b), x * np.sin(y))


def test_a_custom_vjp_of_several_results_in_forward_mode_is_a_clear_error(backend):
    n = 4
    ones = kk.to_backend(backend, np.ones(n))
    with pytest.raises(CompileError, match="custom_vjp rule is a reverse-mode rule"):
        autodiff(Forward, mixed_outputs(backend, 4),
                 Duplicated(kk.zeros(backend, np.float64, n), kk.zeros(backend, np.float64, n)),
                 Duplicated(kk.zeros(backend, np.float64, n), kk.zeros(backend, np.float64, n)),
                 Duplicated(ones, kk.to_backend(backend, np.ones(n))), Const(ones), ndrange=n)


@custom_vjp
def nested(x):
    return (x, (x, x))


def nested_forward(x):
    return nested(x), x


def nested_backward(x, adjoints):
    return adjoints[0]


nested.defvjp(nested_forward, nested_backward)


@kk.kernel
def calls_nested(out, x):
    i = kk.index(kk.Global)
    out[i] = nested(x[i])[0]


def test_a_custom_rule_of_a_nested_tuple_is_an_error_naming_the_call(backend):
    x = kk.to_backend(backend, np.ones(4))
    with pytest.raises(CompileError, match=r"returns a number, or a tuple[\s\S]*flat tuple"):
        calls_nested(backend, 4)(kk.zeros(backend, np.float64, 4), x, ndrange=4)
