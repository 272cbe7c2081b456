"""A program's reverse pass skips zeros nobody reads (`enzyme_ext/transform/outputs.py`,
`program.Zeros`): a reverse kernel leaves the shadow of an array its kernel overwrites
whole unzeroed, and the next gather kernel into that shadow stores instead of adding.
Each program's gradient is checked bit for bit against the same launches differentiated
one by one with `ReverseSplit` (which zero every shadow as they go), and against the
adjoint written in NumPy; the tests that follow a zero only in value check that it is
zeroed before anything reads it, and at the end."""
import numpy as np
import pytest

import kernelkit as kk
from enzyme_ext import (Const, Duplicated, Reverse, ReverseSplit, autodiff, autodiff_thunk,
                        compiler_job_from_backend)
from enzyme_ext.jobs import derivative_job
from enzyme_ext import program as programs
from enzyme_ext.program import Zeros
from enzyme_ext.signature import GATHER_STORED, REVERSE_UNZEROED
from kernelkit.compiler.driver import compile_job

GROUP = (8, 8)


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
def interior_step(out, u: kk.Const, alpha):
    """Writes the interior only: its ndrange is (rows - 2, cols - 2)."""
    i, j = kk.index(kk.Global, kk.NTuple)
    r, c = i + 1, j + 1
    laplacian = u[r - 1, c] + u[r + 1, c] + u[r, c - 1] + u[r, c + 1] - 4.0 * u[r, c]
    out[r, c] = u[r, c] + alpha * laplacian


@kk.kernel
def scale(y, x: kk.Const, a):
    i = kk.index(kk.Global)
    y[i] = a * x[i]


@kk.kernel
def scale_then_add(y, x: kk.Const, a):
    """Stores into y twice on one path: y's adjoint must be zero for the first store."""
    i = kk.index(kk.Global)
    y[i] = a * x[i]
    y[i] = y[i] + x[i]


@kk.kernel
def scale_unless_last(y, x: kk.Const, a):
    """The last work-item returns before storing."""
    i = kk.index(kk.Global)
    if i == len(y) - 1:
        return
    y[i] = a * x[i]


@kk.kernel
def scale_in_a_loop(y, x: kk.Const, a, n):
    i = kk.index(kk.Global)
    for _ in range(n):
        y[i] = a * x[i]


@kk.kernel
def shift(y, x: kk.Const):
    i = kk.index(kk.Global)
    if i + 1 < len(y):
        y[i + 1] = x[i]
    else:
        y[0] = x[i]


def compiled(backend, kernel, arguments, workgroupsize, mode="reverse"):
    arguments = [kk.to_backend(backend, a) if isinstance(a, np.ndarray) else a
                 for a in arguments]
    argtypes = kernel.argument_types(backend, tuple(arguments))
    parent = compiler_job_from_backend(backend, kernel.function, argtypes,
                                       workgroupsize=workgroupsize)
    names = tuple(Duplicated.name if isinstance(a, np.ndarray) else Const.name
                  for a in arguments)
    return compile_job(derivative_job(parent, mode, names, (None,) * len(names)))


def whole_outputs(backend, kernel, arguments, workgroupsize):
    return compiled(backend, kernel, arguments, workgroupsize).notes["enzyme"].whole_outputs


def test_the_arrays_a_kernel_overwrites_whole(backend):
    grid, line = np.ones((16, 16)), np.ones(16)
    assert whole_outputs(backend, heat_step, [grid, grid, 0.2], GROUP) == (0,)
    assert whole_outputs(backend, interior_step, [grid, grid, 0.2], GROUP) == ()
    assert whole_outputs(backend, scale, [line, line, 2.0], (8,)) == (0,)
    assert whole_outputs(backend, scale_then_add, [line, line, 2.0], (8,)) == ()
    assert whole_outputs(backend, scale_unless_last, [line, line, 2.0], (8,)) == ()
    assert whole_outputs(backend, scale_in_a_loop, [line, line, 2.0, 3], (8,)) == ()
    assert whole_outputs(backend, shift, [line, line], (8,)) == ()


def test_the_program_forms_of_the_kernels_leave_out_a_load_and_the_zeroing(backend):
    """On every target: the stored gather kernel does not read the shadow it writes, and
    the unzeroed reverse kernel stores nothing into the overwritten array's shadow."""
    grid = np.ones((16, 16))
    arguments = [grid, grid, 0.2]
    gather, stored = (compiled(backend, heat_step, arguments, GROUP, mode).ir
                      for mode in ("gather", GATHER_STORED))
    reverse, unzeroed = (compiled(backend, heat_step, arguments, GROUP, mode).ir
                         for mode in ("reverse", REVERSE_UNZEROED))
    # Parameters: u_next, d_u_next, u, d_u, alpha, the tape.
    assert "load %3," in gather and "load %3," not in stored and "store %3," in stored
    assert "store %1," in reverse and "store %1," not in unzeroed


def heat_adjoint(adjoint: np.ndarray, alpha: float, steps: int) -> np.ndarray:
    """The adjoint of `steps` heat steps (`heat_step`) applied to `adjoint`."""
    for _ in range(steps):
        inner = adjoint[1:-1, 1:-1]
        result = adjoint.copy()
        result[1:-1, 1:-1] = (1.0 - 4.0 * alpha) * inner
        result[:-2, 1:-1] += alpha * inner
        result[2:, 1:-1] += alpha * inner
        result[1:-1, :-2] += alpha * inner
        result[1:-1, 2:] += alpha * inner
        adjoint = result
    return adjoint


def ping_pong(backend, kernel, shape, ndrange, steps, alpha):
    def program(initial, final):
        current, following = kk.zeros_like(initial), kk.zeros_like(initial)
        kk.copyto(current, initial)
        step = kernel(backend, GROUP)
        for _ in range(steps):
            step(following, current, alpha, ndrange=ndrange)
            current, following = following, current
        kk.copyto(final, current)
    return program


def one_by_one(backend, kernel, u0, seed, ndrange, steps, alpha):
    """The ping-pong loop's gradient, each launch differentiated on its own
    (`ReverseSplit`), every shadow zeroed as the reverse kernels go."""
    buffers = [kk.to_backend(backend, u0.copy()), kk.zeros(backend, u0.dtype, u0.shape)]
    shadows = [kk.zeros(backend, u0.dtype, u0.shape), kk.zeros(backend, u0.dtype, u0.shape)]
    forward, reverse = autodiff_thunk(ReverseSplit, kernel(backend, GROUP), Duplicated(
        buffers[1], shadows[1]), Duplicated(buffers[0], shadows[0]), Const(alpha))
    tapes = []
    for k in range(steps):
        out, into = buffers[(k + 1) % 2], buffers[k % 2]
        tapes.append(forward(Duplicated(out, shadows[(k + 1) % 2]),
                             Duplicated(into, shadows[k % 2]), Const(alpha), ndrange=ndrange))
    kk.copyto(shadows[steps % 2], seed)
    for k in reversed(range(steps)):
        out, into = (k + 1) % 2, k % 2
        reverse(Duplicated(buffers[out], shadows[out]), Duplicated(buffers[into],
                                                                     shadows[into]),
                Const(alpha), tape=tapes[k], ndrange=ndrange)
    return kk.to_numpy(shadows[0])


@pytest.mark.parametrize("kernel, interior", [(heat_step, False), (interior_step, True)],
                         ids=["whole", "interior"])
def test_a_ping_pong_loop_s_gradient_is_the_launches_one_by_one(backend, kernel, interior):
    shape, steps, alpha = (21, 27), 6, np.float32(0.2)
    ndrange = (shape[0] - 2, shape[1] - 2) if interior else shape
    rng = np.random.default_rng(3)
    u0 = rng.random(shape, dtype=np.float32)
    seed = rng.random(shape, dtype=np.float32)
    program = ping_pong(backend, kernel, shape, ndrange, steps, alpha)
    d_initial = kk.zeros(backend, np.float32, shape)
    d_final = kk.to_backend(backend, seed.copy())
    autodiff(Reverse, program, Duplicated(kk.to_backend(backend, u0), d_initial),
             Duplicated(kk.zeros(backend, np.float32, shape), d_final))
    got = kk.to_numpy(d_initial)
    expected = one_by_one(backend, kernel, u0, seed, ndrange, steps, alpha)
    np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32))
    assert not np.any(kk.to_numpy(d_final))     # the final field's adjoint is taken
    if not interior:
        np.testing.assert_allclose(got, heat_adjoint(seed.astype(np.float64), 0.2, steps),
                                   rtol=1e-5, atol=1e-6)
        kernels = heat_step_kernels(backend)
        assert GATHER_STORED in kernels and REVERSE_UNZEROED in kernels


def heat_step_kernels(backend) -> set:
    """The derivative kernels the rules of `heat_step` on `backend` compiled."""
    from enzyme_ext.rules import _rules
    found = set()
    for launch, rules in _rules.items():
        if getattr(launch, "kernel", None) is heat_step and launch.backend is backend:
            for rule in rules.values():
                for _, plan in rule._plans.entries.values():
                    found.update(plan.kernels)
    return found


def overwritten_twice(backend, n):
    """y = 2 x, then y = 3 x2 over it: the first launch's reverse reads y's adjoint,
    which the second's left zero in value only."""
    def program(x, x2, out):
        y = kk.zeros(backend, np.float64, n)
        scale(backend, 8)(y, x, 2.0, ndrange=n)
        scale(backend, 8)(y, x2, 3.0, ndrange=n)
        scale(backend, 8)(out, y, 1.0, ndrange=n)
    return program


def test_a_shadow_left_unzeroed_is_zeroed_before_a_reverse_kernel_reads_it(backend):
    n = 40
    x, x2 = np.linspace(0.1, 1.0, n), np.linspace(1.0, 2.0, n)
    seed = np.linspace(-1.0, 1.0, n)
    dx, dx2 = kk.zeros(backend, np.float64, n), kk.zeros(backend, np.float64, n)
    d_out = kk.to_backend(backend, seed.copy())
    autodiff(Reverse, overwritten_twice(backend, n), Duplicated(kk.to_backend(backend, x), dx),
             Duplicated(kk.to_backend(backend, x2), dx2),
             Duplicated(kk.zeros(backend, np.float64, n), d_out))
    assert not np.any(kk.to_numpy(dx))     # y's first contents did not count
    np.testing.assert_array_equal(kk.to_numpy(dx2), 3.0 * seed)
    assert not np.any(kk.to_numpy(d_out))


def test_without_zeroing_what_is_zero_in_value_the_gradient_would_be_wrong(backend,
                                                                          monkeypatch):
    """The zeroing is what makes the previous test right."""
    monkeypatch.setattr(Zeros, "zero_in_memory", lambda self, shadow: None)
    n = 40
    x = np.linspace(0.1, 1.0, n)
    dx, dx2 = kk.zeros(backend, np.float64, n), kk.zeros(backend, np.float64, n)
    d_out = kk.to_backend(backend, np.ones(n))
    autodiff(Reverse, overwritten_twice(backend, n), Duplicated(kk.to_backend(backend, x), dx),
             Duplicated(kk.to_backend(backend, x), dx2),
             Duplicated(kk.zeros(backend, np.float64, n), d_out))
    assert np.any(kk.to_numpy(dx))       # y's adjoint read as it was left
    assert np.any(kk.to_numpy(d_out))    # and the final one never zeroed


def in_place_loop(backend, steps, alpha):
    """Each step into a temporary, copied back (`kk.copyto`): the copy's reverse moves
    the adjoint into the temporary's, which the step's gather kernel then reads."""
    def program(initial, final):
        field = kk.zeros_like(initial)
        kk.copyto(field, initial)
        for _ in range(steps):
            following = kk.empty_like(field)
            heat_step(backend, GROUP)(following, field, alpha, ndrange=field.shape)
            kk.copyto(field, following)
        kk.copyto(final, field)
    return program


@pytest.mark.parametrize("steps", [1, 5])
def test_an_in_place_loop_s_gradient_is_the_same_bits_knowing_no_zeros(backend, steps,
                                                                       monkeypatch):
    shape, alpha = (19, 24), np.float32(0.2)
    rng = np.random.default_rng(4)
    u0 = rng.random(shape, dtype=np.float32)
    seed = rng.random(shape, dtype=np.float32)

    def gradient_() -> np.ndarray:
        d_initial = kk.zeros(backend, np.float32, shape)
        d_final = kk.to_backend(backend, seed.copy())
        autodiff(Reverse, in_place_loop(backend, steps, alpha),
                 Duplicated(kk.to_backend(backend, u0), d_initial),
                 Duplicated(kk.zeros(backend, np.float32, shape), d_final))
        assert not np.any(kk.to_numpy(d_final))
        return kk.to_numpy(d_initial)

    got = gradient_()
    np.testing.assert_allclose(got, heat_adjoint(seed.astype(np.float64), 0.2, steps),
                               rtol=1e-5, atol=1e-6)
    monkeypatch.setattr(programs, "SKIP_ZEROS", False)
    expected = gradient_()
    np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32))


@kk.kernel
def scale_grid(y, x: kk.Const, a):
    i, j = kk.index(kk.Global, kk.NTuple)
    y[i, j] = a * x[i, j]


def test_a_transposed_output_s_shadow_left_unzeroed_is_zeroed_where_it_lies(backend):
    """The shadow of a transposed argument is a strided view: zeroing it through a
    flattened one would zero a copy (NumPy) or be refused (CUDA)."""
    shape = (6, 10)
    x = np.linspace(0.1, 1.0, 60).reshape(shape)
    seed = np.linspace(-1.0, 1.0, 60).reshape(shape)
    dx, dx2 = kk.zeros(backend, np.float64, shape), kk.zeros(backend, np.float64, shape)
    d_y = kk.to_backend(backend, seed.T.copy()).T

    def program(x, x2, y):
        scale_grid(backend, (2, 2))(y, x, 2.0, ndrange=shape)
        scale_grid(backend, (2, 2))(y, x2, 3.0, ndrange=shape)

    autodiff(Reverse, program, Duplicated(kk.to_backend(backend, x), dx),
             Duplicated(kk.to_backend(backend, x + 1.0), dx2),
             Duplicated(kk.zeros(backend, np.float64, shape[::-1]).T, d_y))
    assert not np.any(kk.to_numpy(dx))     # y's first contents did not count
    np.testing.assert_array_equal(kk.to_numpy(dx2), 3.0 * seed)
    assert not np.any(kk.to_numpy(d_y))


def test_a_copy_s_adjoint_reaches_a_transposed_source_s_shadow(backend):
    shape = (6, 10)
    x = np.linspace(0.1, 1.0, 60).reshape(shape)
    seed = np.linspace(-1.0, 1.0, 60).reshape(shape)
    d_x = kk.zeros(backend, np.float64, shape[::-1]).T

    def program(x, y):
        temporary = kk.zeros_like(x)
        kk.copyto(temporary, x)
        scale_grid(backend, (2, 2))(y, temporary, 3.0, ndrange=shape)

    autodiff(Reverse, program, Duplicated(kk.to_backend(backend, x.T.copy()).T, d_x),
             Duplicated(kk.zeros(backend, np.float64, shape), kk.to_backend(backend, seed.copy())))
    np.testing.assert_array_equal(kk.to_numpy(d_x), 3.0 * seed)
