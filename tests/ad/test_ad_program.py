"""`autodiff` of Python programs that launch kernels (`enzyme_ext.program`): their
launches are recorded as they run and differentiated one by one, with activities that
follow the data, and an array a later launch overwrites is kept for the earlier
launches' reverse passes. Checked against central finite differences of the whole
program in float64, on every backend (CUDA compile-only where there is no GPU)."""
import numpy as np
import pytest

import kernelkit as kk
from enzyme_ext import Active, Const, Duplicated, Forward, Reverse, autodiff, gradient
from enzyme_ext.program import Recording

N = 40
GROUP = 16
STEP = 1e-6


@kk.kernel
def square(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i] * x[i]


@kk.kernel
def scaled_sin(x, t: kk.Const, a):
    i = kk.index(kk.Global)
    x[i] = a * kk.sin(t[i])


@kk.kernel
def add_scaled(y, x: kk.Const, a):
    i = kk.index(kk.Global)
    y[i] = y[i] + a * x[i]


@kk.kernel
def diffuse(out, u: kk.Const, alpha):
    i = kk.index(kk.Global)
    left = u[i - 1] if i > 0 else u[i]
    right = u[i + 1] if i < len(u) - 1 else u[i]
    out[i] = u[i] + alpha * (left - 2.0 * u[i] + right)


@kk.kernel
def total(out, y: kk.Const, n):
    i = kk.index(kk.Global)
    if i == 0:
        s = 0.0
        for k in range(n):
            s += y[k] * y[k]
        out[0] = s


def on(backend, value):
    return kk.to_backend(backend, np.array(value, copy=True))


def central_difference(loss, x, step=STEP):
    x = np.asarray(x, dtype=np.float64)
    gradient_ = np.zeros_like(x)
    for k in range(x.size):
        e = np.zeros_like(x)
        e.flat[k] = step
        gradient_.flat[k] = (loss(x + e) - loss(x - e)) / (2 * step)
    return gradient_


def loss_of(backend, program, *args):
    """The program's result, run plainly on copies of its array arguments."""
    copies = [on(backend, a) if isinstance(a, np.ndarray) else a for a in args]
    return float(kk.to_numpy(program(backend, *copies))[0])


# -- programs ----------------------------------------------------------------------------


def chained(backend, x):
    """Two launches through a temporary, then a reduction."""
    t = kk.zeros(backend, np.float64, N)
    square(backend, GROUP)(t, x, ndrange=N)
    y = kk.zeros(backend, np.float64, N)
    scaled_sin(backend, GROUP)(y, t, 0.5, ndrange=N)
    out = kk.zeros(backend, np.float64, 1)
    total(backend, 1)(out, y, N, ndrange=1)
    return out


def overwriting(backend, x, a):
    """The second launch overwrites x, which the first read: the first's reverse needs
    the x it read."""
    t = kk.zeros(backend, np.float64, N)
    square(backend, GROUP)(t, x, ndrange=N)
    scaled_sin(backend, GROUP)(x, t, a, ndrange=N)
    out = kk.zeros(backend, np.float64, 1)
    total(backend, 1)(out, x, N, ndrange=1)
    return out


def ping_pong(backend, u, alpha, steps=100):
    """A heat loop reusing two buffers."""
    a, b = u, kk.zeros(backend, np.float64, N)
    for _ in range(steps):
        diffuse(backend, GROUP)(b, a, alpha, ndrange=N)
        a, b = b, a
    out = kk.zeros(backend, np.float64, 1)
    total(backend, 1)(out, a, N, ndrange=1)
    return out


@kk.kernel
def square_grid(y, x: kk.Const):
    i, j = kk.index(kk.Global, kk.NTuple)
    y[i, j] = x[i, j] * kk.sin(x[i, j])


@kk.kernel
def total_grid(out, y: kk.Const, rows, columns):
    i = kk.index(kk.Global)
    if i == 0:
        s = 0.0
        for r in range(rows):
            for c in range(columns):
                s += y[r, c] * y[r, c]
        out[0] = s


def on_a_grid(backend, x):
    """A 2-D launch with the backend's work-group shape (none given), then a reduction."""
    t = kk.zeros(backend, np.float64, x.shape)
    square_grid(backend)(t, x, ndrange=x.shape)
    out = kk.zeros(backend, np.float64, 1)
    total_grid(backend, 1)(out, t, *x.shape, ndrange=1)
    return out


def x0():
    return np.linspace(0.1, 1.2, N)


# -- reverse mode ------------------------------------------------------------------------


@pytest.mark.parametrize("program", [chained, ping_pong], ids=["chained", "ping_pong"])
def test_the_gradient_of_a_program_matches_finite_differences(backend, program):
    extra = (0.2,) if program is ping_pong else ()
    grad = gradient(lambda x, *rest: program(backend, x, *rest), argnums=0)
    dx = kk.to_numpy(grad(on(backend, x0()), *extra))
    expected = central_difference(lambda x: loss_of(backend, program, x, *extra), x0())
    np.testing.assert_allclose(dx, expected, rtol=1e-6, atol=1e-8)


def test_a_launch_over_a_grid_without_a_work_group_shape_is_differentiated(backend):
    grid = x0().reshape(N // 8, 8)
    dx = kk.to_numpy(gradient(lambda x: on_a_grid(backend, x))(on(backend, grid)))
    expected = central_difference(lambda x: loss_of(backend, on_a_grid, x), grid)
    np.testing.assert_allclose(dx, expected, rtol=1e-6, atol=1e-8)


def test_an_array_a_later_launch_overwrites_is_kept_for_the_earlier_reverse(backend):
    grad = gradient(lambda x, a: overwriting(backend, x, a), argnums=(0, 1))
    dx, da = grad(on(backend, x0()), 1.5)
    expected = central_difference(lambda x: loss_of(backend, overwriting, x, 1.5), x0())
    np.testing.assert_allclose(kk.to_numpy(dx), expected, rtol=1e-6, atol=1e-8)
    expected_da = (loss_of(backend, overwriting, x0(), 1.5 + STEP) -
                   loss_of(backend, overwriting, x0(), 1.5 - STEP)) / (2 * STEP)
    assert da == pytest.approx(expected_da, rel=1e-6)


def test_without_the_kept_copy_the_overwrite_pattern_would_be_wrong(backend, monkeypatch):
    """The protection is what makes the previous test right."""
    grad = gradient(lambda x, a: overwriting(backend, x, a), argnums=0)
    right = kk.to_numpy(grad(on(backend, x0()), 1.5))
    monkeypatch.setattr(Recording, "keep_what_is_overwritten", lambda *args: None)
    monkeypatch.setattr(Recording, "check_readers", lambda *args: None)   # debug's check
    wrong = kk.to_numpy(grad(on(backend, x0()), 1.5))
    assert not np.allclose(right, wrong, rtol=1e-3)


def test_an_active_scalar_used_by_several_launches(backend):
    """autodiff(Reverse, program, ...) as for a launch: the seed is the shadow of a
    Duplicated argument the program writes; an Active scalar's derivative is returned."""
    def program(x, a, out):
        y = kk.zeros(backend, np.float64, N)
        add_scaled(backend, GROUP)(y, x, a, ndrange=N)
        t = kk.zeros(backend, np.float64, N)
        scaled_sin(backend, GROUP)(t, y, a, ndrange=N)
        add_scaled(backend, GROUP)(y, t, a, ndrange=N)
        total(backend, 1)(out, y, N, ndrange=1)

    def loss(a):
        out = kk.zeros(backend, np.float64, 1)
        program(on(backend, x0()), a, out)
        return float(kk.to_numpy(out)[0])

    results = autodiff(Reverse, program, Const(on(backend, x0())), Active(0.7),
                       Duplicated(kk.zeros(backend, np.float64, 1), on(backend, [1.0])))
    assert results[0] is None and results[2] is None
    assert results[1] == pytest.approx((loss(0.7 + STEP) - loss(0.7 - STEP)) / (2 * STEP),
                                       rel=1e-6)


def test_the_program_s_arrays_end_as_the_program_left_them(backend):
    """The reverse pass puts back what later launches overwrote; at the end the arrays
    hold what the program left in them."""
    x = on(backend, x0())
    gradient(lambda x, a: overwriting(backend, x, a), argnums=0)(x, 1.5)
    np.testing.assert_allclose(kk.to_numpy(x), 1.5 * np.sin(x0() ** 2), rtol=1e-15)


# -- forward mode, and the two together ---------------------------------------------------


def test_forward_and_reverse_of_a_program_satisfy_the_dot_product_identity(backend):
    """<seed, J tangent> from forward mode equals <J^T seed, tangent> from reverse mode."""
    rng = np.random.default_rng(0)
    tangent, seed = rng.standard_normal(N), rng.standard_normal(N)

    def program(u, y):
        t = kk.zeros(backend, np.float64, N)
        diffuse(backend, GROUP)(t, u, 0.2, ndrange=N)
        square(backend, GROUP)(y, t, ndrange=N)

    y_tangent = kk.zeros(backend, np.float64, N)
    autodiff(Forward, program, Duplicated(on(backend, x0()), on(backend, tangent)),
             Duplicated(kk.zeros(backend, np.float64, N), y_tangent))
    u_adjoint = kk.zeros(backend, np.float64, N)
    autodiff(Reverse, program, Duplicated(on(backend, x0()), u_adjoint),
             Duplicated(kk.zeros(backend, np.float64, N), on(backend, seed)))
    forward = float(np.dot(seed, kk.to_numpy(y_tangent)))
    reverse = float(np.dot(kk.to_numpy(u_adjoint), tangent))
    assert forward == pytest.approx(reverse, rel=1e-10)


# -- writes between launches ----------------------------------------------------------------


def test_a_copy_into_an_array_between_launches_is_kept_like_a_launch_s_overwrite(backend):
    def program(x, a):
        t = kk.zeros(backend, np.float64, N)
        square(backend, GROUP)(t, x, ndrange=N)
        kk.copyto(x, t)                          # x = x^2, between launches
        y = kk.zeros(backend, np.float64, N)
        scaled_sin(backend, GROUP)(y, x, a, ndrange=N)
        add_scaled(backend, GROUP)(y, t, 1.0, ndrange=N)
        out = kk.zeros(backend, np.float64, 1)
        total(backend, 1)(out, y, N, ndrange=1)
        return out

    def loss(x):
        return float(np.sum((1.5 * np.sin(x ** 2) + x ** 2) ** 2))

    dx = gradient(program, argnums=0)(on(backend, x0()), 1.5)
    np.testing.assert_allclose(kk.to_numpy(dx), central_difference(loss, x0()), rtol=1e-6,
                               atol=1e-8)


def test_a_numpy_assignment_between_launches_is_an_error_in_debug_mode():
    backend = kk.CPU(debug=True)

    def program(x, a):
        t = kk.zeros(backend, np.float64, N)
        square(backend, GROUP)(t, x, ndrange=N)
        x[:] = 0.0                                   # kernelkit cannot see this write
        y = kk.zeros(backend, np.float64, N)
        scaled_sin(backend, GROUP)(y, t, a, ndrange=N)
        out = kk.zeros(backend, np.float64, 1)
        total(backend, 1)(out, y, N, ndrange=1)
        return out

    with pytest.raises(Exception, match=r"argument 1 of a launch of 'square'.*changed by "
                                        r"code other than a kernel or kk.copyto"):
        gradient(program, argnums=0)(x0(), 1.5)


# -- what the recording keeps -------------------------------------------------------------


def test_an_array_no_reverse_pass_reads_is_not_copied_when_overwritten(backend):
    """The ping-pong heat loop with alpha a constant is linear: its reverse passes read
    only adjoints, so no buffer is copied when the next step overwrites it, and with
    alpha Active each step's reverse reads its input, which is then kept."""
    from enzyme_ext.activities import Mode
    from enzyme_ext.program import record

    def kept(alpha):
        activities = [Duplicated(on(backend, x0()), kk.zeros(backend, np.float64, N)),
                      alpha]
        recording, _ = record(Mode.REVERSE, lambda u, a: ping_pong(backend, u, a, steps=5),
                              activities)
        return sum(len(launch.restores) for launch in recording.launches)

    assert kept(Const(0.2)) == 0
    assert kept(Active(0.2)) >= 4
    grad = gradient(lambda x, a: ping_pong(backend, x, a, steps=5), argnums=0)
    dx = kk.to_numpy(grad(on(backend, x0()), 0.2))
    expected = central_difference(lambda x: loss_of(backend, ping_pong, x, 0.2, 5), x0())
    np.testing.assert_allclose(dx, expected, rtol=1e-6, atol=1e-8)
