"""Vectors and matrices as values a kernel edits: element, row and `.x/.y/.z/.w`
assignment (with constant indices, loop variables and indices known only at run time),
`==` and `!=` (one bool, as NumPy's `array_equal`), unpacking into names and into calls
(`f(*v)`), and atomics on the vector and matrix elements of arrays; each against NumPy,
their derivatives against central finite differences, and the errors for what stays
unsupported."""
import functools

import numpy as np
import pytest

import kernelkit as kk
from enzyme_ext import Duplicated, Forward, Reverse, autodiff

import source_lines

assert_points_at = functools.partial(source_lines.assert_points_at, path=__file__)

N = 8


def launch(backend, kernel, *args, ndrange=N):
    kernel(backend, 4)(*args, ndrange=ndrange)
    kk.synchronize(backend)


# --- assignment ------------------------------------------------------------------------------


@kk.kernel
def edits(out, pts: kk.Const, picks: kk.Const):
    i = kk.index(kk.Global)
    v = kk.load_vec3(pts, i)
    v[0] = 2.0 * v[2]
    v[1] += v[0]
    v.z *= v.x
    v.y -= 1.0
    m = kk.mat33()
    m[1] = v                          # a row
    m[0, 2] = v.y                     # an element
    m[2][0] = v.z                     # an element of a row
    m[2] += 0.5                       # a number into each element of a row
    for k in range(3):                # a loop over a constant range: constant indices
        m[k, k] += float(k)
    j = picks[i]                      # known only at run time, negative counts from the end
    v[j] = m[j, j] * 10.0
    m[j] = m[j] + v
    m[-1, j] -= 1.0
    m[0] += kk.vec3(v[j], v[-1 - j], v[1])
    kk.store(out, i, m)


def host_edits(pts, picks):
    out = np.zeros((N, 3, 3))
    for i in range(N):
        v = pts[i].copy()
        v[0] = 2.0 * v[2]
        v[1] += v[0]
        v[2] *= v[0]
        v[1] -= 1.0
        m = np.zeros((3, 3))
        m[1] = v
        m[0, 2] = v[1]
        m[2][0] = v[2]
        m[2] += 0.5
        for k in range(3):
            m[k, k] += float(k)
        j = picks[i]
        v[j] = m[j, j] * 10.0
        m[j] = m[j] + v
        m[-1, j] -= 1.0
        m[0] += np.array([v[j], v[-1 - j], v[1]])
        out[i] = m
    return out


def test_elements_rows_and_components_are_assigned_as_numpy_assigns_them(backend):
    pts = np.random.default_rng(0).uniform(-1, 1, (N, 3))
    picks = np.array([0, 1, 2, -1, -2, -3, 1, 0])
    out = kk.zeros(backend, np.float64, (N, 3, 3))
    launch(backend, edits, out, kk.to_backend(backend, pts), kk.to_backend(backend, picks))
    np.testing.assert_array_equal(kk.to_numpy(out), host_edits(pts, picks))


@kk.kernel
def accumulates(out, x: kk.Const, steps):
    i = kk.index(kk.Global)
    total = kk.vec4(dtype=np.float32)
    for s in range(steps):            # not unrolled: the vector is carried around the loop
        total[s % 4] += x[i]
        total.w = total.w * 0.5
        if s == 2:
            total.x = -total.x
    kk.store(out, i, total)


def test_a_vector_changed_in_a_loop_is_carried_through_it(backend):
    x = np.arange(N, dtype=np.float32) + 1
    out = kk.zeros(backend, np.float32, (N, 4))
    launch(backend, accumulates, out, kk.to_backend(backend, x), 7)
    expected = np.zeros((N, 4), np.float32)
    for s in range(7):
        expected[:, s % 4] += x
        expected[:, 3] *= np.float32(0.5)
        if s == 2:
            expected[:, 0] = -expected[:, 0]
    np.testing.assert_array_equal(kk.to_numpy(out), expected)


@kk.kernel
def converts_on_assignment(out):
    i = kk.index(kk.Global)
    v = kk.vec2(0, 0, dtype=np.int32)
    v[0] = 2.75                       # to the element type, as NumPy's setitem converts
    v.y = -1.5
    w = kk.vec2(1.0, 1.0, dtype=np.float32)
    w[i % 2] = 1e-50                  # rounds to a float32 0
    out[i, 0] = v[0] + v[1]
    out[i, 1] = w[0] + w[1]


def test_an_assigned_value_takes_the_element_type(backend):
    out = kk.zeros(backend, np.float64, (N, 2))
    launch(backend, converts_on_assignment, out)
    np.testing.assert_array_equal(kk.to_numpy(out), [[1.0, 1.0]] * N)


# --- comparison and unpacking ----------------------------------------------------------------


@kk.kernel
def compares(out, a: kk.Const, b: kk.Const):
    i = kk.index(kk.Global)
    u, w = kk.load_vec3(a, i), kk.load_vec3(b, i)
    same = u == w
    out[i, 0] = same
    out[i, 1] = u != w
    out[i, 2] = kk.mat22(u[0], u[1], u[2], 1.0) == kk.mat22(w[0], w[1], w[2], 1.0)


def test_equality_of_vectors_and_matrices_is_one_bool_as_numpys_array_equal(backend):
    a = np.array([[1.0, 2.0, 3.0]] * N)
    b = a.copy()
    b[1, 2], b[2, 0], b[3, 1] = 3.5, np.nan, -2.0
    a[4, 0] = b[4, 0] = np.nan       # NaN equals nothing
    a[5, 1], b[5, 1] = 0.0, -0.0     # zeros of either sign are equal
    out = kk.zeros(backend, np.bool_, (N, 3))
    launch(backend, compares, out, kk.to_backend(backend, a), kk.to_backend(backend, b))
    equal = np.array([np.array_equal(x, y) for x, y in zip(a, b)])
    np.testing.assert_array_equal(kk.to_numpy(out), np.stack([equal, ~equal, equal], axis=1))


def weighted(a, b, c, scale=1.0):
    return (a + 2.0 * b + 3.0 * c) * scale


@kk.kernel
def unpacks(out, pts: kk.Const):
    i = kk.index(kk.Global)
    v = kk.load_vec3(pts, i)
    a, b, c = v
    m = kk.mat22(a, b, c, 1.0)
    first, second = m
    out[i, 0] = weighted(*v)
    out[i, 1] = weighted(*(c, b), a, scale=2.0)
    out[i, 2] = kk.dot(first, second) + weighted(*second, 0.0) + max(*v)
    out[i, 3] = kk.vec2(*first)[1] + kk.length(kk.vec3(*v))


def test_unpacking_into_names_and_into_calls(backend):
    pts = np.random.default_rng(1).uniform(-1, 1, (N, 3))
    out = kk.zeros(backend, np.float64, (N, 4))
    launch(backend, unpacks, out, kk.to_backend(backend, pts))
    a, b, c = pts.T
    expected = np.stack([a + 2 * b + 3 * c, 2 * (c + 2 * b + 3 * a),
                         a * c + b * 1.0 + (c + 2.0) + pts.max(axis=1),
                         b + np.linalg.norm(pts, axis=1)], axis=1)
    np.testing.assert_allclose(kk.to_numpy(out), expected, rtol=1e-15, atol=1e-15)


# --- atomics on arrays of vectors and matrices -----------------------------------------------


@kk.kernel
def scatter_vectors(forces, frames, olds, keys: kk.Const, pts: kk.Const):
    i = kk.index(kk.Global)
    v = kk.load_vec3(pts, i)
    kk.atomic_add(forces, keys[i], v)
    kk.atomic_sub(frames, keys[i], kk.mat22(v[0], v[1], v[2], 1.0))
    kk.store(olds, i, kk.atomic_max(forces, 2, kk.vec3(0.0, 0.0, 0.0)))


def test_atomics_on_vector_and_matrix_elements_of_arrays_update_each_element(backend):
    pts = (np.random.default_rng(2).integers(-4, 4, (N, 3)) / 2).astype(np.float64)
    keys = np.array([0, 1, 0, 1, 0, 1, 0, 1])
    forces = kk.zeros(backend, np.float64, (3, 3))
    frames = kk.zeros(backend, np.float64, (2, 2, 2))
    olds = kk.zeros(backend, np.float64, (N, 3))
    launch(backend, scatter_vectors, forces, frames, olds, kk.to_backend(backend, keys),
           kk.to_backend(backend, pts))
    expected = np.zeros((3, 3))
    np.add.at(expected, keys, pts)
    expected[2] = 0.0
    np.testing.assert_array_equal(kk.to_numpy(forces), expected)
    matrices = np.concatenate([pts, np.ones((N, 1))], axis=1).reshape(N, 2, 2)
    expected_frames = np.zeros((2, 2, 2))
    np.subtract.at(expected_frames, keys, matrices)
    np.testing.assert_array_equal(kk.to_numpy(frames), expected_frames)
    np.testing.assert_array_equal(kk.to_numpy(olds), np.zeros((N, 3)))


# --- derivatives ------------------------------------------------------------------------------


@kk.kernel
def edited_energy(energy, pts: kk.Const, picks: kk.Const):
    i = kk.index(kk.Global)
    v = kk.load_vec3(pts, i)
    m = kk.mat33(1.0)
    m[0] = v * v.y
    m[1, 2] = kk.sin(v.x)
    v.z = v.x * v.y
    j = picks[i]
    v[j] *= 3.0
    m[j, 1] += v[j] * v[0]
    m[2] = m[j] - v
    a, b, c = m @ v
    energy[i] = a * b + c


@kk.kernel
def atomic_forces(forces, pts: kk.Const, keys: kk.Const):
    i = kk.index(kk.Global)
    v = kk.load_vec3(pts, i)
    kk.atomic_add(forces, keys[i], v * v.x)


def test_derivatives_of_edited_vectors_and_vector_atomics_match_finite_differences(backend):
    rng = np.random.default_rng(3)
    pts = rng.uniform(-1, 1, (N, 3))
    picks = np.array([0, 1, 2, -1, 1, 0, 2, -3])
    keys = np.array([0, 1, 1, 0, 2, 2, 0, 1])
    seed, tangent = rng.uniform(-1, 1, N), rng.uniform(-1, 1, (N, 3))
    force_seed = rng.uniform(-1, 1, (3, 3))
    picks_b, keys_b = kk.to_backend(backend, picks), kk.to_backend(backend, keys)

    def energy(x):
        out = kk.zeros(backend, np.float64, N)
        launch(backend, edited_energy, out, kk.to_backend(backend, x), picks_b)
        return kk.to_numpy(out)

    def forces(x):
        out = kk.zeros(backend, np.float64, (3, 3))
        launch(backend, atomic_forces, out, kk.to_backend(backend, x), keys_b)
        return kk.to_numpy(out)

    d_pts = kk.zeros(backend, np.float64, (N, 3))
    autodiff(Reverse, edited_energy(backend, 4),
             Duplicated(kk.zeros(backend, np.float64, N), kk.to_backend(backend, seed.copy())),
             Duplicated(kk.to_backend(backend, pts), d_pts), picks_b, ndrange=N)
    t_energy = kk.zeros(backend, np.float64, N)
    autodiff(Forward, edited_energy(backend, 4),
             Duplicated(kk.zeros(backend, np.float64, N), t_energy),
             Duplicated(kk.to_backend(backend, pts), kk.to_backend(backend, tangent)), picks_b,
             ndrange=N)
    d_atomic = kk.zeros(backend, np.float64, (N, 3))
    autodiff(Reverse, atomic_forces(backend, 4),
             Duplicated(kk.zeros(backend, np.float64, (3, 3)),
                        kk.to_backend(backend, force_seed.copy())),
             Duplicated(kk.to_backend(backend, pts), d_atomic), keys_b, ndrange=N)
    kk.synchronize(backend)
    h = 1e-6
    numeric, numeric_atomic = np.zeros_like(pts), np.zeros_like(pts)
    for index in np.ndindex(pts.shape):
        up, down = pts.copy(), pts.copy()
        up[index] += h
        down[index] -= h
        numeric[index] = seed @ (energy(up) - energy(down)) / (2 * h)
        numeric_atomic[index] = np.sum(force_seed * (forces(up) - forces(down))) / (2 * h)
    np.testing.assert_allclose(kk.to_numpy(d_pts), numeric, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(kk.to_numpy(t_energy),
                               (energy(pts + h * tangent) - energy(pts - h * tangent)) / (2 * h),
                               rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(kk.to_numpy(d_atomic), numeric_atomic, rtol=1e-6, atol=1e-8)


# --- errors -----------------------------------------------------------------------------------


@kk.kernel
def assigns_a_row_to_an_element(out):
    i = kk.index(kk.Global)
    m = kk.mat22(1.0)
    m[0, 1] = kk.vec2(1.0, 2.0)
    out[i, 0] = m[0, 0]


@kk.kernel
def assigns_a_short_row(out):
    i = kk.index(kk.Global)
    m = kk.mat22(1.0)
    m[0] = kk.vec3(1.0, 2.0, 3.0)
    out[i, 0] = m[0, 0]


@kk.kernel
def reads_a_fifth_component(out):
    i = kk.index(kk.Global)
    v = kk.vec3(1.0, 2.0, 3.0)
    out[i, 0] = v.w


@kk.kernel
def names_a_component_of_a_matrix(out):
    i = kk.index(kk.Global)
    m = kk.mat22(1.0)
    m.x = 2.0
    out[i, 0] = m[0, 0]


@kk.kernel
def orders_vectors(out):
    i = kk.index(kk.Global)
    out[i, 0] = kk.vec2(1.0, 2.0) < kk.vec2(2.0, 3.0)


@kk.kernel
def compares_a_vector_with_a_number(out):
    i = kk.index(kk.Global)
    out[i, 0] = kk.vec2(1.0, 1.0) == 1.0


@kk.kernel
def changes_a_tuple(out):
    i = kk.index(kk.Global)
    t = (1.0, 2.0)
    t[0] = 3.0
    out[i, 0] = t[0]


@kk.kernel
def indexes_with_a_float(out):
    i = kk.index(kk.Global)
    v = kk.vec2(1.0, 2.0)
    v[0.5 * i] = 3.0
    out[i, 0] = v[0]


@kk.kernel
def unpacks_a_number(out):
    i = kk.index(kk.Global)
    out[i, 0] = max(*out[i, 1])


@pytest.mark.parametrize("kernel, line, message", [
    (assigns_a_row_to_an_element, "m[0, 1] = kk.vec2(1.0, 2.0)",
     "cannot assign a vec<f64, 2> to an element of a mat<f64, 2x2>"),
    (assigns_a_short_row, "m[0] = kk.vec3(1.0, 2.0, 3.0)", "to a row of 2"),
    (reads_a_fifth_component, "out[i, 0] = v.w", "has no attribute 'w'"),
    (names_a_component_of_a_matrix, "m.x = 2.0", "m[i, j]"),
    (orders_vectors, "out[i, 0] = kk.vec2(1.0, 2.0) < kk.vec2", "with == and != only"),
    (compares_a_vector_with_a_number, "out[i, 0] = kk.vec2(1.0, 1.0) == 1.0",
     "compare the elements"),
    (changes_a_tuple, "t[0] = 3.0", "a tuple cannot be changed in place"),
    (indexes_with_a_float, "v[0.5 * i] = 3.0", "indexed with integers"),
    (unpacks_a_number, "out[i, 0] = max(*out[i, 1])", "*-unpacking takes a tuple"),
])
def test_what_stays_unsupported_is_an_error_at_the_line(backend, kernel, line, message):
    with pytest.raises(kk.CompileError) as info:
        launch(backend, kernel, kk.zeros(backend, np.float64, (N, 2)))
    assert message in str(info.value)
    assert_points_at(info.value, kernel.name, line)
