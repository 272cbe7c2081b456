"""AD inside kernels (`autodiff` on a device function) and custom derivative rules
(`custom_vjp`, `custom_jvp`), on every backend."""
import numpy as np
import pytest

import kernelkit as kk
from enzyme_ext import (Active, Const, Duplicated, Forward, Reverse, autodiff, custom_jvp,
                        custom_vjp)
from kernelkit.errors import CompileError


def wavy(x, c):
    y = x * x * c
    for _ in range(3):
        y = kk.sin(y) + x
    return y


def wavy_numpy(x, c):
    y = x * x * c
    for _ in range(3):
        y = np.sin(y) + x
    return y


@kk.kernel
def wavy_derivatives(dx_out, dc_out, tangent_out, x, c):
    i = kk.index(kk.Global)
    dx, dc = autodiff(Reverse, wavy, Active(x[i]), Const(c))
    dx_out[i] = dx
    dc_out[i] = dc
    tangent_out[i] = autodiff(Forward, wavy, Duplicated(x[i], 2.0), Const(c))


@kk.kernel
def wavy_both_active(dx_out, dc_out, x, c):
    i = kk.index(kk.Global)
    dx, dc = autodiff(Reverse, wavy, Active(x[i]), Active(c))
    dx_out[i] = dx
    dc_out[i] = dc


def test_autodiff_of_a_device_function_inside_a_kernel(backend):
    n = 16
    x = np.linspace(0.1, 1.5, n)
    dx, dc, tangent = (kk.zeros(backend, np.float64, n) for _ in range(3))
    wavy_derivatives(backend, 8)(dx, dc, tangent, kk.to_backend(backend, x), 0.7, ndrange=n)
    h = 1e-6
    expected = (wavy_numpy(x + h, 0.7) - wavy_numpy(x - h, 0.7)) / (2 * h)
    np.testing.assert_allclose(kk.to_numpy(dx), expected, rtol=1e-7, atol=1e-9)
    np.testing.assert_array_equal(kk.to_numpy(dc), np.zeros(n))     # Const: 0
    np.testing.assert_allclose(kk.to_numpy(tangent), 2.0 * expected, rtol=1e-7, atol=1e-9)

    both_dx, both_dc = kk.zeros(backend, np.float64, n), kk.zeros(backend, np.float64, n)
    wavy_both_active(backend, 8)(both_dx, both_dc, kk.to_backend(backend, x), 0.7, ndrange=n)
    np.testing.assert_allclose(kk.to_numpy(both_dx), expected, rtol=1e-7, atol=1e-9)
    expected_c = (wavy_numpy(x, 0.7 + h) - wavy_numpy(x, 0.7 - h)) / (2 * h)
    np.testing.assert_allclose(kk.to_numpy(both_dc), expected_c, rtol=1e-7, atol=1e-9)


@custom_vjp
def safe_norm(x, y):
    return kk.sqrt(x * x + y * y)


def safe_norm_forward(x, y):
    norm = kk.sqrt(x * x + y * y)
    return norm, (x, y, norm)


def safe_norm_backward(residuals, g):
    x, y, norm = residuals
    if norm == 0.0:
        return 0.0, 0.0
    return g * x / norm, g * y / norm


safe_norm.defvjp(safe_norm_forward, safe_norm_backward)


def plain_norm(x, y):
    return kk.sqrt(x * x + y * y)


@kk.kernel
def safe_norms(out, x, y):
    i = kk.index(kk.Global)
    out[i] = safe_norm(x[i], y[i])


@kk.kernel
def plain_norms(out, x, y):
    i = kk.index(kk.Global)
    out[i] = plain_norm(x[i], y[i])


@kk.kernel
def summed_norms(out, x, y, steps):
    """The residuals of each call in a loop are taped, one set per iteration."""
    i = kk.index(kk.Global)
    total = 0.0
    scale = 1.0
    for _ in range(steps):
        total += safe_norm(x[i] * scale, y[i])
        scale *= 0.5
    out[i] = total


def reverse_norms(backend, kernel, x, y, *extra):
    n = len(x)
    out = kk.zeros(backend, np.float64, n)
    dx, dy = kk.zeros(backend, np.float64, n), kk.zeros(backend, np.float64, n)
    autodiff(Reverse, kernel(backend, 4), Duplicated(out, kk.ones(backend, np.float64, n)),
             Duplicated(kk.to_backend(backend, x), dx),
             Duplicated(kk.to_backend(backend, y), dy), *extra, ndrange=n)
    return kk.to_numpy(out), kk.to_numpy(dx), kk.to_numpy(dy)


def test_a_custom_vjp_gives_its_rule_where_differentiating_the_body_gives_nan(backend):
    x = np.array([0.0, 3.0, 1.0, 0.0])
    y = np.array([0.0, 4.0, 1.0, 2.0])
    out, dx, dy = reverse_norms(backend, safe_norms, x, y)
    np.testing.assert_allclose(out, np.hypot(x, y))
    np.testing.assert_allclose(dx, [0.0, 0.6, 2 ** -0.5, 0.0])
    np.testing.assert_allclose(dy, [0.0, 0.8, 2 ** -0.5, 1.0])
    _, plain_dx, _ = reverse_norms(backend, plain_norms, x, y)
    assert np.isnan(plain_dx[0]) and np.allclose(plain_dx[1:], dx[1:])


def test_the_residuals_of_a_custom_rule_in_a_loop_are_taped_per_iteration(backend):
    x = np.array([0.0, 3.0, 1.0, -2.0])
    y = np.array([0.0, 4.0, 1.0, 0.5])
    out, dx, dy = reverse_norms(backend, summed_norms, x, y, Const(3))
    scales = np.array([1.0, 0.5, 0.25])
    norms = np.hypot(np.outer(x, scales), y[:, None])
    np.testing.assert_allclose(out, norms.sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        expected_dx = np.where(norms > 0, np.outer(x, scales) * scales / norms, 0).sum(axis=1)
        expected_dy = np.where(norms > 0, y[:, None] / norms, 0).sum(axis=1)
    np.testing.assert_allclose(dx, expected_dx)
    np.testing.assert_allclose(dy, expected_dy)


def test_a_function_with_a_custom_rule_is_a_plain_call_in_a_kernel_not_differentiated(backend):
    x = np.array([3.0, 0.0])
    out = kk.zeros(backend, np.float64, 2)
    safe_norms(backend, 2)(out, kk.to_backend(backend, x), kk.to_backend(backend, x), ndrange=2)
    np.testing.assert_allclose(kk.to_numpy(out), np.hypot(x, x))


@custom_jvp
def cube(x):
    return x * x * x


def cube_jvp(primals, tangents):
    (x,) = primals
    (dx,) = tangents
    return x * x * x, 3.0 * x * x * dx + 100.0 * (x == 0.0)   # marks the rule's use at 0


cube.defjvp(cube_jvp)


@kk.kernel
def cubes(out, x):
    i = kk.index(kk.Global)
    out[i] = cube(x[i]) + 1.0


def test_a_custom_jvp_gives_forward_mode_its_tangent(backend):
    x = np.array([0.0, 3.0, -1.0, 2.0])
    out = kk.zeros(backend, np.float64, 4)
    tangent = kk.zeros(backend, np.float64, 4)
    autodiff(Forward, cubes(backend, 4), Duplicated(out, tangent),
             Duplicated(kk.to_backend(backend, x), kk.ones(backend, np.float64, 4)), ndrange=4)
    np.testing.assert_allclose(kk.to_numpy(out), x ** 3 + 1)
    np.testing.assert_allclose(kk.to_numpy(tangent), 3 * x * x + 100.0 * (x == 0))


def test_a_rule_of_the_other_mode_is_a_clear_error(backend):
    x = kk.to_backend(backend, np.ones(4))
    with pytest.raises(CompileError, match="custom_jvp rule is a forward-mode rule") as error:
        autodiff(Reverse, cubes(backend, 4), Duplicated(kk.zeros(backend, np.float64, 4),
                                                        kk.ones(backend, np.float64, 4)),
                 Duplicated(x, kk.zeros(backend, np.float64, 4)), ndrange=4)
    assert "cube(x[i])" in str(error.value)
    with pytest.raises(CompileError, match="custom_vjp rule is a reverse-mode rule"):
        autodiff(Forward, safe_norms(backend, 4),
                 Duplicated(kk.zeros(backend, np.float64, 4), kk.zeros(backend, np.float64, 4)),
                 Duplicated(x, kk.ones(backend, np.float64, 4)),
                 Const(kk.to_backend(backend, np.ones(4))), ndrange=4)


@custom_vjp
def without_rule(x):
    return 2.0 * x


@kk.kernel
def calls_without_rule(out, x):
    i = kk.index(kk.Global)
    out[i] = without_rule(x[i])


def test_a_custom_vjp_without_its_rule_is_an_error_naming_the_call(backend):
    x = kk.to_backend(backend, np.ones(4))
    with pytest.raises(CompileError, match=r"without its rule[\s\S]*defvjp"):
        calls_without_rule(backend, 4)(kk.zeros(backend, np.float64, 4), x, ndrange=4)
