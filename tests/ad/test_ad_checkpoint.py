"""Binomial checkpointing of a time loop (`enzyme_ext.checkpoint`): the gradient is the
one every step's tape gives, bit for bit, with at most `budget` copies of the state, and
each step runs forward at most as often as the binomial bound says."""
import resource

import numpy as np
import pytest

import kernelkit as kk
from enzyme_ext import checkpoint, gradient
from enzyme_ext.checkpointing import repetitions

GROUP = 64


@kk.kernel
def diffuse(out, u: kk.Const, alpha):
    i = kk.index(kk.Global)
    left = u[i - 1] if i > 0 else u[i]
    right = u[i + 1] if i < len(u) - 1 else u[i]
    out[i] = u[i] + alpha * (left - 2.0 * u[i] + right)


@kk.kernel
def copy(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i]


@kk.kernel
def sum_of_squares(out, y: kk.Const, n):
    i = kk.index(kk.Global)
    if i == 0:
        s = 0.0
        for k in range(n):
            s += y[k] * y[k]
        out[0] = s


def heat(backend, n, calls=None):
    """One step of the heat equation on `u` in place, through a temporary."""
    def step(u, alpha):
        if calls is not None:
            calls.append(1)
        t = kk.zeros(backend, np.float64, n)
        diffuse(backend, GROUP)(t, u, alpha, ndrange=n)
        copy(backend, GROUP)(u, t, ndrange=n)
    return step


def loss_program(backend, n, loop):
    def program(u, alpha):
        loop(u, alpha)
        out = kk.zeros(backend, np.float64, 1)
        sum_of_squares(backend, 1)(out, u, n, ndrange=1)
        return out
    return program


def every_step(step, steps):
    def loop(u, alpha):
        for _ in range(steps):
            step(u, alpha)
    return loop


@pytest.mark.parametrize("budget", [1, 3, 8])
def test_the_checkpointed_gradient_is_the_taped_one_bit_for_bit(backend, budget):
    n, steps = 64, 20
    u0 = np.sin(np.linspace(0.0, 3.0, n))
    step = heat(backend, n)
    taped = gradient(loss_program(backend, n, every_step(step, steps)), argnums=(0, 1))
    du, dalpha = taped(kk.to_backend(backend, u0.copy()), 0.2)
    calls = []
    loop = checkpoint(heat(backend, n, calls), steps, budget=budget)
    checkpointed = gradient(loss_program(backend, n, loop), argnums=(0, 1))
    du_checkpointed, dalpha_checkpointed = checkpointed(kk.to_backend(backend, u0.copy()), 0.2)
    np.testing.assert_array_equal(kk.to_numpy(du_checkpointed), kk.to_numpy(du))
    assert dalpha_checkpointed == dalpha
    # Each step runs once while its reverse is taped; the other runs are advances.
    assert len(calls) == steps + loop.last_schedule.advances
    assert loop.last_schedule.advances <= repetitions(steps, budget - 1) * steps


def test_a_plain_run_of_a_checkpointed_loop_is_the_loop(backend):
    n = 64
    u = kk.to_backend(backend, np.sin(np.linspace(0.0, 3.0, n)))
    v = kk.to_backend(backend, np.sin(np.linspace(0.0, 3.0, n)))
    checkpoint(heat(backend, n), 7, budget=2)(u, 0.2)
    every_step(heat(backend, n), 7)(v, 0.2)
    np.testing.assert_array_equal(kk.to_numpy(u), kk.to_numpy(v))


def test_ten_thousand_steps_keep_at_most_the_budget_of_states():
    """10,000 steps with 50 copies: at most 50 states are held at once, and the process
    grows by far less than a tape of every step would take; each step is advanced at
    most 3 times."""
    backend = kk.CPU(threads=1)
    n, steps, budget = 1024, 10_000, 50
    u0 = np.sin(np.linspace(0.0, 3.0, n))
    warm_up = checkpoint(heat(backend, n), 4, budget=2)     # compiles every kernel
    gradient(loss_program(backend, n, warm_up), argnums=(0, 1))(u0.copy(), 0.2)
    loop = checkpoint(heat(backend, n), steps, budget=budget)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    du, _ = gradient(loss_program(backend, n, loop), argnums=(0, 1))(u0.copy(), 0.2)
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    schedule = loop.last_schedule
    assert schedule.most_copies <= budget
    # Each step's tape, shadows and temporaries (several states' worth) kept for all
    # 10,000 steps would be over 300 MiB.
    assert grown < 64 * 2 ** 20, f"grew {grown / 2 ** 20:.0f} MiB"
    assert repetitions(steps, budget - 1) == 3
    assert steps <= schedule.advances <= 3 * steps
    assert np.all(np.isfinite(du)) and np.any(du)
