"""Derivatives of kernels that take frozen dataclasses (and tuples) of numbers, and of
kernels that make dataclasses inside: in reverse mode an `Active` dataclass's derivative
comes back as one of its class (the derivative in each float field, 0 in the others),
one kernel or two; in forward mode a `Duplicated` dataclass's shadow, one of its class,
carries each float field's tangent. Checked against central finite differences (float64),
on every backend (compile-only where there is no GPU)."""
import dataclasses

import numpy as np
import pytest

import kernelkit as kk
from enzyme_ext import (Active, Const, Duplicated, Forward, Reverse, ReverseSplit, autodiff,
                        autodiff_thunk)

N = 32
STEP = 1e-6


@dataclasses.dataclass(frozen=True)
class Spring:
    stiffness: float
    rest: np.float64
    segments: int


@dataclasses.dataclass(frozen=True)
class Oscillator:
    x: float
    v: float


@kk.kernel
def spring_energy(energy, x: kk.Const, spring):
    i = kk.index(kk.Global)
    stretch = x[i] - spring.rest
    e = 0.5 * spring.stiffness * stretch * stretch
    for _ in range(spring.segments):      # an integer field, bounding a loop
        e = e + 0.1 * spring.stiffness * stretch
    energy[i] = e


def energy_of(x, spring):
    stretch = x - spring.rest
    return 0.5 * spring.stiffness * stretch ** 2 + spring.segments * 0.1 * spring.stiffness \
        * stretch


def central(f, spring, field):
    up = dataclasses.replace(spring, **{field: getattr(spring, field) + STEP})
    down = dataclasses.replace(spring, **{field: getattr(spring, field) - STEP})
    return (f(up) - f(down)) / (2 * STEP)


X = np.linspace(-1.0, 2.0, N)
SPRING = Spring(3.0, np.float64(0.25), 2)


def launch(backend):
    return spring_energy(backend, 8)


@pytest.mark.parametrize("split", [False, True], ids=["one-kernel", "two-kernels"])
def test_an_active_dataclass_returns_its_derivative_as_one_of_its_class(backend, split):
    x = kk.to_backend(backend, X)
    energy = kk.zeros(backend, np.float64, N)
    seed = np.random.default_rng(1).random(N)
    args = (Duplicated(energy, kk.to_backend(backend, seed.copy())), Const(x), Active(SPRING))
    if split:
        forward, reverse = autodiff_thunk(ReverseSplit, launch(backend), Duplicated, Const,
                                          Active)
        tape = forward(*args, ndrange=N)
        derivatives = reverse(*args, tape=tape, ndrange=N)
    else:
        derivatives = autodiff(Reverse, launch(backend), *args, ndrange=N)
    _, _, d_spring = derivatives
    assert type(d_spring) is Spring
    assert type(d_spring.rest) is np.float64 and d_spring.segments == 0

    def loss(spring):
        return float(seed @ energy_of(X, spring))
    assert d_spring.stiffness == pytest.approx(central(loss, SPRING, "stiffness"), rel=1e-7)
    assert float(d_spring.rest) == pytest.approx(central(loss, SPRING, "rest"), rel=1e-7)
    np.testing.assert_allclose(kk.to_numpy(energy), energy_of(X, SPRING), rtol=1e-15)


def test_a_const_dataclass_has_no_derivative_and_the_arrays_have_theirs(backend):
    x = kk.to_backend(backend, X)
    d_x = kk.zeros(backend, np.float64, N)
    energy = kk.zeros(backend, np.float64, N)
    derivatives = autodiff(Reverse, launch(backend),
                           Duplicated(energy, kk.to_backend(backend, np.ones(N))),
                           Duplicated(x, d_x), Const(SPRING), ndrange=N)
    assert derivatives == (None, None, None)
    stretch = X - SPRING.rest
    expected = SPRING.stiffness * stretch + SPRING.segments * 0.1 * SPRING.stiffness
    np.testing.assert_allclose(kk.to_numpy(d_x), expected, rtol=1e-14)


def test_a_duplicated_dataclass_carries_its_tangent_in_forward_mode(backend):
    x = kk.to_backend(backend, X)
    energy = kk.zeros(backend, np.float64, N)
    d_energy = kk.zeros(backend, np.float64, N)
    tangent = Spring(0.5, np.float64(-2.0), 0)
    autodiff(Forward, launch(backend), Duplicated(energy, d_energy), Const(x),
             Duplicated(SPRING, tangent), ndrange=N)
    expected = sum(getattr(tangent, field) * np.array(
        [central(lambda s: energy_of(X, s)[i], SPRING, field) for i in range(N)])
        for field in ("stiffness", "rest"))
    np.testing.assert_allclose(kk.to_numpy(d_energy), expected, rtol=1e-7)


@kk.kernel
def line(y, x: kk.Const, coefficients):
    i = kk.index(kk.Global)
    a, b = coefficients
    y[i] = a * x[i] + b * b


def test_an_active_tuple_returns_a_tuple_of_derivatives(backend):
    y = kk.zeros(backend, np.float64, N)
    _, _, (d_a, d_b) = autodiff(Reverse, line(backend, 8),
                                Duplicated(y, kk.to_backend(backend, np.ones(N))),
                                Const(kk.to_backend(backend, X)), Active((1.5, 2.0)),
                                ndrange=N)
    assert d_a == pytest.approx(X.sum(), rel=1e-14) and d_b == pytest.approx(4.0 * N)


# --- dataclasses made in the kernel ------------------------------------------------------


def step(o, dt, k):
    return Oscillator(o.x + dt * o.v, o.v - dt * k * o.x)


@kk.kernel
def oscillate(final, x0: kk.Const, k: float):
    i = kk.index(kk.Global)
    o = Oscillator(x0[i], 0.0)
    for _ in range(50):
        o = step(o, 0.05, k)
    final[i] = o.x * o.x + o.v


def oscillate_numpy(x0, k):
    x, v = x0.copy(), np.zeros_like(x0)
    for _ in range(50):
        x, v = x + 0.05 * v, v - 0.05 * k * x
    return x * x + v


def test_derivatives_flow_through_dataclasses_a_kernel_makes_and_steps(backend):
    x0 = np.linspace(0.1, 1.0, N)
    final = kk.zeros(backend, np.float64, N)
    d_x0 = kk.zeros(backend, np.float64, N)
    _, _, d_k = autodiff(Reverse, oscillate(backend, 8),
                         Duplicated(final, kk.to_backend(backend, np.ones(N))),
                         Duplicated(kk.to_backend(backend, x0), d_x0), Active(1.3), ndrange=N)
    expected_x0 = (oscillate_numpy(x0 + STEP, 1.3) - oscillate_numpy(x0 - STEP, 1.3)) / \
        (2 * STEP)
    np.testing.assert_allclose(kk.to_numpy(d_x0), expected_x0, rtol=1e-6)
    expected_k = (oscillate_numpy(x0, 1.3 + STEP).sum() -
                  oscillate_numpy(x0, 1.3 - STEP).sum()) / (2 * STEP)
    assert d_k == pytest.approx(expected_k, rel=1e-6)


# --- what is refused, and why ------------------------------------------------------------


def test_a_dataclass_duplicated_in_reverse_mode_is_an_error_suggesting_active():
    energy = np.zeros(N)
    with pytest.raises(kk.LaunchError, match=r"argument 'spring' is a Duplicated dataclass "
                                             r"of numbers, which is for forward mode; in "
                                             r"reverse mode pass Active\(spring\)"):
        autodiff(Reverse, launch(kk.CPU()), Duplicated(energy, np.ones(N)), Const(X),
                 Duplicated(SPRING, SPRING), ndrange=N)


def test_an_active_dataclass_without_floats_and_a_mismatched_tangent_are_errors():
    @dataclasses.dataclass(frozen=True)
    class Counts:
        segments: int
    energy = np.zeros(N)
    with pytest.raises(kk.LaunchError, match="holds no float"):
        autodiff(Reverse, launch(kk.CPU()), Duplicated(energy, np.ones(N)), Const(X),
                 Active(Counts(2)), ndrange=N)
    with pytest.raises(kk.LaunchError, match="the tangent of 'spring' must be a dataclass "
                                             "of its class"):
        autodiff(Forward, launch(kk.CPU()), Duplicated(energy, np.zeros(N)), Const(X),
                 Duplicated(SPRING, Oscillator(1.0, 2.0)), ndrange=N)


# --- dataclasses that hold arrays --------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class State:
    x: object
    v: object
    ids: object         # integers: no derivative
    dt: float


@kk.kernel
def leapfrog(state, force: kk.Const, energy):
    i = kk.index(kk.Global)
    v = state.v[i] + state.dt * force[i] * force[i]
    state.v[i] = v
    state.x[i] = state.x[i] + state.dt * v * state.ids[i]
    energy[i] = state.x[i] * state.x[i]


M = 16
RNG = np.random.default_rng(5)
X0, V0, F0 = RNG.random(M), RNG.random(M), RNG.random(M)
IDS = np.arange(M)


def leapfrog_loss(x0, v0, f0):
    """sum(energy) + sum(final v), the loss the reverse-mode test seeds."""
    v = v0 + 0.1 * f0 * f0
    x = x0 + 0.1 * v * IDS
    return float((x * x).sum() + v.sum())


def state_on(backend, x, v, ids, dt):
    return State(*(kk.to_backend(backend, np.array(a)) for a in (x, v, ids)), dt)


def test_a_duplicated_dataclass_of_arrays_gets_each_float_array_its_adjoint(backend):
    state = state_on(backend, X0, V0, IDS, 0.1)
    shadow = state_on(backend, np.zeros(M), np.ones(M), np.zeros(M, IDS.dtype), 0.0)
    d_force = kk.zeros(backend, np.float64, M)
    energy = kk.zeros(backend, np.float64, M)
    derivatives = autodiff(Reverse, leapfrog(backend, 8), Duplicated(state, shadow),
                           Duplicated(kk.to_backend(backend, F0.copy()), d_force),
                           Duplicated(energy, kk.to_backend(backend, np.ones(M))), ndrange=M)
    assert derivatives == (None, None, None)
    eye = np.eye(M)

    def central_along(argument):
        arguments = [X0, V0, F0]
        gradient = []
        for i in range(M):
            up, down = list(arguments), list(arguments)
            up[argument], down[argument] = arguments[argument] + STEP * eye[i], \
                arguments[argument] - STEP * eye[i]
            gradient.append((leapfrog_loss(*up) - leapfrog_loss(*down)) / (2 * STEP))
        return np.array(gradient)
    np.testing.assert_allclose(kk.to_numpy(shadow.x), central_along(0), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(kk.to_numpy(shadow.v), central_along(1), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(kk.to_numpy(d_force), central_along(2), rtol=1e-6, atol=1e-9)
    np.testing.assert_array_equal(kk.to_numpy(shadow.ids), 0)


def test_a_duplicated_dataclass_of_arrays_carries_tangents_in_forward_mode(backend):
    state = state_on(backend, X0, V0, IDS, 0.1)
    tangent = state_on(backend, np.ones(M), np.zeros(M), np.zeros(M, IDS.dtype), 0.5)
    energy = kk.zeros(backend, np.float64, M)
    d_energy = kk.zeros(backend, np.float64, M)
    autodiff(Forward, leapfrog(backend, 8), Duplicated(state, tangent), Const(
        kk.to_backend(backend, F0)), Duplicated(energy, d_energy), ndrange=M)
    v = V0 + 0.1 * F0 * F0
    x = X0 + 0.1 * v * IDS
    # d(x^2) = 2x (dx0 + d(dt) * (f^2 * x-step ...)): dt's tangent 0.5 flows in both terms
    d_v = 0.5 * F0 * F0
    d_x = 1.0 + (0.5 * v + 0.1 * d_v) * IDS
    np.testing.assert_allclose(kk.to_numpy(d_energy), 2 * x * d_x, rtol=1e-14)


def test_an_active_dataclass_of_arrays_and_a_program_given_one_are_errors():
    state = State(X0.copy(), V0.copy(), IDS, 0.1)
    energy = np.zeros(M)
    with pytest.raises(kk.LaunchError, match=r"argument 'state' is Active, but the dataclass "
                                             r"holds arrays, .* Duplicated\(state, shadow\)"):
        autodiff(Reverse, leapfrog(kk.CPU(), 8), Active(state), Const(F0),
                 Duplicated(energy, np.ones(M)), ndrange=M)

    def program(x, energy):
        leapfrog(kk.CPU(), 8)(State(x, V0.copy(), IDS, 0.1), F0, energy, ndrange=M)
    with pytest.raises(kk.KernelkitError, match="which holds arrays; a recorded program "
                                                "follows arrays passed to its launches as "
                                                "arguments of their own"):
        autodiff(Reverse, program, Duplicated(X0.copy(), np.zeros(M)),
                 Duplicated(np.zeros(M), np.ones(M)))
