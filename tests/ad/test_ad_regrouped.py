"""Derivative kernels blind to their work-groups run, on the CPU, in groups of the CPU's
shape, as primal kernels do (`CPU.regrouped`): a GPU user's (16, 16) groups make short
vector loops and many streams of memory. The AD plugin's kernels are judged by what
their IR does with groups (`Plugin.work_groups_in_ir`), and a version for another shape
is the same transform made for that shape: the driver gives the transform the job's own
group size, and a version whose plugin notes differ (another tape, another split between
the gather and the reverse kernel) is not used."""
from dataclasses import replace

import numpy as np
import pytest

import kernelkit as kk
from enzyme_ext import Const, Duplicated, Reverse, ReverseSplit, autodiff, autodiff_thunk
from enzyme_ext import compiler_job_from_backend
from enzyme_ext.jobs import derivative_job
from enzyme_ext.rules import _rules
from enzyme_ext.signature import AUGMENTED, COMBINED, GATHER, REVERSE
from kernelkit.analysis.work_groups import NOTE as WORK_GROUPS_OBSERVED
from kernelkit.compiler.driver import compile_job


@kk.kernel
def heat_step(u_next, u: kk.Const, alpha):
    i, j = kk.index(kk.Global, kk.NTuple)
    rows, cols = kk.ndrange()
    if i == 0 or j == 0 or i == rows - 1 or j == cols - 1:
        u_next[i, j] = u[i, j]
    else:
        laplacian = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]
        u_next[i, j] = u[i, j] + alpha * laplacian


@kk.kernel
def scaled_sine(y, x: kk.Const, a):
    i, j = kk.index(kk.Global, kk.NTuple)
    y[i, j] = a * kk.sin(x[i, j])


def heat_adjoint(seed: np.ndarray, alpha: float) -> np.ndarray:
    """The adjoint of u for heat_step, written out in float64."""
    inner = seed[1:-1, 1:-1]
    adjoint = seed.copy()
    adjoint[1:-1, 1:-1] = (1.0 - 4.0 * alpha) * inner
    adjoint[:-2, 1:-1] += alpha * inner
    adjoint[2:, 1:-1] += alpha * inner
    adjoint[1:-1, :-2] += alpha * inner
    adjoint[1:-1, 2:] += alpha * inner
    return adjoint


def notes(backend, kernel, argtypes, workgroupsize, mode, activities, shadows):
    parent = compiler_job_from_backend(backend, kernel, argtypes,
                                       workgroupsize=workgroupsize)
    return compile_job(derivative_job(parent, mode, activities, shadows)).notes


def test_the_plugins_kernels_are_judged_by_their_ir():
    """The heat step's augmented, reverse and gather kernels compute their work-items
    alone; with alpha Active, the reverse kernel sums alpha's adjoint over each group in
    local memory: it observes its groups."""
    backend = kk.CPU(threads=2)
    u = np.zeros((40, 40), np.float32)
    argtypes = heat_step.argument_types(backend, (u, u, np.float32(0.2)))
    shadows = (argtypes[0], argtypes[0], None)
    for alpha, expected in (("const", False), ("active", True)):
        activities = ("duplicated", "duplicated", alpha)
        observed = {mode: notes(backend, heat_step, argtypes, (16, 16), mode, activities,
                                shadows)[WORK_GROUPS_OBSERVED]
                    for mode in (AUGMENTED, REVERSE, GATHER)}
        assert observed == {AUGMENTED: False, REVERSE: expected, GATHER: False}


@pytest.mark.parametrize("mode", [AUGMENTED, REVERSE, COMBINED])
def test_a_derivative_job_for_another_group_shape_makes_the_same_choices(mode):
    """The transform builds for the job's group size (the driver gives it to the marker),
    so the version for the CPU's shape has the same tape and the same gather kernel.
    (Before, the marker kept the first shape, and the version's transform found no
    neighbours to gather: its reverse kernel would have added them a second time.)"""
    backend = kk.CPU(threads=2)
    u = np.zeros((40, 40), np.float32)
    argtypes = heat_step.argument_types(backend, (u, u, np.float32(0.2)))
    activities = ("duplicated", "duplicated", "const")
    shadows = (argtypes[0], argtypes[0], None)
    parent = compiler_job_from_backend(backend, heat_step, argtypes, workgroupsize=(16, 16))
    job = derivative_job(parent, mode, activities, shadows)
    first = compile_job(job).notes
    for shape in [(4, 256), (1, 1024)]:
        other = compile_job(replace(job, config=replace(job.config, workgroupsize=shape)))
        assert other.notes["enzyme"] == first["enzyme"]
        assert other.notes["enzyme"].gather


def prepared_kernels(launch):
    """The CPU's prepared derivative kernels of every rule of `launch` (an augmented
    kernel that the primal launch stands for is not compiled)."""
    return [entry[0] for rule in _rules[launch].values()
            for entry in rule._prepared.values()
            if isinstance(entry, tuple) and entry[0] is not None]


@pytest.mark.parametrize("workgroupsize", [(16, 16), (1, 1), (4, 8)])
def test_the_heat_steps_gradient_is_the_same_in_every_group_shape(workgroupsize):
    backend = kk.CPU(threads=2)
    rng = np.random.default_rng(11)
    u = rng.random((37, 70), dtype=np.float32)
    seed = rng.random((37, 70), dtype=np.float32)
    alpha = np.float32(0.2)
    launch = heat_step(backend, workgroupsize)
    gradients = []
    for mode in (Reverse, ReverseSplit):
        du = np.zeros_like(u)
        d_next = seed.copy()
        arguments = (Duplicated(np.zeros_like(u), d_next), Duplicated(u, du), alpha)
        if mode is Reverse:
            autodiff(Reverse, launch, *arguments, ndrange=u.shape)
        else:
            forward, reverse = autodiff_thunk(ReverseSplit, launch, Duplicated, Duplicated,
                                              Const)
            tape = forward(*arguments, ndrange=u.shape)
            reverse(*arguments, tape=tape, ndrange=u.shape)
        kk.synchronize(backend)
        assert not d_next.any()
        gradients.append(du)
    np.testing.assert_array_equal(gradients[0], gradients[1])
    np.testing.assert_allclose(gradients[0], heat_adjoint(seed.astype(np.float64),
                                                          float(alpha)), rtol=1e-5)
    # The kernels blind to their groups ran in the CPU's shape: each has a version made.
    regrouped = [p for p in prepared_kernels(launch)
                 if p.compiled.notes[WORK_GROUPS_OBSERVED] is False]
    assert regrouped and all(p.regrouped and all(p.regrouped.values()) for p in regrouped)


def test_a_regrouped_gradient_equals_the_one_in_the_users_shape():
    """A kernel blind to its groups, with no gather kernel: its combined kernel runs in
    the CPU's shape and gives the bits of the same kernel in (1, 1) groups."""
    backend = kk.CPU(threads=2)
    rng = np.random.default_rng(12)
    x = rng.random((33, 1100), dtype=np.float32)
    seed = rng.random(x.shape, dtype=np.float32)
    results = []
    for workgroupsize in [(16, 16), (1, 1)]:
        dx, dy = np.zeros_like(x), seed.copy()
        autodiff(Reverse, scaled_sine(backend, workgroupsize),
                 Duplicated(np.zeros_like(x), dy), Duplicated(x, dx), np.float32(1.5),
                 ndrange=x.shape)
        kk.synchronize(backend)
        results.append(dx)
    np.testing.assert_array_equal(results[0], results[1])
    expected = 1.5 * np.cos(x.astype(np.float64)) * seed
    np.testing.assert_allclose(results[0], expected, rtol=1e-5)
