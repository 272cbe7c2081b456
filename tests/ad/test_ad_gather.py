"""Reverse mode of kernels that read an array at their neighbours' positions: the shadow
updates that neighbouring work-items share are gathered by each element's owner in a
kernel of their own (enzyme_ext/transform/gather.py) instead of being made with atomics,
with the elements past the ndrange's edges (the halo) still updated atomically, by the
reverse kernel, behind a test of the position. Each gradient is checked against the same
sums written out in Python, on ndranges that end in partial work-groups, and the reverse
kernel is checked to keep no atomics but those of the halo."""
import re

import numpy as np
import pytest

import kernelkit as kk
from enzyme_ext import Active, Const, Duplicated, Reverse, autodiff, compiler_job_from_backend
from enzyme_ext.jobs import derivative_job
from kernelkit.compiler.driver import compile_job


@kk.kernel
def three_points(y, x, w0, w1, w2):
    i = kk.index(kk.Global)
    y[i + 1] = w0 * x[i] + w1 * x[i + 1] + w2 * x[i + 2]


@kk.kernel
def heat_step(out, u, alpha):
    i, j = kk.index(kk.Global, kk.NTuple)
    r = i + 1
    c = j + 1
    laplacian = u[r - 1, c] + u[r + 1, c] + u[r, c - 1] + u[r, c + 1] - 4.0 * u[r, c]
    out[r, c] = u[r, c] + alpha * laplacian


@kk.kernel
def transposed_pairs(y, x):
    i, j = kk.index(kk.Global, kk.NTuple)
    y[i, j] = x[j, i] * x[j, i] + 2.0 * x[j + 1, i]


@kk.kernel
def both_orders(y, x):
    i, j = kk.index(kk.Global, kk.NTuple)
    y[i, j] = x[i, j] + 3.0 * x[j, i + 1]


def reverse(backend, kernel, workgroupsize, ndrange, arguments, activities):
    """autodiff(Reverse, ...) on copies; returns (result, shadows as NumPy arrays)."""
    annotated, shadows = [], []
    for value, activity in zip(arguments, activities):
        if activity is Duplicated:
            array, seed = value
            shadow = kk.to_backend(backend, seed.copy())
            annotated.append(Duplicated(kk.to_backend(backend, array.copy()), shadow))
            shadows.append(shadow)
        elif activity is Active:
            annotated.append(Active(value))
        else:
            annotated.append(kk.to_backend(backend, value.copy())
                             if isinstance(value, np.ndarray) else value)
    result = autodiff(Reverse, kernel(backend, workgroupsize), *annotated, ndrange=ndrange)
    kk.synchronize(backend)
    return result, [kk.to_numpy(shadow) for shadow in shadows]


def halo_only(ir: str) -> bool:
    """Whether every atomic update of the reverse kernel's text is the halo's: alone in a
    block of its own, which a test of the position leads to (a block that begins with it
    and ends after it)."""
    lines = [line.strip() for line in ir.splitlines()]
    return all(lines[k - 1].startswith("^bb") and lines[k + 1].startswith("br ")
               for k, line in enumerate(lines) if "atomic" in line)


def reverse_kernel_ir(backend, kernel, workgroupsize, arguments, activities):
    arguments = [kk.to_backend(backend, a) if isinstance(a, np.ndarray) else a
                 for a in arguments]
    argtypes = kernel.argument_types(backend, tuple(arguments))
    parent = compiler_job_from_backend(backend, kernel.function, argtypes,
                                       workgroupsize=workgroupsize)
    names = tuple(activity.name for activity in activities)
    return compile_job(derivative_job(parent, "reverse", names, (None,) * len(names))).ir


@pytest.mark.parametrize("n", [64, 203], ids=["whole groups", "partial group"])
def test_three_point_stencil_gathers_its_neighbours_updates(backend, n):
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(n), rng.standard_normal(n)
    dy, dx = rng.standard_normal(n), rng.standard_normal(n)
    w = (0.3, -1.2, 0.7)
    ir = reverse_kernel_ir(backend, three_points, (32,), (y, x, *w),
                           (Duplicated, Duplicated, Active, Active, Active))
    assert "atomic" in ir and halo_only(ir)
    result, (got_dy, got_dx) = reverse(backend, three_points, 32, n - 2,
                                       ((y, dy), (x, dx), *w),
                                       (Duplicated, Duplicated, Active, Active, Active))
    expected_dx, expected_dw = dx.copy(), [0.0, 0.0, 0.0]
    for i in range(n - 2):
        for k in range(3):
            expected_dx[i + k] += w[k] * dy[i + 1]
            expected_dw[k] += x[i + k] * dy[i + 1]
    expected_dy = dy.copy()
    expected_dy[1:-1] = 0.0         # y's interior is overwritten: its adjoint is consumed
    np.testing.assert_allclose(got_dx, expected_dx, rtol=1e-13, atol=1e-14)
    np.testing.assert_array_equal(got_dy, expected_dy)
    np.testing.assert_allclose(result[2:], expected_dw, rtol=1e-12)


@pytest.mark.parametrize("shape", [(8, 16), (13, 21)], ids=["whole groups", "partial groups"])
def test_heat_step_gathers_the_five_point_updates(backend, shape):
    rows, cols = shape[0] + 2, shape[1] + 2
    rng = np.random.default_rng(2)
    u, out = rng.standard_normal((rows, cols)), rng.standard_normal((rows, cols))
    dout, du = rng.standard_normal((rows, cols)), rng.standard_normal((rows, cols))
    alpha = 0.15
    result, (got_dout, got_du) = reverse(backend, heat_step, (4, 8), shape,
                                         ((out, dout), (u, du), alpha),
                                         (Duplicated, Duplicated, Active))
    expected_du, expected_dalpha = du.copy(), 0.0
    for r in range(1, rows - 1):
        for c in range(1, cols - 1):
            g = dout[r, c]
            expected_du[r, c] += (1.0 - 4.0 * alpha) * g
            for nr, nc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
                expected_du[nr, nc] += alpha * g
            laplacian = u[r - 1, c] + u[r + 1, c] + u[r, c - 1] + u[r, c + 1] - 4.0 * u[r, c]
            expected_dalpha += g * laplacian
    expected_dout = dout.copy()
    expected_dout[1:-1, 1:-1] = 0.0
    np.testing.assert_allclose(got_du, expected_du, rtol=1e-13, atol=1e-14)
    np.testing.assert_array_equal(got_dout, expected_dout)
    assert result[2] == pytest.approx(expected_dalpha, rel=1e-12)


def test_gathered_updates_are_the_same_bits_on_every_run(backend):
    rng = np.random.default_rng(3)
    shape = (29, 45)
    u, out = rng.standard_normal((31, 47)), rng.standard_normal((31, 47))
    dout, du = rng.standard_normal((31, 47)), rng.standard_normal((31, 47))
    runs = [reverse(backend, heat_step, (4, 8), shape, ((out, dout), (u, du), 0.2),
                    (Duplicated, Duplicated, Active)) for _ in range(3)]
    for result, (got_dout, got_du) in runs[1:]:
        np.testing.assert_array_equal(got_du, runs[0][1][1])
        assert result == runs[0][0]


@pytest.mark.parametrize("shape", [(8, 8), (11, 6)], ids=["whole groups", "partial groups"])
def test_transposed_neighbour_reads_are_gathered_along_the_right_axes(backend, shape):
    rows, cols = shape
    rng = np.random.default_rng(4)
    x = rng.standard_normal((cols + 1, rows))
    y = np.zeros(shape)
    dy, dx = rng.standard_normal(shape), rng.standard_normal(x.shape)
    ir = reverse_kernel_ir(backend, transposed_pairs, (4, 4), (y, x), (Duplicated, Duplicated))
    assert "atomic" in ir and halo_only(ir)
    _, (_, got_dx) = reverse(backend, transposed_pairs, (4, 4), shape, ((y, dy), (x, dx)),
                             (Duplicated, Duplicated))
    expected = dx.copy()
    for i in range(rows):
        for j in range(cols):
            expected[j, i] += 2.0 * x[j, i] * dy[i, j]
            expected[j + 1, i] += 2.0 * dy[i, j]
    np.testing.assert_allclose(got_dx, expected, rtol=1e-13, atol=1e-14)


def test_reads_along_different_axes_keep_their_atomic_updates(backend):
    # x[i, j] and x[j, i + 1]: no one owner per element, so the updates stay atomic.
    n = 9
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((n + 1, n + 1)), np.zeros((n, n))
    dy, dx = rng.standard_normal((n, n)), rng.standard_normal((n + 1, n + 1))
    ir = reverse_kernel_ir(backend, both_orders, (4, 4), (y, x), (Duplicated, Duplicated))
    assert "atomic" in ir and not halo_only(ir)
    _, (_, got_dx) = reverse(backend, both_orders, (4, 4), (n, n), ((y, dy), (x, dx)),
                             (Duplicated, Duplicated))
    expected = dx.copy()
    for i in range(n):
        for j in range(n):
            expected[i, j] += dy[i, j]
            expected[j, i + 1] += 3.0 * dy[i, j]
    np.testing.assert_allclose(got_dx, expected, rtol=1e-13, atol=1e-14)


def test_a_const_neighbour_array_needs_no_gather(backend):
    # Only y's own elements are updated: nothing to gather, no atomics either.
    n = 40
    rng = np.random.default_rng(6)
    x, y = rng.standard_normal(n), rng.standard_normal(n)
    ir = reverse_kernel_ir(backend, three_points, (16,), (y, x, 1.0, 2.0, 3.0),
                           (Duplicated, Const, Active, Active, Active))
    assert "atomic" not in ir
    dy = rng.standard_normal(n)
    result, _ = reverse(backend, three_points, 16, n - 2, ((y, dy), x, 1.0, 2.0, 3.0),
                        (Duplicated, Const, Active, Active, Active))
    for k in range(3):
        assert result[2 + k] == pytest.approx(float(np.dot(x[k:n - 2 + k], dy[1:-1])),
                                              rel=1e-12)


@kk.kernel
def by_local_index(out, x):
    i = kk.index(kk.Global)
    out[i] = x[kk.index(kk.Local)] * 2.0


def test_an_array_read_at_the_local_index_is_updated_by_every_group(backend):
    # Work-items of different groups share a local index: x's shadow updates are atomic
    # (a plain read-modify-write would lose the updates of groups running at once).
    groupsize, n = 16, 4096
    x, out = np.ones(groupsize), np.zeros(n)
    ir = reverse_kernel_ir(backend, by_local_index, (groupsize,), (out, x),
                           (Duplicated, Duplicated))
    assert "atomic" in ir
    _, (_, got_dx) = reverse(backend, by_local_index, groupsize, n,
                             ((out, np.ones(n)), (x, np.zeros(groupsize))),
                             (Duplicated, Duplicated))
    np.testing.assert_array_equal(got_dx, np.full(groupsize, 2.0 * n / groupsize))


@kk.kernel
def overlapping_windows(out, x):
    """Each group of 8 reads the 9 elements from 4 * its number on: `g * 4 + l` is not a
    global index (the group size is 8), and neighbouring groups share elements."""
    g = kk.index(kk.Group)
    local = kk.index(kk.Local)
    i = kk.index(kk.Global)
    out[i] = x[g * 4 + local] * 2.0 + x[g * 4 + local + 1]


def test_a_group_number_times_another_size_is_not_a_position(backend):
    n = 64
    x, out = np.random.default_rng(7).standard_normal(n // 2 + 9), np.zeros(n)
    _, (_, got_dx) = reverse(backend, overlapping_windows, 8, n,
                             ((out, np.ones(n)), (x, np.zeros(len(x)))),
                             (Duplicated, Duplicated))
    expected = np.zeros(len(x))
    for i in range(n):
        g, local = divmod(i, 8)
        expected[g * 4 + local] += 2.0
        expected[g * 4 + local + 1] += 1.0
    np.testing.assert_array_equal(got_dx, expected)


@kk.kernel
def shifted_copy(y, x):
    i = kk.index(kk.Global)
    y[i] = x[i + 1] * x[i + 1]


@pytest.mark.parametrize("n", [64, 77], ids=["whole groups", "partial group"])
def test_an_array_read_at_one_offset_is_updated_without_atomics(backend, n):
    rng = np.random.default_rng(9)
    x, y, dy, dx = (rng.standard_normal(n + 1), np.zeros(n), rng.standard_normal(n),
                    rng.standard_normal(n + 1))
    ir = reverse_kernel_ir(backend, shifted_copy, (16,), (y, x), (Duplicated, Duplicated))
    assert "atomic" not in ir
    _, (_, got_dx) = reverse(backend, shifted_copy, 16, n, ((y, dy), (x, dx)),
                             (Duplicated, Duplicated))
    expected = dx.copy()
    expected[1:] += 2.0 * x[1:] * dy
    np.testing.assert_allclose(got_dx, expected, rtol=1e-13, atol=1e-14)


# --- stencils whose boundary a test skips, as GPU users write them ------------------------


@kk.kernel
def guarded_heat_step(out, u, alpha):
    """The whole array's ndrange; the boundary copied on one side of an `if`."""
    i, j = kk.index(kk.Global, kk.NTuple)
    rows, cols = kk.ndrange()
    if i == 0 or j == 0 or i == rows - 1 or j == cols - 1:
        out[i, j] = u[i, j]
    else:
        laplacian = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]
        out[i, j] = u[i, j] + alpha * laplacian


@kk.kernel
def interior_only_step(out, u, alpha):
    """The boundary skipped by an `if` without an `else`: its updates are made on one
    side only, and the loads behind the test are made by the interior alone."""
    i, j = kk.index(kk.Global, kk.NTuple)
    rows, cols = u.shape
    if 0 < i and i < rows - 1 and 0 < j and j < cols - 1:
        laplacian = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]
        out[i, j] = u[i, j] + alpha * laplacian


def guarded_heat_adjoints(u, dout, du, alpha, copies_boundary):
    rows, cols = u.shape
    expected_du, expected_dalpha = du.copy(), 0.0
    for r in range(rows):
        for c in range(cols):
            g = dout[r, c]
            if r in (0, rows - 1) or c in (0, cols - 1):
                if copies_boundary:
                    expected_du[r, c] += g
                continue
            expected_du[r, c] += (1.0 - 4.0 * alpha) * g
            for nr, nc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
                expected_du[nr, nc] += alpha * g
            laplacian = u[r - 1, c] + u[r + 1, c] + u[r, c - 1] + u[r, c + 1] - 4.0 * u[r, c]
            expected_dalpha += g * laplacian
    return expected_du, expected_dalpha


@pytest.mark.parametrize("kernel, copies_boundary", [(guarded_heat_step, True),
                                                     (interior_only_step, False)],
                         ids=["if-else", "if-only"])
@pytest.mark.parametrize("shape, workgroupsize", [((16, 32), (16, 16)), ((13, 21), (4, 8)),
                                                  ((3, 40), (1, 16))],
                         ids=["whole groups", "partial groups", "three rows"])
def test_a_stencil_behind_a_boundary_test_gathers_its_updates(backend, kernel,
                                                              copies_boundary, shape,
                                                              workgroupsize):
    rng = np.random.default_rng(4)
    u, out = rng.standard_normal(shape), rng.standard_normal(shape)
    dout, du = rng.standard_normal(shape), rng.standard_normal(shape)
    alpha = 0.15
    ir = reverse_kernel_ir(backend, kernel, workgroupsize, (out, u, alpha),
                           (Duplicated, Duplicated, Active))
    assert halo_only(ir)
    result, (got_dout, got_du) = reverse(backend, kernel, workgroupsize, shape,
                                         ((out, dout), (u, du), alpha),
                                         (Duplicated, Duplicated, Active))
    expected_du, expected_dalpha = guarded_heat_adjoints(u, dout, du, alpha, copies_boundary)
    expected_dout = dout.copy()
    if copies_boundary:
        expected_dout[...] = 0.0
    else:
        expected_dout[1:-1, 1:-1] = 0.0
    np.testing.assert_allclose(got_du, expected_du, rtol=1e-13, atol=1e-14)
    np.testing.assert_array_equal(got_dout, expected_dout)
    assert result[2] == pytest.approx(expected_dalpha, rel=1e-12)


def guarded_heat_derivative(mode: str, shape, workgroupsize):
    """`guarded_heat_step`'s derivative kernel of `mode` on the CPU, float32, with the
    arrays Duplicated and alpha Const."""
    backend = kk.CPU()
    u = np.zeros(shape, np.float32)
    argtypes = guarded_heat_step.argument_types(backend, (u, u, np.float32(0.2)))
    parent = compiler_job_from_backend(backend, guarded_heat_step.function, argtypes,
                                       workgroupsize=workgroupsize)
    names = (Duplicated.name, Duplicated.name, Const.name)
    return compile_job(derivative_job(parent, mode, names, (None,) * 3))


def test_the_gather_kernel_of_a_guarded_stencil_has_no_tests_mid_row():
    """A neighbour's test is computed at the neighbour's position (its loads at a position
    inside the ndrange), an affine function of the work-item's: the CPU cuts it out of
    the middle of each row (`item_split.py`), where the gather loop then reads whole
    vectors and compares no indices. (At the clamped position, min/max-like selects, the
    row kept every test: a vector compare per neighbour per element, and the neighbours'
    loads as gathers.)"""
    llvm_ir = guarded_heat_derivative("gather", (8, 1024), (1, 1024)).llvm_ir
    bodies = re.findall(r"^vector\.body\d*:.*?(?=^\S+:)", llvm_ir, re.S | re.M)
    clean = [body for body in bodies
             if not re.search(r"icmp \w+ <\d+ x i64>|masked\.gather", body)]
    assert clean and all(re.search(r"load <\d+ x float>", body) for body in clean)


@kk.kernel
def left_neighbour_past_one(y, x):
    """Work-item 0 is skipped: no update reaches x's element -1 (the halo)."""
    i = kk.index(kk.Global)
    if i > 0:
        y[i] = x[i] + x[i] + 2.0 * x[i - 1]


@kk.kernel
def left_neighbour_but_three(y, x):
    """Work-item 0 is not skipped: its update of x[-1] (the last element) stays."""
    i = kk.index(kk.Global)
    if i != 3:
        y[i] = x[i] + x[i] + 2.0 * x[i - 1]


@pytest.mark.parametrize("kernel, skipped", [(left_neighbour_past_one, {0}),
                                             (left_neighbour_but_three, {3})],
                         ids=["guard keeps the edge out", "guard lets the edge in"])
def test_a_halo_update_the_guard_never_lets_through_is_left_out(backend, kernel, skipped):
    n = 50
    rng = np.random.default_rng(7)
    x, y = rng.standard_normal(n), rng.standard_normal(n)
    dy, dx = rng.standard_normal(n), rng.standard_normal(n)
    ir = reverse_kernel_ir(backend, kernel, (16,), (y, x), (Duplicated, Duplicated))
    assert ("atomic" in ir) == (0 not in skipped) and halo_only(ir)
    _, (_, got_dx) = reverse(backend, kernel, 16, n, ((y, dy), (x, dx)),
                             (Duplicated, Duplicated))
    expected = dx.copy()
    for i in range(n):
        if i not in skipped:
            expected[i] += 2.0 * dy[i]
            expected[(i - 1) % n] += 2.0 * dy[i]     # x[-1]: the last element
    np.testing.assert_allclose(got_dx, expected, rtol=1e-13, atol=1e-14)


def test_the_unzeroed_reverse_of_a_guarded_stencil_writes_nothing_and_is_skipped(
        monkeypatch):
    """The heat step over the whole array: every neighbour of the interior is inside, so
    its reverse kernel keeps no halo update, and without the zeroing of the output's
    adjoint (a program's `reverse-unzeroed`) it writes nothing: the launch skips it."""
    from enzyme_ext import rules
    from enzyme_ext.transform.plugin import EFFECTLESS
    backend = kk.CPU()
    shape = (12, 40)
    compiled = {mode: guarded_heat_derivative(mode, shape, (4, 8))
                for mode in ("reverse", "reverse-unzeroed", "gather")}
    assert "atomic" not in compiled["reverse"].ir
    assert [mode for mode, kernel in compiled.items() if kernel.notes[EFFECTLESS]] == \
        ["reverse-unzeroed"]
    launched = []
    original = rules.Rule.launch
    monkeypatch.setattr(rules.Rule, "launch", lambda self, kernel, *rest: (
        launched.append(kernel[2].ir.split("(", 1)[0].split("@")[-1]),
        original(self, kernel, *rest)))
    step = guarded_heat_step(backend, (4, 8))
    alpha = np.float32(0.2)

    def two_steps(a, b):
        step(b, a, alpha, ndrange=shape)
        step(a, b, alpha, ndrange=shape)

    rng = np.random.default_rng(5)
    a0, seed = rng.random(shape, dtype=np.float32), rng.random(shape, dtype=np.float32)
    a, da = a0.copy(), seed.copy()
    autodiff(Reverse, two_steps, Duplicated(a, da), Duplicated(np.zeros_like(a0),
                                                               np.zeros_like(a0)))
    kk.synchronize(backend)
    assert launched == ["guarded_heat_step.gather"] * 2   # each reverse kernel skipped
    expected = seed.astype(np.float64)
    for _ in range(2):
        expected, _ = guarded_heat_adjoints(a0.astype(np.float64), expected,
                                            np.zeros(shape), float(alpha), True)
    np.testing.assert_allclose(da, expected, rtol=1e-5)
