"""Derivatives of kernel launches (enzyme_ext) in float64 on every backend, checked
against central finite differences of the primal kernel and against analytic
derivatives: reverse mode (the shadows of Duplicated arrays hold the adjoint of the
arrays' final contents on entry and of their initial contents afterwards; Active
scalars' derivatives are returned) and forward mode (the shadows carry tangents in and
the written arrays' shadows receive the output tangents).

Every test differentiates before it runs the primal kernel or finite differences, so on
a compile-only backend the derivative kernels are compiled (the reverse and augmented
forward kernels, or the forward one) before the first launch ends the test.

The finite differences re-run the primal kernel on fresh copies of every argument for
each evaluation, since kernels overwrite their arrays in place. The loss of reverse mode
is sum(seed * final contents) over the seeded arrays."""
import math
import re

import numpy as np
import pytest

import kernelkit as kk
from enzyme_ext import (Active, Const, Duplicated, Forward, Reverse, ReverseSplit, autodiff,
                        autodiff_thunk)
from enzyme_ext.activities import Activity
from kernelkit.errors import KernelkitError
from kernelkit.ir.math_functions import MATH_FUNCTIONS

WORKGROUP = 64
STEP = 1e-6


# --- helpers ----------------------------------------------------------------------------


def on(backend, value):
    """A copy of `value` on `backend` if it is a NumPy array; a scalar as it is."""
    if isinstance(value, np.ndarray):
        return kk.to_backend(backend, np.array(value, copy=True))
    return value


def is_compile_only(error):
    """Whether `error` is a compile-only backend's refusal to launch (tests/conftest.py
    turns it into a skip)."""
    return type(error).__name__ == "CompileOnlyError"


def reraise_compile_only(error):
    if is_compile_only(error):
        raise error


class Parts:
    """The parts of a test that launch different derivative kernels. `with parts:` runs
    one; a compile-only backend's CompileOnlyError ends only that part, so the next ones
    compile their kernels too, and `parts.finish()` raises it at the end. Any other
    outcome is as without it."""

    def __init__(self):
        self.compile_only = None

    def __enter__(self):
        return self

    def __exit__(self, kind, error, traceback):
        if error is not None and is_compile_only(error):
            self.compile_only = self.compile_only or error
            return True
        return False

    def finish(self):
        if self.compile_only is not None:
            raise self.compile_only


def copy_arguments(backend, args):
    return [on(backend, a) for a in args]


def run_primal(backend, kernel, args, ndrange, workgroupsize=WORKGROUP):
    """The arguments' final contents (NumPy arrays and scalars) after one launch on
    `backend` on copies of `args`."""
    copies = copy_arguments(backend, args)
    kernel(backend, workgroupsize)(*copies, ndrange=ndrange)
    kk.synchronize(backend)
    return [kk.to_numpy(c) if isinstance(a, np.ndarray) else c for a, c in zip(args, copies)]


def loss_of(finals, seeds):
    return sum(float(np.sum(seed * finals[k])) for k, seed in seeds.items())


def finite_difference_gradient(backend, kernel, args, wrt, seeds, ndrange, step=STEP):
    """d loss / d (initial value of each argument in `wrt`), by central differences; one
    pair of primal launches per element."""
    gradients = {}
    for k in wrt:
        value = args[k]
        if isinstance(value, np.ndarray):
            gradient = np.zeros(value.shape, np.float64)
            for j in np.ndindex(value.shape):
                h = step * max(1.0, abs(float(value[j])))
                plus, minus = list(args), list(args)
                plus[k], minus[k] = value.copy(), value.copy()
                plus[k][j] += h
                minus[k][j] -= h
                width = float(plus[k][j]) - float(minus[k][j])
                gradient[j] = (loss_of(run_primal(backend, kernel, plus, ndrange), seeds) -
                               loss_of(run_primal(backend, kernel, minus, ndrange), seeds)) / width
        else:
            h = step * max(1.0, abs(float(value)))
            plus, minus = list(args), list(args)
            plus[k], minus[k] = value + h, value - h
            gradient = (loss_of(run_primal(backend, kernel, plus, ndrange), seeds) -
                        loss_of(run_primal(backend, kernel, minus, ndrange), seeds)) / (2 * h)
        gradients[k] = gradient
    return gradients


def finite_difference_tangents(backend, kernel, args, tangents, ndrange, step=STEP):
    """The directional derivative of every argument's final contents along `tangents`
    (an initial-value direction per argument index), by central differences."""
    plus, minus = list(args), list(args)
    for k, tangent in tangents.items():
        plus[k] = args[k] + step * tangent
        minus[k] = args[k] - step * tangent
    finals_plus = run_primal(backend, kernel, plus, ndrange)
    finals_minus = run_primal(backend, kernel, minus, ndrange)
    return {k: (finals_plus[k] - finals_minus[k]) / (2 * step)
            for k in tangents if isinstance(args[k], np.ndarray)}


def reverse_ad(backend, kernel, args, wrt, seeds, ndrange, workgroupsize=WORKGROUP,
               **options):
    """(gradients by argument index, final contents of the arguments, autodiff's result),
    as NumPy arrays and scalars: the arguments are copied to `backend`; arrays in `wrt`
    are Duplicated with their seed (zeros if none) as shadow, scalars in `wrt` are
    Active, the others are passed as they are (Const)."""
    wrapped, shadows = [], {}
    for k, value in enumerate(args):
        if k in wrt and isinstance(value, np.ndarray):
            if k in seeds:
                shadows[k] = on(backend, np.asarray(seeds[k], dtype=value.dtype))
            else:
                shadows[k] = kk.zeros(backend, value.dtype, value.shape)
            wrapped.append(Duplicated(on(backend, value), shadows[k]))
        elif k in wrt:
            wrapped.append(Active(value))
        else:
            wrapped.append(on(backend, value))
    result = autodiff(Reverse, kernel(backend, workgroupsize), *wrapped, ndrange=ndrange,
                      **options)
    kk.synchronize(backend)
    gradients = {k: kk.to_numpy(shadows[k]) if k in shadows else result[k] for k in wrt}
    return gradients, host_values(args, wrapped), result


def forward_ad(backend, kernel, args, tangents, ndrange, workgroupsize=WORKGROUP):
    """(the shadows after the launch, by argument index; final contents of the
    arguments), as NumPy arrays and scalars; the arguments are copied to `backend`."""
    wrapped, shadows = [], {}
    for k, value in enumerate(args):
        if k in tangents and isinstance(value, np.ndarray):
            shadows[k] = on(backend, np.asarray(tangents[k], dtype=value.dtype))
            wrapped.append(Duplicated(on(backend, value), shadows[k]))
        elif k in tangents:
            wrapped.append(Duplicated(value, tangents[k]))
        else:
            wrapped.append(on(backend, value))
    assert autodiff(Forward, kernel(backend, workgroupsize), *wrapped, ndrange=ndrange) == ()
    kk.synchronize(backend)
    return {k: kk.to_numpy(shadow) for k, shadow in shadows.items()}, \
        host_values(args, wrapped)


def host_values(args, wrapped):
    """The final contents of the (wrapped) arguments, arrays read back into NumPy."""
    values = [w.value if isinstance(w, Activity) else w for w in wrapped]
    return [kk.to_numpy(v) if isinstance(a, np.ndarray) else v for a, v in zip(args, values)]


def random_like(rng, value):
    if isinstance(value, np.ndarray):
        return rng.uniform(-1.0, 1.0, value.shape)
    return float(rng.uniform(-1.0, 1.0))


def check_reverse(backend, kernel, args, wrt, ndrange, seeds=None, rtol=1e-6, atol=1e-7,
                  seed=0):
    """Reverse mode against central differences; returns the AD gradients. Without
    `seeds`, every differentiated array gets a random seed."""
    rng = np.random.default_rng(seed)
    if seeds is None:
        seeds = {k: random_like(rng, args[k]) for k in wrt if isinstance(args[k], np.ndarray)}
    gradients, finals, result = reverse_ad(backend, kernel, args, wrt, seeds, ndrange)
    expected_finals = run_primal(backend, kernel, args, ndrange)
    for k, (got, want) in enumerate(zip(finals, expected_finals)):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=0,
                                   err_msg=f"primal result of argument {k} in reverse mode")
    expected = finite_difference_gradient(backend, kernel, args, wrt, seeds, ndrange)
    for k in wrt:
        if not isinstance(args[k], np.ndarray):
            assert type(gradients[k]) is float, \
                f"the derivative of Active argument {k} is a {type(gradients[k])}"
        np.testing.assert_allclose(gradients[k], expected[k], rtol=rtol, atol=atol,
                                   err_msg=f"reverse-mode gradient of argument {k}")
    return gradients


def check_forward(backend, kernel, args, wrt, ndrange, rtol=1e-6, atol=1e-7, seed=1):
    """Forward mode with random tangents for the arguments in `wrt` against central
    differences; returns the output tangents."""
    rng = np.random.default_rng(seed)
    tangents = {k: random_like(rng, args[k]) for k in wrt}
    shadows, finals = forward_ad(backend, kernel, args, tangents, ndrange)
    expected_finals = run_primal(backend, kernel, args, ndrange)
    for k, (got, want) in enumerate(zip(finals, expected_finals)):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=0,
                                   err_msg=f"primal result of argument {k} in forward mode")
    expected = finite_difference_tangents(backend, kernel, args, tangents, ndrange)
    for k in shadows:
        np.testing.assert_allclose(shadows[k], expected[k], rtol=rtol, atol=atol,
                                   err_msg=f"forward-mode tangent of argument {k}")
    return shadows


def line_of(marker):
    """The line of this file that carries the comment `marker`."""
    with open(__file__) as source:
        for number, text in enumerate(source, 1):
            if text.rstrip().endswith(f"# {marker}"):
                return number
    raise AssertionError(marker)


# --- saxpy ------------------------------------------------------------------------------


@kk.kernel
def saxpy(y, a, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = a * x[i] + y[i]


def saxpy_arguments(n=37):
    rng = np.random.default_rng(10)
    return [rng.uniform(-2, 2, n), 1.75, rng.uniform(-2, 2, n)]


def test_saxpy_reverse_gives_the_gradients_of_y_x_and_the_active_scalar_as_a_float(backend):
    args = saxpy_arguments()
    y, a, x = args
    seed = np.random.default_rng(3).uniform(-1, 1, len(y))
    gradients, finals, result = reverse_ad(backend, saxpy, args, {0, 1, 2}, {0: seed}, len(y))
    assert result[0] is None and result[2] is None
    assert type(result[1]) is float
    np.testing.assert_allclose(result[1], np.sum(seed * x), rtol=1e-13)
    np.testing.assert_allclose(gradients[0], seed, rtol=0, atol=0)
    np.testing.assert_allclose(gradients[2], a * seed, rtol=1e-15)
    np.testing.assert_allclose(finals[0], a * x + y, rtol=1e-15)
    check_reverse(backend, saxpy, args, {0, 1, 2}, len(y))


def test_saxpy_reverse_adds_the_gradient_into_a_nonzero_shadow_of_x(backend):
    y, a, x = saxpy_arguments()
    dy, dx = on(backend, np.ones_like(y)), on(backend, np.full_like(x, 10.0))
    autodiff(Reverse, saxpy(backend, WORKGROUP), Duplicated(on(backend, y), dy), Active(a),
             Duplicated(on(backend, x), dx), ndrange=len(y))
    kk.synchronize(backend)
    np.testing.assert_allclose(kk.to_numpy(dx), 10.0 + a, rtol=1e-15)


def test_saxpy_forward_gives_the_tangent_of_y(backend):
    args = saxpy_arguments()
    y, a, x = args
    ty, tx = on(backend, np.full_like(y, 0.25)), on(backend, np.linspace(-1, 1, len(x)))
    yy = on(backend, y)
    autodiff(Forward, saxpy(backend, WORKGROUP), Duplicated(yy, ty), Duplicated(a, 0.5),
             Duplicated(on(backend, x), tx), ndrange=len(y))
    kk.synchronize(backend)
    np.testing.assert_allclose(kk.to_numpy(ty), a * np.linspace(-1, 1, len(x)) + 0.5 * x + 0.25,
                               rtol=1e-14)
    np.testing.assert_allclose(kk.to_numpy(yy), a * x + y, rtol=1e-15)
    check_forward(backend, saxpy, args, {0, 1, 2}, len(y))


# --- overwriting arrays -----------------------------------------------------------------


@kk.kernel
def square_in_place(y):
    i = kk.index(kk.Global)
    y[i] = y[i] * y[i]


def test_an_element_squared_in_place_gets_twice_its_old_value_times_the_seed(backend):
    y = np.random.default_rng(4).uniform(-2, 2, 50)
    seed = np.random.default_rng(5).uniform(-1, 1, 50)
    gradients, _, _ = reverse_ad(backend, square_in_place, [y], {0}, {0: seed}, len(y))
    np.testing.assert_allclose(gradients[0], 2 * y * seed, rtol=1e-14)
    check_reverse(backend, square_in_place, [y], {0}, len(y))


def test_an_element_squared_in_place_forward_gives_twice_its_old_value_times_the_tangent(backend):
    y = np.random.default_rng(4).uniform(-2, 2, 50)
    tangent = np.random.default_rng(6).uniform(-1, 1, 50)
    shadows, _ = forward_ad(backend, square_in_place, [y], {0: tangent}, len(y))
    np.testing.assert_allclose(shadows[0], 2 * y * tangent, rtol=1e-14)
    check_forward(backend, square_in_place, [y], {0}, len(y))


@kk.kernel
def read_then_mutate(loss, x: kk.Const, b):
    loss[0] = x[1] * b[0]
    b[0] += 100.0


def read_then_mutate_arguments():
    return [np.array([0.5]), np.array([3.0, 1.1, -2.0]), np.array([10.0, 4.0])]


def test_a_value_read_then_mutated_gets_the_gradient_of_its_old_value(backend):
    args = read_then_mutate_arguments()
    gradients, finals, _ = reverse_ad(backend, read_then_mutate, args, {0, 1, 2},
                                      {0: np.array([1.0])}, 1)
    np.testing.assert_allclose(finals[0], [1.1 * 10.0])
    np.testing.assert_allclose(finals[2], [110.0, 4.0])
    # d loss / d b[0] is x[1] = 1.1, whatever was added to b[0] afterwards
    np.testing.assert_allclose(gradients[2], [1.1, 0.0], rtol=1e-15)
    np.testing.assert_allclose(gradients[1], [0.0, 10.0, 0.0], rtol=1e-15)
    np.testing.assert_allclose(gradients[0], [0.0])   # loss is overwritten
    check_reverse(backend, read_then_mutate, args, {0, 1, 2}, 1)


def test_a_value_read_then_mutated_forward_tangent_uses_its_old_value(backend):
    args = read_then_mutate_arguments()
    shadows, _ = forward_ad(backend, read_then_mutate, args,
                            {0: np.array([7.0]), 1: np.array([0.0, 1.0, 0.0]),
                             2: np.array([2.0, 3.0])}, 1)
    np.testing.assert_allclose(shadows[0], [1.0 * 10.0 + 1.1 * 2.0], rtol=1e-15)
    np.testing.assert_allclose(shadows[2], [2.0, 3.0])
    check_forward(backend, read_then_mutate, args, {0, 1, 2}, 1)


@kk.kernel
def read_then_reset(b, a):
    i = kk.index(kk.Global)
    b[i] = a[i] * a[i]
    a[i] = 1.0


def test_a_value_read_then_reset_gets_the_gradient_of_its_old_value(backend):
    rng = np.random.default_rng(7)
    a, b = rng.uniform(-2, 2, 40), rng.uniform(-2, 2, 40)
    seed_b, seed_a = rng.uniform(-1, 1, 40), rng.uniform(-1, 1, 40)
    gradients, finals, _ = reverse_ad(backend, read_then_reset, [b, a], {0, 1},
                                      {0: seed_b, 1: seed_a}, len(a))
    np.testing.assert_array_equal(finals[1], np.ones(40))
    # the seed on a's final contents (the constant 1.0) does not reach a's old value
    np.testing.assert_allclose(gradients[1], 2 * a * seed_b, rtol=1e-14)
    np.testing.assert_array_equal(gradients[0], np.zeros(40))
    check_reverse(backend, read_then_reset, [b, a], {0, 1}, len(a))


def test_a_value_read_then_reset_forward_gives_the_tangent_of_its_old_value_and_zero(backend):
    rng = np.random.default_rng(8)
    a, b = rng.uniform(-2, 2, 40), rng.uniform(-2, 2, 40)
    ta, tb = rng.uniform(-1, 1, 40), rng.uniform(-1, 1, 40)
    shadows, _ = forward_ad(backend, read_then_reset, [b, a], {0: tb, 1: ta}, len(a))
    np.testing.assert_allclose(shadows[0], 2 * a * ta, rtol=1e-14)
    np.testing.assert_array_equal(shadows[1], np.zeros(40))
    check_forward(backend, read_then_reset, [b, a], {0, 1}, len(a))


@kk.kernel
def accumulate_then_scale(loss, x: kk.Const):
    loss[0] += x[1] ** 2
    loss[0] *= x[2]


def test_accumulate_then_scale_gives_the_product_rule_through_the_overwritten_value(backend):
    loss, x = np.array([0.75]), np.array([5.0, 1.5, -2.5])
    gradients, finals, _ = reverse_ad(backend, accumulate_then_scale, [loss, x], {0, 1},
                                      {0: np.array([1.0])}, 1)
    np.testing.assert_allclose(finals[0], [(0.75 + 1.5 ** 2) * -2.5])
    np.testing.assert_allclose(gradients[0], [-2.5], rtol=1e-15)
    np.testing.assert_allclose(gradients[1], [0.0, 2 * 1.5 * -2.5, 0.75 + 1.5 ** 2],
                               rtol=1e-15)
    check_reverse(backend, accumulate_then_scale, [loss, x], {0, 1}, 1)


def test_accumulate_then_scale_forward(backend):
    loss, x = np.array([0.75]), np.array([5.0, 1.5, -2.5])
    shadows, _ = forward_ad(backend, accumulate_then_scale, [loss, x],
                            {0: np.array([0.5]), 1: np.array([1.0, 2.0, 3.0])}, 1)
    expected = (0.5 + 2 * 1.5 * 2.0) * -2.5 + (0.75 + 1.5 ** 2) * 3.0
    np.testing.assert_allclose(shadows[0], [expected], rtol=1e-15)
    check_forward(backend, accumulate_then_scale, [loss, x], {0, 1}, 1)


# --- loops ------------------------------------------------------------------------------


@kk.kernel
def power_loop(y, x: kk.Const, n):
    i = kk.index(kk.Global)
    p = 1.0
    for j in range(n):
        p *= x[i]
    y[i] = p


@pytest.mark.parametrize("n", [3, 512])
def test_a_product_carried_through_a_loop_of_a_runtime_trip_count_gives_n_x_to_the_n_minus_1(
        backend, n):
    x = np.random.default_rng(11).uniform(0.995, 1.005, 70)
    y = np.zeros_like(x)
    seed = np.random.default_rng(12).uniform(-1, 1, 70)
    gradients, finals, _ = reverse_ad(backend, power_loop, [y, x, n], {0, 1}, {0: seed}, len(x))
    np.testing.assert_allclose(finals[0], x ** n, rtol=1e-12)
    np.testing.assert_allclose(gradients[1], seed * n * x ** (n - 1), rtol=1e-12)
    np.testing.assert_array_equal(gradients[0], np.zeros_like(x))
    if n == 3:
        check_reverse(backend, power_loop, [y, x, n], {0, 1}, len(x))


@pytest.mark.parametrize("n", [3, 512])
def test_a_product_carried_through_a_loop_of_a_runtime_trip_count_forward(backend, n):
    x = np.random.default_rng(11).uniform(0.995, 1.005, 70)
    y = np.zeros_like(x)
    tangent = np.random.default_rng(13).uniform(-1, 1, 70)
    shadows, finals = forward_ad(backend, power_loop, [y, x, n], {0: np.zeros_like(x), 1: tangent},
                                 len(x))
    np.testing.assert_allclose(finals[0], x ** n, rtol=1e-12)
    np.testing.assert_allclose(shadows[0], tangent * n * x ** (n - 1), rtol=1e-12)


@kk.kernel
def defined_before_used_after(y, x: kk.Const, w: kk.Const, n):
    i = kk.index(kk.Global)
    a = x[i] * x[i] + 1.0
    s = 0.0
    for j in range(n):
        s = s * 0.5 + w[j] * a
    y[i] = s * a + kk.sin(a)


def test_a_value_defined_before_a_loop_and_used_inside_and_after_it(backend):
    rng = np.random.default_rng(14)
    x, w = rng.uniform(-1, 1, 20), rng.uniform(-1, 1, 6)
    args = [np.zeros(20), x, w, 6]
    parts = Parts()
    with parts:
        check_reverse(backend, defined_before_used_after, args, {0, 1, 2}, len(x))
    with parts:
        check_forward(backend, defined_before_used_after, args, {0, 1, 2}, len(x))
    parts.finish()


@kk.kernel
def nested_loops(y, x: kk.Const, w: kk.Const, c, n):
    i = kk.index(kk.Global)
    s = 0.0
    for j in range(n):
        t = x[i]
        for k in range(j + 1):
            t = t * x[i] + w[k] * c
        s += t * t
    y[i] = s


def test_nested_loops_with_an_inner_trip_count_set_by_the_outer_loop(backend):
    rng = np.random.default_rng(15)
    x, w = rng.uniform(-1, 1, 12), rng.uniform(-1, 1, 5)
    args = [np.zeros(12), x, w, 0.6, 5]
    parts = Parts()
    with parts:
        check_reverse(backend, nested_loops, args, {0, 1, 2, 3}, len(x))
    with parts:
        check_forward(backend, nested_loops, args, {0, 1, 2, 3}, len(x))
    parts.finish()


@kk.kernel
def grow_until(y, x: kk.Const, limit):
    i = kk.index(kk.Global)
    v = x[i]
    while v < limit:
        v = v * 1.5 + x[i]
    y[i] = v


def grow_until_arguments():
    x = np.random.default_rng(16).uniform(0.1, 3.0, 25)
    return [np.zeros(25), x, 50.0]


def test_a_while_loop_with_a_data_dependent_trip_count(backend):
    args = grow_until_arguments()
    x = args[1]
    trips = []
    for value in x:
        v, count = value, 0
        while v < 50.0:
            v, count = v * 1.5 + value, count + 1
        trips.append(count)
    assert len(set(trips)) > 1   # the work-items run different numbers of iterations
    parts = Parts()
    with parts:
        check_reverse(backend, grow_until, args, {0, 1}, len(x))
    with parts:
        check_forward(backend, grow_until, args, {0, 1}, len(x))
    parts.finish()


@kk.kernel
def decay_until_above(y, x: kk.Const, n):
    i = kk.index(kk.Global)
    s = 0.0
    for j in range(n):
        s = s * 0.9 + x[i] * x[(i + j) % n]
        if s > 2.0:
            break
    y[i] = s * x[i]


def test_a_loop_left_by_break_at_a_data_dependent_iteration(backend):
    x = np.random.default_rng(17).uniform(0.2, 1.2, 30)
    args = [np.zeros(30), x, 30]
    left = []
    for i in range(30):
        s = 0.0
        for j in range(30):
            s = s * 0.9 + x[i] * x[(i + j) % 30]
            if s > 2.0:
                break
        left.append(j)
    assert len(set(left)) > 5 and 29 in left   # many exits, and some run to the end
    parts = Parts()
    with parts:
        check_reverse(backend, decay_until_above, args, {0, 1}, len(x))
    with parts:
        check_forward(backend, decay_until_above, args, {0, 1}, len(x))
    parts.finish()


@kk.kernel
def row_maximum(best, x: kk.Const, columns):
    i = kk.index(kk.Global)
    m = x[i, 0]
    for j in range(1, columns):
        v = x[i, j]
        if v <= m:
            continue
        m = v
    best[i] = m * m


def test_continue_skipping_smaller_values_sends_the_gradient_to_the_argmax_only(backend):
    rng = np.random.default_rng(18)
    x = rng.permutation(16 * 9).reshape(16, 9) * 0.01 - 0.3
    best = np.zeros(16)
    seed = rng.uniform(-1, 1, 16)
    parts = Parts()
    with parts:
        gradients, finals, _ = reverse_ad(backend, row_maximum, [best, x, 9], {0, 1}, {0: seed}, 16)
        np.testing.assert_allclose(finals[0], x.max(axis=1) ** 2, rtol=1e-15)
        expected = np.zeros_like(x)
        expected[np.arange(16), x.argmax(axis=1)] = 2 * x.max(axis=1) * seed
        np.testing.assert_allclose(gradients[1], expected, rtol=1e-14, atol=0)
        check_reverse(backend, row_maximum, [best, x, 9], {0, 1}, 16)
    with parts:
        check_forward(backend, row_maximum, [best, x, 9], {0, 1}, 16)
    parts.finish()


@kk.kernel
def early_return(y, x: kk.Const, n):
    i = kk.index(kk.Global)
    v = x[i]
    if v < 0.0:
        y[i] = v * v * y[i]
        return
    for j in range(n):
        v = v * (x[i] + 1.0)
        if v > 3.0:
            y[i] = v + y[i]
            return
    y[i] = kk.sin(v) * y[i]


def test_early_return_inside_branches_and_a_loop(backend):
    rng = np.random.default_rng(19)
    x = np.concatenate([rng.uniform(-1, -0.1, 10), rng.uniform(0.05, 0.3, 10),
                        rng.uniform(0.6, 1.0, 10)])
    y = rng.uniform(0.5, 1.5, 30)
    args = [y, x, 4]
    parts = Parts()
    with parts:
        check_reverse(backend, early_return, args, {0, 1}, len(x))
    with parts:
        check_forward(backend, early_return, args, {0, 1}, len(x))
    parts.finish()


@kk.kernel
def times_transpose(y, x: kk.Const, z: kk.Const):
    i, j = kk.index(kk.Global, kk.Cartesian)
    y[i, j] = x[i, j] * x[j, i] + z[j, i] * y[i, j]


def test_a_two_dimensional_launch_reading_other_work_items_elements(backend):
    rng = np.random.default_rng(38)
    x, y, z = (rng.uniform(-1, 1, (12, 12)) for _ in range(3))
    seed = rng.uniform(-1, 1, (12, 12))
    tx, ty, tz = (rng.uniform(-1, 1, (12, 12)) for _ in range(3))
    parts = Parts()
    with parts:
        gradients, finals, _ = reverse_ad(backend, times_transpose, [y, x, z], {0, 1, 2},
                                          {0: seed}, (12, 12), workgroupsize=(4, 4))
        np.testing.assert_allclose(finals[0], x * x.T + z.T * y, rtol=1e-15)
        np.testing.assert_allclose(gradients[1], seed * x.T + (seed * x).T, rtol=1e-14)
        np.testing.assert_allclose(gradients[2], (seed * y).T, rtol=1e-15)
        np.testing.assert_allclose(gradients[0], seed * z.T, rtol=1e-15)
    with parts:
        shadows, _ = forward_ad(backend, times_transpose, [y, x, z], {0: ty, 1: tx, 2: tz},
                                (12, 12), workgroupsize=(4, 4))
        np.testing.assert_allclose(shadows[0], tx * x.T + x * tx.T + tz.T * y + z.T * ty,
                                   rtol=1e-13)
    parts.finish()


# --- branches, device functions, integers -----------------------------------------------


@kk.kernel
def branch_on_data(y, x: kk.Const):
    i = kk.index(kk.Global)
    if x[i] > 0.0:
        y[i] = x[i] * x[i] * y[i]
    else:
        y[i] = kk.exp(x[i]) + y[i] * x[i]


def test_a_data_dependent_branch_takes_the_derivative_of_the_side_taken(backend):
    rng = np.random.default_rng(20)
    x = rng.choice([-1, 1], 40) * rng.uniform(0.1, 2.0, 40)
    y = rng.uniform(-1, 1, 40)
    seed = rng.uniform(-1, 1, 40)
    parts = Parts()
    with parts:
        gradients, _, _ = reverse_ad(backend, branch_on_data, [y, x], {0, 1}, {0: seed}, 40)
        positive = x > 0
        np.testing.assert_allclose(gradients[1],
                                   np.where(positive, 2 * x * y, np.exp(x) + y) * seed,
                                   rtol=1e-13)
        np.testing.assert_allclose(gradients[0], np.where(positive, x * x, x) * seed, rtol=1e-13)
        check_reverse(backend, branch_on_data, [y, x], {0, 1}, 40)
    with parts:
        check_forward(backend, branch_on_data, [y, x], {0, 1}, 40)
    parts.finish()


def cubic(v, c):
    return v * v * v * c + v


def smooth_step(v):
    if v > 1.0:
        return 1.0
    return v * v * (3.0 - 2.0 * v)


@kk.kernel
def calls_device_functions(y, c, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = cubic(x[i], c) + smooth_step(x[i]) * y[i]


def test_device_function_calls_are_differentiated_through(backend):
    rng = np.random.default_rng(21)
    x = rng.uniform(0.05, 1.5, 30)
    y = rng.uniform(-1, 1, 30)
    parts = Parts()
    with parts:
        check_reverse(backend, calls_device_functions, [y, 0.7, x], {0, 1, 2}, 30)
    with parts:
        check_forward(backend, calls_device_functions, [y, 0.7, x], {0, 1, 2}, 30)
    parts.finish()


@kk.kernel
def scaled_by_index(y, x: kk.Const, idx: kk.Const):
    i = kk.index(kk.Global)
    k = idx[i]
    y[i] = x[k] * k + x[i] * (k * k)


def test_integer_values_used_as_indices_and_factors_are_inactive(backend):
    rng = np.random.default_rng(22)
    idx = rng.integers(0, 20, 20).astype(np.int64)
    x = rng.uniform(-1, 1, 20)
    seed = rng.uniform(-1, 1, 20)
    args = [np.zeros(20), x, idx]
    parts = Parts()
    with parts:
        gradients, finals, _ = reverse_ad(backend, scaled_by_index, args, {0, 1}, {0: seed}, 20)
        expected = seed * idx * idx
        np.add.at(expected, idx, seed * idx)
        np.testing.assert_allclose(gradients[1], expected, rtol=1e-13)
        np.testing.assert_array_equal(finals[2], idx)
        check_reverse(backend, scaled_by_index, args, {0, 1}, 20)
    with parts:
        check_forward(backend, scaled_by_index, args, {0, 1}, 20)
    parts.finish()


@kk.kernel
def gather(y, x: kk.Const, idx: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[idx[i]]


def test_a_gather_with_repeated_indices_accumulates_every_contribution(backend):
    rng = np.random.default_rng(23)
    n = 4096
    idx = rng.integers(0, 5, n).astype(np.int32)
    x = rng.uniform(-1, 1, 8)
    seed = rng.integers(-8, 8, n) * 0.25   # exact sums, whatever their order
    gradients, finals, _ = reverse_ad(backend, gather, [np.zeros(n), x, idx], {0, 1}, {0: seed}, n)
    expected = np.zeros_like(x)
    np.add.at(expected, idx, seed)
    np.testing.assert_array_equal(finals[0], x[idx])
    np.testing.assert_array_equal(gradients[1], expected)


def test_a_gather_with_repeated_indices_forward_gathers_the_tangents(backend):
    rng = np.random.default_rng(24)
    n = 4096
    idx = rng.integers(0, 5, n).astype(np.int32)
    x = rng.uniform(-1, 1, 8)
    tx = rng.uniform(-1, 1, 8)
    shadows, _ = forward_ad(backend, gather, [np.zeros(n), x, idx], {0: np.zeros(n), 1: tx}, n)
    np.testing.assert_array_equal(shadows[0], tx[idx])
    np.testing.assert_array_equal(shadows[1], tx)


# --- math functions ---------------------------------------------------------------------


PIECEWISE_CONSTANT = ("floor", "ceil", "trunc", "rint")
SMOOTH_UNARY = [name for name, f in MATH_FUNCTIONS.items()
                if f.arity == 1 and not f.predicate and name not in PIECEWISE_CONSTANT]
BINARY = [name for name, f in MATH_FUNCTIONS.items() if f.arity == 2 and not f.predicate]


def sample(rng, *intervals, n=24):
    """n points spread over the intervals."""
    per = -(-n // len(intervals))
    return np.concatenate([rng.uniform(low, high, per) for low, high in intervals])[:n]


def unary_points(name, rng):
    domains = {
        "sqrt": [(0.1, 4.0)], "log": [(0.1, 4.0)], "log2": [(0.1, 4.0)],
        "log10": [(0.1, 4.0)], "log1p": [(-0.7, 3.0)], "asin": [(-0.9, 0.9)],
        "acos": [(-0.9, 0.9)], "acosh": [(1.1, 4.0)], "atanh": [(-0.9, 0.9)],
        "tan": [(-1.2, 1.2)], "fabs": [(-3.0, -0.1), (0.1, 3.0)],
        "cbrt": [(-3.0, -0.1), (0.1, 3.0)],
        "gamma": [(0.2, 4.0), (-0.8, -0.2), (-2.8, -2.2)],
        "lgamma": [(0.2, 4.0), (-0.8, -0.2), (-2.8, -2.2)],
    }
    return sample(rng, *domains.get(name, [(-2.0, 2.0)]))


def binary_points(name, rng):
    n = 24
    if name == "pow":
        return sample(rng, (0.2, 3.0)), sample(rng, (-2.0, 2.0))
    if name == "fmod":
        x, z = sample(rng, (-5.0, -0.5), (0.5, 5.0)), sample(rng, (-1.3, -0.7), (0.7, 1.3))
        quotient = np.abs(x / z)
        far = np.abs(quotient - np.round(quotient)) > 0.05   # away from the jumps
        return x[far], z[far]
    if name in ("fmin", "fmax"):
        x = sample(rng, (-2.0, 2.0))
        return x, x + rng.choice([-1, 1], n) * rng.uniform(0.1, 1.0, n)
    # atan2, hypot, copysign: away from zero
    signs = rng.choice([-1, 1], (2, n))
    return signs[0] * sample(rng, (0.1, 2.0)), signs[1] * sample(rng, (0.1, 2.0))


def unary_kernel(name):
    function = getattr(kk, name)

    @kk.kernel
    def apply(y, x: kk.Const):
        i = kk.index(kk.Global)
        y[i] = function(x[i])
    return apply


def binary_kernel(name):
    function = getattr(kk, name)

    @kk.kernel
    def apply(y, x: kk.Const, z: kk.Const):
        i = kk.index(kk.Global)
        y[i] = function(x[i], z[i])
    return apply


UNARY_KERNELS = {name: unary_kernel(name) for name in SMOOTH_UNARY + list(PIECEWISE_CONSTANT)}
BINARY_KERNELS = {name: binary_kernel(name) for name in BINARY}


def elementwise_differences(backend, kernel, args, k, step=1e-6):
    """d y[i] / d args[k][i] of an elementwise kernel (y is argument 0), every element
    perturbed at once."""
    value = args[k]
    h = step * np.maximum(1.0, np.abs(value))
    plus, minus = list(args), list(args)
    plus[k], minus[k] = value + h, value - h
    width = plus[k] - minus[k]
    return (run_primal(backend, kernel, plus, len(value))[0] -
            run_primal(backend, kernel, minus, len(value))[0]) / width


@pytest.mark.parametrize("mode", ["reverse", "forward"])
@pytest.mark.parametrize("name", SMOOTH_UNARY)
def test_math_function_derivative_matches_central_differences(backend, name, mode):
    rng = np.random.default_rng(sum(map(ord, name)))
    x = unary_points(name, rng)
    kernel = UNARY_KERNELS[name]
    args = [np.zeros_like(x), x]
    direction = rng.uniform(-1, 1, len(x))
    if mode == "reverse":
        gradients, finals, _ = reverse_ad(backend, kernel, args, {0, 1}, {0: direction},
                                          len(x))
        got = gradients[1]
    else:
        shadows, finals = forward_ad(backend, kernel, args,
                                     {0: np.zeros_like(x), 1: direction}, len(x))
        got = shadows[0]
    expected = elementwise_differences(backend, kernel, args, 1)
    np.testing.assert_allclose(finals[0], run_primal(backend, kernel, args, len(x))[0],
                               rtol=1e-15)
    np.testing.assert_allclose(got, expected * direction, rtol=1e-6, atol=1e-8,
                               err_msg=f"d {name}(x) / dx at x = {x}")


@pytest.mark.parametrize("mode", ["reverse", "forward"])
@pytest.mark.parametrize("name", BINARY)
def test_two_argument_math_function_derivatives_match_central_differences(backend, name, mode):
    rng = np.random.default_rng(sum(map(ord, name)))
    x, z = binary_points(name, rng)
    kernel = BINARY_KERNELS[name]
    args = [np.zeros_like(x), x, z]
    direction_x, direction_z = rng.uniform(-1, 1, len(x)), rng.uniform(-1, 1, len(x))
    if mode == "reverse":
        seed = rng.uniform(-1, 1, len(x))
        gradients, _, _ = reverse_ad(backend, kernel, args, {0, 1, 2}, {0: seed}, len(x))
        by_x = elementwise_differences(backend, kernel, args, 1)
        by_z = elementwise_differences(backend, kernel, args, 2)
        np.testing.assert_allclose(gradients[1], by_x * seed, rtol=1e-6, atol=1e-8,
                                   err_msg=f"d {name}(x, z) / dx at x = {x}, z = {z}")
        np.testing.assert_allclose(gradients[2], by_z * seed, rtol=1e-6, atol=1e-8,
                                   err_msg=f"d {name}(x, z) / dz at x = {x}, z = {z}")
    else:
        shadows, _ = forward_ad(backend, kernel, args, {0: np.zeros_like(x), 1: direction_x,
                                                        2: direction_z}, len(x))
        by_x = elementwise_differences(backend, kernel, args, 1)
        by_z = elementwise_differences(backend, kernel, args, 2)
        np.testing.assert_allclose(shadows[0], by_x * direction_x + by_z * direction_z,
                                   rtol=1e-6, atol=1e-8,
                                   err_msg=f"tangent of {name}(x, z) at x = {x}, z = {z}")


@pytest.mark.parametrize("mode", ["reverse", "forward"])
@pytest.mark.parametrize("name", PIECEWISE_CONSTANT)
def test_piecewise_constant_math_functions_have_a_zero_derivative(backend, name, mode):
    x = np.random.default_rng(25).uniform(-3, 3, 24)
    x = x[np.abs(x - np.round(x)) > 0.05]
    x = x[np.abs(x - np.round(x) + 0.5) > 0.05] if name == "rint" else x
    kernel = UNARY_KERNELS[name]
    args = [np.zeros_like(x), x]
    if mode == "reverse":
        gradients, finals, _ = reverse_ad(backend, kernel, args, {0, 1}, {0: np.ones_like(x)},
                                          len(x))
        np.testing.assert_array_equal(gradients[1], np.zeros_like(x))
    else:
        shadows, finals = forward_ad(backend, kernel, args,
                                     {0: np.ones_like(x), 1: np.ones_like(x)}, len(x))
        np.testing.assert_array_equal(shadows[0], np.zeros_like(x))
    np.testing.assert_array_equal(finals[0], MATH_FUNCTIONS[name].host(x))


def test_every_float_math_function_is_covered():
    predicates = {name for name, f in MATH_FUNCTIONS.items() if f.predicate}
    assert predicates == {"isnan", "isinf", "isfinite"}
    assert set(SMOOTH_UNARY) | set(BINARY) | set(PIECEWISE_CONSTANT) | predicates == \
        set(MATH_FUNCTIONS)


# --- atomics ----------------------------------------------------------------------------


@kk.kernel
def sum_of_squares(loss, x: kk.Const):
    i = kk.index(kk.Global)
    kk.atomic_add(loss, 0, x[i] * x[i])


def test_atomic_add_of_many_work_items_into_one_scalar_loss(backend):
    rng = np.random.default_rng(26)
    x = rng.uniform(-1, 1, 5000)
    loss = np.array([0.5])
    tangent = rng.uniform(-1, 1, len(x))
    parts = Parts()
    with parts:
        gradients, finals, _ = reverse_ad(backend, sum_of_squares, [loss, x], {0, 1},
                                          {0: np.array([1.5])}, len(x))
        np.testing.assert_allclose(finals[0], [0.5 + np.sum(x * x)], rtol=1e-12)
        np.testing.assert_allclose(gradients[1], 1.5 * 2 * x, rtol=1e-15)
        np.testing.assert_allclose(gradients[0], [1.5])   # loss's old value is added to
    with parts:
        shadows, _ = forward_ad(backend, sum_of_squares, [loss, x],
                                {0: np.array([0.25]), 1: tangent}, len(x))
        np.testing.assert_allclose(shadows[0], [0.25 + np.sum(2 * x * tangent)], rtol=1e-12)
    parts.finish()


@kk.kernel
def compact(out, counter, x: kk.Const):
    i = kk.index(kk.Global)
    slot = kk.atomic_add(counter, 0, 1)
    out[slot] = x[i] * 2.0


def test_an_atomic_counter_used_as_an_index_is_counted_once_and_routes_the_gradient(backend):
    rng = np.random.default_rng(27)
    n = 3000
    x = rng.permutation(n) * 0.001 + 0.5
    seed = rng.uniform(-1, 1, n)
    counter = np.zeros(1, np.int64)
    gradients, finals, _ = reverse_ad(backend, compact, [np.zeros(n), counter, x], {0, 2},
                                      {0: seed}, n)
    assert finals[1][0] == n, f"the counter ended at {finals[1][0]}, not {n}"
    out = finals[0]
    np.testing.assert_array_equal(np.sort(out), np.sort(2 * x))
    slot_of = {value: s for s, value in enumerate(out)}
    expected = np.array([2.0 * seed[slot_of[2 * value]] for value in x])
    np.testing.assert_allclose(gradients[2], expected, rtol=1e-15)
    np.testing.assert_array_equal(gradients[0], np.zeros(n))


def test_an_atomic_counter_used_as_an_index_forward_routes_the_tangent(backend):
    rng = np.random.default_rng(28)
    n = 3000
    x = rng.permutation(n) * 0.001 + 0.5
    tangent = rng.uniform(-1, 1, n)
    counter = np.zeros(1, np.int64)
    shadows, finals = forward_ad(backend, compact, [np.zeros(n), counter, x],
                                 {0: np.zeros(n), 2: tangent}, n)
    assert finals[1][0] == n, f"the counter ended at {finals[1][0]}, not {n}"
    slot_of = {value: s for s, value in enumerate(finals[0])}
    slots = np.array([slot_of[2 * value] for value in x])
    np.testing.assert_allclose(shadows[0][slots], 2 * tangent, rtol=1e-15)


@kk.kernel
def running_maximum(best, x: kk.Const):
    i = kk.index(kk.Global)
    kk.atomic_max(best, 0, x[i] * 2.0)


@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_active_float_atomic_max_raises_a_kernelkit_error_naming_the_operation(backend, mode):
    x = np.linspace(-1, 1, 64)
    best = np.array([-10.0])
    with pytest.raises(KernelkitError) as error:
        if mode == "reverse":
            reverse_ad(backend, running_maximum, [best, x], {0, 1}, {0: np.ones(1)}, 64)
        else:
            forward_ad(backend, running_maximum, [best, x], {0: np.zeros(1), 1: np.ones(64)},
                       64)
    reraise_compile_only(error.value)
    assert re.search(r"atomic[._]max", str(error.value)), str(error.value)


# --- Active scalars: deterministic --------------------------------------------------------


@kk.kernel
def scaled_squares(y, a, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = a * x[i] * x[i] + kk.sin(a * x[i])


def test_the_derivative_of_an_active_scalar_is_the_same_bits_every_run_and_thread_count():
    """CPU only: it compares CPU backends of different thread counts."""
    rng = np.random.default_rng(29)
    n = 200_003
    x = rng.uniform(-1, 1, n)
    seed = rng.uniform(-1, 1, n)
    results = []
    for threads in (1, 3, 8, 1, 8):
        backend = kk.CPU(threads=threads)
        _, _, result = reverse_ad(backend, scaled_squares, [np.zeros(n), 0.8, x], {0, 1},
                                  {0: seed}, n)
        results.append(result[1])
    assert len({r.hex() for r in results}) == 1, [r.hex() for r in results]
    expected = math.fsum(seed * (x * x + x * np.cos(0.8 * x)))
    np.testing.assert_allclose(results[0], expected, rtol=1e-10)


# --- ReverseSplit -----------------------------------------------------------------------


@kk.kernel
def scaled_exp(y, a, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = a * kk.exp(x[i] * y[i])


def test_reverse_split_gives_the_same_as_reverse(backend):
    rng = np.random.default_rng(30)
    y, x = rng.uniform(-1, 1, 100), rng.uniform(-1, 1, 100)
    seed = rng.uniform(-1, 1, 100)
    launch = scaled_exp(backend, 64)
    forward, reverse = autodiff_thunk(ReverseSplit, launch, Duplicated, Active, Const)
    y_split, dy_split = on(backend, y), on(backend, seed)
    tape = forward(Duplicated(y_split, dy_split), Active(1.3), on(backend, x), ndrange=100)
    kk.synchronize(backend)
    np.testing.assert_allclose(kk.to_numpy(y_split), 1.3 * np.exp(x * y), rtol=1e-14)
    split = reverse(Duplicated(y_split, dy_split), Active(1.3), on(backend, x), tape=tape,
                    ndrange=100)
    kk.synchronize(backend)

    y_whole, dy_whole = on(backend, y), on(backend, seed)
    whole = autodiff(Reverse, launch, Duplicated(y_whole, dy_whole), Active(1.3),
                     on(backend, x), ndrange=100)
    kk.synchronize(backend)
    y_split, dy_split, y_whole, dy_whole = map(kk.to_numpy, (y_split, dy_split, y_whole,
                                                             dy_whole))
    assert split[0] is None and split[2] is None and type(split[1]) is float
    assert split[1] == whole[1]
    np.testing.assert_array_equal(dy_split, dy_whole)
    np.testing.assert_array_equal(y_split, y_whole)
    np.testing.assert_allclose(dy_whole, seed * 1.3 * np.exp(x * y) * x, rtol=1e-13)
    np.testing.assert_allclose(whole[1], np.sum(seed * np.exp(x * y)), rtol=1e-12)


# --- what cannot be differentiated ------------------------------------------------------


@kk.kernel
def uses_an_atomic_result(acc, y, x: kk.Const):
    i = kk.index(kk.Global)
    old = kk.atomic_add(acc, 0, x[i])
    y[i] = old * x[i]


@kk.kernel
def exchanges(acc, x: kk.Const):
    i = kk.index(kk.Global)
    kk.atomic_exchange(acc, 0, x[i] * 3.0)


@kk.kernel
def stores_into_a_constant_array(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i] * x[i]


def _atomic_result_used(mode, backend):
    x = np.linspace(0, 1, 32)
    reverse_ad(backend, uses_an_atomic_result, [np.zeros(1), np.zeros(32), x], {0, 1, 2},
               {1: np.ones(32)}, 32)


def _exchange(mode, backend):
    x = np.linspace(0, 1, 32)
    if mode == "reverse":
        reverse_ad(backend, exchanges, [np.zeros(1), x], {0, 1}, {0: np.ones(1)}, 32)
    else:
        forward_ad(backend, exchanges, [np.zeros(1), x], {0: np.zeros(1), 1: np.ones(32)}, 32)


def _active_into_constant(mode, backend):
    x = np.linspace(0, 1, 32)
    reverse_ad(backend, stores_into_a_constant_array, [np.zeros(32), x], {1}, {}, 32)


def _active_array(mode, backend):
    autodiff(Reverse, saxpy(backend, WORKGROUP), Active(kk.zeros(backend, np.float64, 8)),
             Active(1.0), kk.ones(backend, np.float64, 8), ndrange=8)


def _active_in_forward_mode(mode, backend):
    autodiff(Forward, saxpy(backend, WORKGROUP),
             Duplicated(kk.zeros(backend, np.float64, 8), kk.zeros(backend, np.float64, 8)),
             Active(1.0), kk.ones(backend, np.float64, 8), ndrange=8)


def _duplicated_scalar_in_reverse_mode(mode, backend):
    autodiff(Reverse, saxpy(backend, WORKGROUP),
             Duplicated(kk.zeros(backend, np.float64, 8), kk.zeros(backend, np.float64, 8)),
             Duplicated(1.0, 1.0), kk.ones(backend, np.float64, 8), ndrange=8)


def _shadow_of_the_wrong_shape(mode, backend):
    autodiff(Reverse, saxpy(backend, WORKGROUP),
             Duplicated(kk.zeros(backend, np.float64, 8), kk.zeros(backend, np.float64, 7)),
             Active(1.0), kk.ones(backend, np.float64, 8), ndrange=8)


def _not_a_launch(mode, backend):
    autodiff(Reverse, saxpy,
             Duplicated(kk.zeros(backend, np.float64, 8), kk.zeros(backend, np.float64, 8)),
             Active(1.0), kk.ones(backend, np.float64, 8), ndrange=8)


UNSUPPORTED = [
    ("the result of an atomic_add on a differentiated array used", _atomic_result_used,
     "reverse"),
    ("atomic_exchange on a differentiated array", _exchange, "reverse"),
    ("atomic_exchange on a differentiated array", _exchange, "forward"),
    ("a differentiated value stored into a Const array", _active_into_constant, "reverse"),
    ("an array passed as Active", _active_array, "reverse"),
    ("Active in forward mode", _active_in_forward_mode, "forward"),
    ("a Duplicated scalar in reverse mode", _duplicated_scalar_in_reverse_mode, "reverse"),
    ("a shadow of the wrong shape", _shadow_of_the_wrong_shape, "reverse"),
    ("a kernel that is not a launch", _not_a_launch, "reverse"),
]


@pytest.mark.parametrize("case, attempt, mode", UNSUPPORTED,
                         ids=[f"{case}-{mode}" for case, _, mode in UNSUPPORTED])
def test_what_cannot_be_differentiated_raises_a_kernelkit_error_not_an_internal_one(
        backend, case, attempt, mode):
    with pytest.raises(KernelkitError) as error:
        attempt(mode, backend)
    reraise_compile_only(error.value)
    assert "internal compiler error" not in str(error.value), str(error.value)


def test_a_differentiated_value_stored_into_a_const_array_is_named_in_the_error(backend):
    with pytest.raises(KernelkitError) as error:
        _active_into_constant("reverse", backend)
    reraise_compile_only(error.value)
    assert re.search("'y'", str(error.value)), str(error.value)


def test_an_atomic_result_used_in_forward_mode_is_an_error_or_follows_the_atomics_order(backend):
    """Forward mode may define the tangent of an atomic_add's result (the shadow's old
    value); it must then be the sum of the tangents added before, in the order the
    primal's atomics ran, even when many threads race (on the CPU, 8 threads of its
    own)."""
    rng = np.random.default_rng(37)
    n = 20000
    x = rng.permutation(n) * 0.25 + 1.0   # exact partial sums: they give the order
    tangent = rng.integers(-4, 5, n) * 0.5
    if backend.name == "cpu":
        backend = kk.CPU(threads=8)
    try:
        shadows, finals = forward_ad(backend, uses_an_atomic_result,
                                     [np.zeros(1), np.zeros(n), x],
                                     {0: np.zeros(1), 1: np.zeros(n), 2: tangent}, n)
    except KernelkitError as error:
        reraise_compile_only(error)
        assert "internal compiler error" not in str(error), str(error)
        return
    old = finals[1] / x
    order = np.argsort(old)
    np.testing.assert_array_equal(old[order], np.concatenate([[0.0], np.cumsum(x[order])[:-1]]))
    tangent_of_old = np.empty(n)
    tangent_of_old[order] = np.concatenate([[0.0], np.cumsum(tangent[order])[:-1]])
    np.testing.assert_allclose(shadows[1], tangent_of_old * x + old * tangent, rtol=1e-12)


@kk.kernel
def shared_tile_sum(y, x: kk.Const):
    i = kk.index(kk.Global)
    j = kk.index(kk.Local)
    tile = kk.localmem(np.float64, 16)
    tile[j] = x[i] * x[i]
    kk.synchronize()
    y[i] = tile[j] * tile[(j + 1) % 16]


def test_local_memory_holding_differentiated_values_is_an_error_or_right(backend):
    x = np.random.default_rng(31).uniform(-1, 1, 64)
    args = [np.zeros(64), x]
    seed = np.random.default_rng(32).uniform(-1, 1, 64)

    def in_groups(values, shift):
        return np.roll(values.reshape(4, 16), shift, axis=1).reshape(64)

    parts = Parts()
    with parts:
        try:
            gradients, _, _ = reverse_ad(backend, shared_tile_sum, args, {0, 1}, {0: seed}, 64,
                                         workgroupsize=16)
        except KernelkitError as error:
            reraise_compile_only(error)
            assert "internal compiler error" not in str(error), str(error)
        else:
            # y[i] = x[i]^2 x[i+1]^2 within each group of 16, cyclically
            expected = 2 * x * (seed * in_groups(x, -1) ** 2 + in_groups(seed * x ** 2, 1))
            np.testing.assert_allclose(gradients[1], expected, rtol=1e-12)
    tangent = np.random.default_rng(36).uniform(-1, 1, 64)
    with parts:
        try:
            shadows, _ = forward_ad(backend, shared_tile_sum, args,
                                    {0: np.zeros(64), 1: tangent}, 64, workgroupsize=16)
        except KernelkitError as error:
            reraise_compile_only(error)
            assert "internal compiler error" not in str(error), str(error)
        else:
            expected = 2 * x * tangent * in_groups(x, -1) ** 2 + \
                x ** 2 * 2 * in_groups(x * tangent, -1)
            np.testing.assert_allclose(shadows[0], expected, rtol=1e-12)
    parts.finish()


# --- the tape's capacity ----------------------------------------------------------------


@kk.kernel
def hundred_steps(y, x: kk.Const, steps: kk.Const):
    i = kk.index(kk.Global)
    s = x[i]
    c = 0
    while c < steps[i]:  # the data-dependent loop
        s = s * 1.01 + x[i] * 0.5
        c += 1
    y[i] = s * s


def test_a_loop_running_past_max_iterations_raises_an_error_naming_its_line(backend):
    x = np.random.default_rng(33).uniform(-1, 1, 16)
    steps = np.full(16, 100, np.int32)
    with pytest.raises(KernelkitError) as error:
        reverse_ad(backend, hundred_steps, [np.zeros(16), x, steps], {0, 1}, {0: np.ones(16)},
                   16, max_iterations=4)
    reraise_compile_only(error.value)
    assert re.search(rf"\bline {line_of('the data-dependent loop')}\b", str(error.value)), \
        str(error.value)


def test_a_loop_within_max_iterations_gives_the_right_gradient(backend):
    x = np.random.default_rng(33).uniform(-1, 1, 16)
    steps = np.random.default_rng(34).integers(90, 101, 16).astype(np.int32)
    args = [np.zeros(16), x, steps]
    seed = np.random.default_rng(35).uniform(-1, 1, 16)
    gradients, _, _ = reverse_ad(backend, hundred_steps, args, {0, 1}, {0: seed}, 16,
                                 max_iterations=100)
    expected = finite_difference_gradient(backend, hundred_steps, args, {0, 1}, {0: seed}, 16)
    np.testing.assert_allclose(gradients[1], expected[1], rtol=1e-6, atol=1e-8)
    gradients, _, _ = reverse_ad(backend, hundred_steps, args, {0, 1}, {0: seed}, 16)
    np.testing.assert_allclose(gradients[1], expected[1], rtol=1e-6, atol=1e-8)


@kk.kernel
def scaled_n_times(y, x: kk.Const, n):
    i = kk.index(kk.Global)
    for _ in range(n):
        y[i] = y[i] * x[i]     # each trip tapes the y[i] it overwrites


@pytest.mark.parametrize("n", [0, 3])
def test_a_launch_whose_loops_tape_nothing_still_has_counts_for_every_work_item(backend, n):
    """With n = 0 the loop that pushes runs no trip: the tape has no slots, but the
    augmented kernel still writes each work-item's counts (it wrote them past a one-element
    array, corrupting the heap, where a debug launch now finds no access out of bounds)."""
    rng = np.random.default_rng(7)
    x = rng.random(100) + 0.5
    y0 = rng.random(100)
    seed = rng.random(100)
    y, dy = kk.to_backend(backend, y0.copy()), kk.to_backend(backend, seed.copy())
    xs, dx = kk.to_backend(backend, x), kk.zeros(backend, np.float64, 100)
    forward, reverse = autodiff_thunk(ReverseSplit, scaled_n_times(backend, 32), Duplicated,
                                      Duplicated, Const)
    args = (Duplicated(y, dy), Duplicated(xs, dx), n)
    tape = forward(*args, ndrange=100)
    reverse(*args, tape=tape, ndrange=100)
    np.testing.assert_allclose(kk.to_numpy(dy), seed * x ** n, rtol=1e-12)
    np.testing.assert_allclose(kk.to_numpy(dx), seed * n * x ** (n - 1) * y0 if n else 0.0,
                               rtol=1e-12)


@kk.kernel
def constant_or_infinite_scale(y, x, pick):
    i = kk.index(kk.Global)
    scaled = x[i] * np.inf
    y[i] = scaled if pick > 0 else 4.0 * x[i]


def test_a_zero_adjoint_through_an_infinite_constant_partial_stays_zero(backend):
    """The branch not picked multiplies by inf: its adjoint, 0, times that partial is 0
    (a strong zero), not NaN; the finite constant 4 needs no such test (its product with
    0 is 0), so only one select of the strong zero is left in the reverse kernel."""
    from enzyme_ext import compiler_job_from_backend
    from enzyme_ext.jobs import derivative_job
    from kernelkit.compiler.driver import compile_job
    n = 96
    x, y = np.linspace(-1.0, 1.0, n), np.zeros(n)
    dx, dy = np.zeros(n), np.ones(n)
    argtypes = constant_or_infinite_scale.argument_types(backend, (on(backend, y),
                                                                   on(backend, x), 0))
    parent = compiler_job_from_backend(backend, constant_or_infinite_scale.function,
                                       argtypes, workgroupsize=(WORKGROUP,))
    names = (Duplicated.name, Duplicated.name, Const.name)
    ir = compile_job(derivative_job(parent, "reverse", names, (None,) * 3)).ir
    constants = dict(re.findall(r"(%\d+) = const \"?([^\" ]+)\"? : f64", ir))
    products = {constants.get(right): name for name, right in
                re.findall(r"(%\d+) = mul %\d+, (%\d+) : f64", ir)}
    selected = set(re.findall(r"= select %\d+, %\d+, (%\d+) : f64", ir))
    assert set(products) == {"inf", "4.0"}
    assert products["inf"] in selected and products["4.0"] not in selected
    x_on, dx_on = on(backend, x), on(backend, dx)
    autodiff(Reverse, constant_or_infinite_scale(backend, WORKGROUP),
             Duplicated(on(backend, y), on(backend, dy)), Duplicated(x_on, dx_on), 0,
             ndrange=n)
    kk.synchronize(backend)
    np.testing.assert_array_equal(kk.to_numpy(dx_on), np.full(n, 4.0))
