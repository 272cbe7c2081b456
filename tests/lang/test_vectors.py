"""Small vectors and matrices (`kk.vec2` ... `kk.mat44`): built from numbers with NumPy's
promotion, NumPy's arithmetic (elementwise, by scalars, `@`), indexing, the functions
(`kk.dot`, `kk.cross`, `kk.length`, `kk.normalize`, `kk.transpose`), carried through
loops and branches, passed to and returned from device functions, loaded from and
stored to arrays; each kernel checked against the same device functions run on the host
with NumPy (tests/lang/test_vectors_differential.py does so for thirty more). Their IR
text and the split-tuples pass; their derivatives (enzyme_ext) against finite
differences and at the zero vector; and the errors for what they cannot do."""
import functools

import numpy as np
import pytest

import kernelkit as kk
from enzyme_ext import Active, Duplicated, Forward, Reverse, autodiff
from kernelkit.ir.parser import parse_module
from kernelkit.ir.printer import print_module
from kernelkit.ir.verifier import IRVerificationError, verify_module
from kernelkit.passes import run_passes

import source_lines

assert_points_at = functools.partial(source_lines.assert_points_at, path=__file__)

WORKGROUP = 4
N = 8


def launch(backend, kernel, *args, ndrange=N):
    kernel(backend, WORKGROUP)(*args, ndrange=ndrange)
    kk.synchronize(backend)


def points(n=N, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).uniform(-1, 1, (n, 3)).astype(dtype)


# --- arithmetic, checked against the host --------------------------------------------------


def mix(a, b, s):
    """Elementwise arithmetic with vectors and scalars on both sides."""
    return (a + b) * s - b / 2 + 1.5 * a - (-b) + abs(a - b) + max(a, b) * min(a, b)


@kk.kernel
def mixes(out, pts, s):
    i = kk.index(kk.Global)
    a = kk.load_vec3(pts, i)
    b = kk.vec3(pts[(i + 1) % N, 0], pts[(i + 1) % N, 1], 0.25)
    kk.store(out, i, mix(a, b, s))


def host_mix(pts, s):
    out = np.zeros_like(pts)
    for i in range(N):
        a = kk.load_vec3(pts, i)
        b = kk.vec3(pts[(i + 1) % N, 0], pts[(i + 1) % N, 1], np.float32(0.25))
        kk.store(out, i, (a + b) * s - b / 2 + 1.5 * a - (-b) + abs(a - b) +
                 np.maximum(a, b) * np.minimum(a, b))
    return out


def test_vector_arithmetic_is_numpys_elementwise_arithmetic(backend):
    pts = points()
    out = kk.zeros(backend, np.float32, (N, 3))
    launch(backend, mixes, out, kk.to_backend(backend, pts), np.float32(0.75))
    np.testing.assert_array_equal(kk.to_numpy(out), host_mix(pts, np.float32(0.75)))


def products(m, v, w):
    p = m @ v                    # matrix @ vector
    q = v @ m                    # vector @ matrix (a row vector)
    r = (m @ kk.transpose(m)) @ w
    return p + q + r + kk.vec3(v @ w) + m[1] + kk.vec3(m[2, 0], m[0, 2], kk.dot(v, w))


@kk.kernel
def matrix_products(out, pts, mats: kk.Const):
    i = kk.index(kk.Global)
    m = kk.load_mat33(mats, i)
    kk.store(out, i, products(m, kk.load_vec3(pts, i), kk.load_vec3(pts, (i + 3) % N)))


def test_matrix_products_transpose_and_indexing_match_numpy(backend):
    pts = points()
    mats = np.random.default_rng(1).uniform(-1, 1, (N, 3, 3)).astype(np.float32)
    out = kk.zeros(backend, np.float32, (N, 3))
    launch(backend, matrix_products, out, kk.to_backend(backend, pts),
           kk.to_backend(backend, mats))
    expected = np.array([products(mats[i], pts[i], pts[(i + 3) % N]) for i in range(N)])
    np.testing.assert_allclose(kk.to_numpy(out), expected, rtol=1e-5, atol=1e-6)


def geometry(u, v):
    return kk.cross(u, v) * kk.length(u) + kk.normalize(v) + kk.normalize(u * 0.0)


@kk.kernel
def geometries(out, pts):
    i = kk.index(kk.Global)
    kk.store(out, i, geometry(kk.load_vec3(pts, i), kk.load_vec3(pts, (i + 1) % N)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cross_length_and_normalize_including_the_zero_vector(backend, dtype):
    pts = points(dtype=dtype)
    out = kk.zeros(backend, dtype, (N, 3))
    launch(backend, geometries, out, kk.to_backend(backend, pts))
    expected = np.array([np.cross(pts[i], pts[(i + 1) % N]) * np.linalg.norm(pts[i]) +
                         pts[(i + 1) % N] / np.linalg.norm(pts[(i + 1) % N])
                         for i in range(N)])
    rtol = 1e-5 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(kk.to_numpy(out), expected, rtol=rtol, atol=rtol)
    assert kk.to_numpy(out).dtype == dtype


# --- element types -------------------------------------------------------------------------


def element_types(x32, n):
    a = kk.vec3(x32, 0.0, 0.0)             # float32 and Python floats: float32
    b = kk.vec2(1.0, 2.0)                  # Python floats only: float64
    c = kk.vec4(1, 2, 3, n)                # integers: int64
    d = kk.vec2(n, 1, dtype=np.float32)    # dtype= chooses
    e = kk.mat22(1.5)                      # one number fills the matrix
    return a, b, c, d, e, c / 2, c // 2


@kk.kernel
def typed(out, x32, n):
    a, b, c, d, e, half, floor_half = element_types(x32, n)
    out[0] = a[0] + b[1] + c[3] + d[0] + e[1, 1] + half[0] + floor_half[2]


def test_element_types_follow_numpy_promotion(backend):
    out = kk.zeros(backend, np.float64, 1)
    launch(backend, typed, out, np.float32(2.0), 7, ndrange=1)
    a, b, c, d, e, half, floor_half = element_types(np.float32(2.0), 7)
    assert (a.dtype, b.dtype, c.dtype, d.dtype, half.dtype, floor_half.dtype) == \
        (np.float32, np.float64, np.int64, np.float32, np.float64, np.int64)
    assert kk.to_numpy(out)[0] == 2.0 + 2.0 + 7 + 7 + 1.5 + 0.5 + 1


def half_sums(u, w):
    m = kk.mat33(u, w, w)
    return kk.vec3(kk.dot(u, w), u @ w, (m @ w)[0])


@kk.kernel
def sums_half_products(out, big):
    kk.store(out, 0, half_sums(kk.vec3(big, 1, 1), kk.vec3(1, 1, 1, dtype=np.float16)))


def test_float16_products_are_summed_in_float32_as_numpys_dot_and_matmul_sum_them(backend):
    """2048 + 1 + 1 is 2048 summed in float16 (2049 rounds to even), 2050 in float32."""
    out = kk.zeros(backend, np.float16, (1, 3))
    launch(backend, sums_half_products, out, np.float16(2048), ndrange=1)
    u, w = np.array([2048, 1, 1], np.float16), np.ones(3, np.float16)
    assert np.dot(u, w) == u @ w == 2050
    np.testing.assert_array_equal(half_sums(u, w), [2050, 2050, 2050])
    np.testing.assert_array_equal(kk.to_numpy(out)[0], [2050, 2050, 2050])


def assembled(u, m):
    """Vectors and matrices built from numbers, vectors, matrices and tuples, in order."""
    return (kk.vec4(u, 1), kk.vec4(m), kk.vec4(kk.vec3((7, 8), u[0]), 9),
            kk.mat22(kk.vec4(m[1], m[0])), kk.mat22(m[1], 5, 6))


@kk.kernel
def assembles(vectors, matrices, u_in, m_in):
    a, b, c, d, e = assembled(kk.load_vec3(u_in, 0), kk.load_mat22(m_in, 0))
    kk.store(vectors, 0, a)
    kk.store(vectors, 1, b)
    kk.store(vectors, 2, c)
    kk.store(matrices, 0, d)
    kk.store(matrices, 1, e)


def test_constructors_take_the_numbers_of_their_arguments_in_order_in_kernels_and_on_the_host(
        backend):
    u_in, m_in = np.array([[1.0, 2.0, 3.0]]), np.array([[[1.0, 2.0], [3.0, 4.0]]])
    vectors, matrices = kk.zeros(backend, np.float64, (3, 4)), kk.zeros(backend, np.float64,
                                                                       (2, 2, 2))
    launch(backend, assembles, vectors, matrices, kk.to_backend(backend, u_in),
           kk.to_backend(backend, m_in), ndrange=1)
    expected = [[1, 2, 3, 1], [1, 2, 3, 4], [7, 8, 1, 9]], [[[3, 4], [1, 2]], [[3, 4], [5, 6]]]
    host = assembled(kk.load_vec3(u_in, 0), kk.load_mat22(m_in, 0))
    np.testing.assert_array_equal(host[:3], expected[0])
    np.testing.assert_array_equal(host[3:], expected[1])
    np.testing.assert_array_equal(kk.to_numpy(vectors), expected[0])
    np.testing.assert_array_equal(kk.to_numpy(matrices), expected[1])
    with pytest.raises(TypeError, match="takes 1 or 3 numbers, got 4"):
        kk.vec3(kk.vec3(1.0, 2.0, 3.0), 4.0)
    with pytest.raises(TypeError, match="takes numbers"):
        kk.vec2(True, 1.0)              # as in a kernel


# --- loops, branches, device functions -----------------------------------------------------


def step(p, v, dt):
    """One explicit Euler step of a particle in a field pointing to the origin."""
    a = -p * kk.dot(p, p)
    return p + v * dt, v + a * dt


@kk.kernel
def integrate(out, pts, steps):
    i = kk.index(kk.Global)
    p = kk.load_vec3(pts, i)
    v = kk.vec3(p[1], -p[0], 0.0)
    for _ in range(steps):
        p, v = step(p, v, np.float32(0.01))
        if kk.length(v) > 2.0:
            v = kk.normalize(v) * 2.0
    kk.store(out, i, p)


def test_vectors_are_carried_through_loops_branches_and_device_functions(backend):
    pts = points()
    out = kk.zeros(backend, np.float32, (N, 3))
    launch(backend, integrate, out, kk.to_backend(backend, pts), 50)
    expected = np.zeros_like(pts)
    for i in range(N):
        p = pts[i].copy()
        v = kk.vec3(p[1], -p[0], 0.0, dtype=np.float32)
        for _ in range(50):
            p, v = step(p, v, np.float32(0.01))
            if kk.length(v) > 2.0:
                v = kk.normalize(v) * 2.0
        expected[i] = p
    np.testing.assert_allclose(kk.to_numpy(out), expected, rtol=1e-5, atol=1e-6)


def test_a_loop_carries_the_elements_of_a_vector_not_the_vector():
    """The split-tuples pass: after the passes, the loop's block parameters are numbers
    and no tuple is left."""
    ir = kk.code_ir(integrate, kk.CPU(), np.zeros((N, 3), np.float32),
                    np.zeros((N, 3), np.float32), 5, ndrange=N, workgroupsize=WORKGROUP)
    assert "vec<" not in ir and "tuple" not in ir


CARRIED = '''func @f(x, c) -> f64 file "k.py" {
^bb0(%0: f64, %1: bool):
  %2 = tuple %0, %0 {shape = [2]} : vec<f64, 2>
  %3 = tuple %2, %0 : tuple<vec<f64, 2>, f64>
  br ^bb1(%3)
^bb1(%4: tuple<vec<f64, 2>, f64>):
  cbr %1, ^bb1(%4), ^bb2()
^bb2():
  %5 = extract %4 {index = 0} : vec<f64, 2>
  %6 = extract %5 {index = 1} : f64
  ret %6
}
'''


def test_vectors_print_as_vec_and_mat_and_the_tuple_that_builds_one_names_its_shape():
    module = parse_module(CARRIED)
    verify_module(module)
    assert print_module(module) == CARRIED
    without_shape = CARRIED.replace(" {shape = [2]}", "")
    with pytest.raises(IRVerificationError, match="its operands make it tuple<f64, f64>"):
        verify_module(parse_module(without_shape))


def test_split_tuples_gives_each_element_of_a_nested_tuple_its_own_block_parameter():
    module = parse_module(CARRIED)
    run_passes(module, ["split-tuples"], verify=True)
    assert print_module(module) == '''func @f(x, c) -> f64 file "k.py" {
^bb0(%0: f64, %1: bool):
  %2 = tuple %0, %0 {shape = [2]} : vec<f64, 2>
  %3 = tuple %2, %0 : tuple<vec<f64, 2>, f64>
  br ^bb1(%0, %0, %0)
^bb1(%4: f64, %5: f64, %6: f64):
  %7 = tuple %4, %5 {shape = [2]} : vec<f64, 2>
  %8 = tuple %7, %6 : tuple<vec<f64, 2>, f64>
  %9 = extract %8 {index = 0} : vec<f64, 2>
  %10 = extract %8 {index = 1} : f64
  %11 = extract %9 {index = 0} : f64
  %12 = extract %9 {index = 1} : f64
  cbr %1, ^bb1(%11, %12, %10), ^bb2()
^bb2():
  %13 = extract %8 {index = 0} : vec<f64, 2>
  %14 = extract %13 {index = 1} : f64
  ret %14
}
'''


def doubled(make):
    @kk.kernel
    def double(out):
        kk.store(out, 0, make(1.0) * 2.0)
    return double


def test_kernels_that_differ_only_in_the_shape_of_a_vector_are_compiled_apart(backend):
    """The same source, the same argument types: the vector's constructor, captured, tells
    the two apart (in the disk cache too)."""
    for make, size in ((kk.vec2, 2), (kk.vec4, 4)):
        out = kk.zeros(backend, np.float64, (1, size))
        launch(backend, doubled(make), out, ndrange=1)
        np.testing.assert_array_equal(kk.to_numpy(out), np.full((1, size), 2.0))


# --- arrays --------------------------------------------------------------------------------


@kk.kernel
def transform_grid(out, grid, mats: kk.Const):
    i, j = kk.index(kk.Global, kk.NTuple)
    m = kk.load_mat22(mats, i)
    v = kk.load_vec2(grid, i, j)
    kk.store(out, (i, j), m @ v)
    kk.store(out, (i, j, 2), kk.dot(v, v))


@kk.kernel
def write_matrices(out):
    i = kk.index(kk.Global)
    m = kk.mat22(kk.vec2(i, 1), kk.vec2(2, 3))   # from its rows
    kk.store(out, i, kk.transpose(m) * 1.0)


def test_load_and_store_along_trailing_axes(backend):
    grid = np.random.default_rng(2).uniform(-1, 1, (4, 2, 2))
    mats = np.random.default_rng(3).uniform(-1, 1, (4, 2, 2))
    out = kk.zeros(backend, np.float64, (4, 2, 3))
    transform_grid(backend, (2, 2))(out, kk.to_backend(backend, grid),
                                    kk.to_backend(backend, mats), ndrange=(4, 2))
    kk.synchronize(backend)
    result = kk.to_numpy(out)
    np.testing.assert_allclose(result[..., :2], np.einsum("irc,ijc->ijr", mats, grid),
                               rtol=1e-14)
    np.testing.assert_allclose(result[..., 2], np.sum(grid * grid, axis=-1), rtol=1e-14)

    matrices = kk.zeros(backend, np.float32, (N, 2, 2))
    launch(backend, write_matrices, matrices)
    expected = np.array([[[i, 2], [1, 3]] for i in range(N)], dtype=np.float32)
    np.testing.assert_array_equal(kk.to_numpy(matrices), expected)


def test_the_host_functions_compute_with_numpy():
    v = kk.vec3(1.0, 2.0, 2.0)
    assert isinstance(v, np.ndarray) and v.shape == (3,)
    assert kk.length(v) == 3.0
    np.testing.assert_array_equal(kk.normalize(kk.vec2(0.0, 0.0)), [0.0, 0.0])
    np.testing.assert_array_equal(kk.cross(kk.vec3(1, 0, 0), kk.vec3(0, 1, 0)), [0, 0, 1])
    m = kk.mat22(1, 2, 3, 4)
    np.testing.assert_array_equal(kk.transpose(m), [[1, 3], [2, 4]])
    np.testing.assert_array_equal(kk.mat22(kk.vec2(1, 2), kk.vec2(3, 4)), m)
    a = np.zeros((2, 3))
    kk.store(a, 1, kk.vec3(4, 5, 6))
    np.testing.assert_array_equal(kk.load_vec3(a, 1), [4, 5, 6])


def test_the_host_loads_and_stores_at_the_indices_a_kernel_takes():
    """Integers and tuples of them, in order, as many as the axes before the trailing."""
    grid = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_array_equal(kk.load_vec4(grid, (1,), 2), grid[1, 2])
    kk.store(grid, (0, 1, 3), 0.5)
    assert grid[0, 1, 3] == 0.5
    with pytest.raises(IndexError, match="needs 2 indices before the last axis, got 1"):
        kk.load_vec4(grid, 1)
    with pytest.raises(IndexError, match="needs 1 indices before the last two axes, got 2"):
        kk.store(grid, (0, 1), kk.mat22(1.0))


# --- derivatives ---------------------------------------------------------------------------


def spring_force(p, q, k):
    d = p - q
    return k * (kk.length(d) - 0.5) * kk.normalize(d)


@kk.kernel
def springs(energy, pos, k):
    i = kk.index(kk.Global)
    p = kk.load_vec3(pos, i)
    force = kk.vec3(0.0, 0.0, 0.0)
    for j in range(pos.shape[0]):
        if j != i:
            force = force + spring_force(p, kk.load_vec3(pos, j), k)
    shear = kk.mat33(1.0, 0.5, 0.0, 0.0, 1.0, 0.25, 0.0, 0.0, 2.0)
    energy[i] = kk.dot(shear @ force, force) + kk.cross(p, force)[1]


def test_derivatives_through_vector_code_match_finite_differences(backend):
    """Reverse and forward mode through vectors in a loop, a branch, a device function,
    @, cross, length and normalize."""
    rng = np.random.default_rng(4)
    n = 6
    pos, seed, tangent = rng.uniform(-1, 1, (n, 3)), rng.uniform(-1, 1, n), \
        rng.uniform(-1, 1, (n, 3))
    energy, d_energy = kk.zeros(backend, np.float64, n), kk.to_backend(backend, seed.copy())
    d_pos = kk.zeros(backend, np.float64, (n, 3))
    result = autodiff(Reverse, springs(backend, 2), Duplicated(energy, d_energy),
                      Duplicated(kk.to_backend(backend, pos), d_pos), Active(1.5), ndrange=n)
    t_energy = kk.zeros(backend, np.float64, n)
    autodiff(Forward, springs(backend, 2), Duplicated(kk.zeros(backend, np.float64, n),
                                                      t_energy),
             Duplicated(kk.to_backend(backend, pos), kk.to_backend(backend, tangent)), 1.5,
             ndrange=n)
    kk.synchronize(backend)

    def loss(x, k=1.5):
        out = kk.zeros(backend, np.float64, n)
        launch(backend, springs, out, kk.to_backend(backend, x), k, ndrange=n)
        return kk.to_numpy(out)

    h = 1e-6
    numeric = np.zeros_like(pos)
    for index in np.ndindex(pos.shape):
        up, down = pos.copy(), pos.copy()
        up[index] += h
        down[index] -= h
        numeric[index] = seed @ (loss(up) - loss(down)) / (2 * h)
    np.testing.assert_allclose(kk.to_numpy(d_pos), numeric, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(result[2], seed @ (loss(pos, 1.5 + h) - loss(pos, 1.5 - h)) /
                               (2 * h), rtol=1e-6)
    np.testing.assert_allclose(kk.to_numpy(t_energy),
                               (loss(pos + h * tangent) - loss(pos - h * tangent)) / (2 * h),
                               rtol=1e-6, atol=1e-7)


@kk.kernel
def lengths_and_directions(out, pos):
    i = kk.index(kk.Global)
    v = kk.load_vec3(pos, i)
    kk.store(out, i, kk.normalize(v) + kk.length(v))


def test_length_and_normalize_have_the_derivative_zero_at_the_zero_vector(backend):
    """Not the NaN of sqrt's infinite derivative at 0 times 0, in either mode; elsewhere
    their derivatives. Each output's adjoint is 1, and so is each input's tangent."""
    pos = np.array([[0.0, 0.0, 0.0], [1.0, 2.0, 2.0]])
    d_pos = kk.zeros(backend, np.float64, (2, 3))
    autodiff(Reverse, lengths_and_directions(backend, 2),
             Duplicated(kk.zeros(backend, np.float64, (2, 3)), kk.ones(backend, np.float64,
                                                                       (2, 3))),
             Duplicated(kk.to_backend(backend, pos), d_pos), ndrange=2)
    tangents = kk.zeros(backend, np.float64, (2, 3))
    autodiff(Forward, lengths_and_directions(backend, 2),
             Duplicated(kk.zeros(backend, np.float64, (2, 3)), tangents),
             Duplicated(kk.to_backend(backend, pos), kk.ones(backend, np.float64, (2, 3))),
             ndrange=2)
    kk.synchronize(backend)
    size = np.linalg.norm(pos[1])
    direction = pos[1] / size
    jacobian = (np.eye(3) - np.outer(direction, direction)) / size + direction  # d out_j / d v_k
    np.testing.assert_allclose(kk.to_numpy(d_pos), [[0, 0, 0], jacobian.sum(axis=0)],
                               rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(kk.to_numpy(tangents), [[0, 0, 0], jacobian.sum(axis=1)],
                               rtol=1e-14, atol=1e-15)


# --- errors --------------------------------------------------------------------------------


@kk.kernel
def adds_different_shapes(out):
    i = kk.index(kk.Global)
    v = kk.vec3(1.0, 2.0, 3.0) + kk.vec2(1.0, 2.0)
    out[i] = v[0]


@kk.kernel
def multiplies_matrix_by_vector_with_star(out):
    i = kk.index(kk.Global)
    v = kk.mat22(1.0) * kk.vec2(1.0, 2.0)
    out[i] = v[0]


@kk.kernel
def builds_with_two_numbers(out):
    i = kk.index(kk.Global)
    v = kk.vec3(1.0, 2.0)
    out[i] = v[0]


@kk.kernel
def crosses_2_vectors(out):
    i = kk.index(kk.Global)
    v = kk.cross(kk.vec2(1.0, 2.0), kk.vec2(1.0, 2.0))
    out[i] = v[0]


@kk.kernel
def indexes_past_the_end(out):
    i = kk.index(kk.Global)
    out[i] = kk.vec2(1.0, 2.0)[2]


@kk.kernel
def stores_into_const(out: kk.Const):
    i = kk.index(kk.Global)
    kk.store(out, i, kk.vec2(1.0, 2.0))


@kk.kernel
def negates_bools(out):
    i = kk.index(kk.Global)
    v = kk.vec2(1, 0, dtype=np.bool_)
    kk.store(out, i, -v)


@kk.kernel
def stores_a_number_with_too_few_indices(out):
    kk.store(out, 0, 1.0)


@pytest.mark.parametrize("kernel, line, message", [
    (adds_different_shapes, "v = kk.vec3(1.0, 2.0, 3.0) + kk.vec2", "the shapes differ"),
    (multiplies_matrix_by_vector_with_star, "v = kk.mat22(1.0) * kk.vec2",
     "use @ for the matrix product"),
    (builds_with_two_numbers, "v = kk.vec3(1.0, 2.0)", "takes 1 or 3 numbers, got 2"),
    (crosses_2_vectors, "v = kk.cross(kk.vec2", "needs a vector of 3"),
    (indexes_past_the_end, "out[i] = kk.vec2(1.0, 2.0)[2]", "out of range"),
    (stores_into_const, "kk.store(out, i, kk.vec2", "kk.Const"),
    (negates_bools, "kk.store(out, i, -v)", "a vector of bools cannot be negated"),
    (stores_a_number_with_too_few_indices, "kk.store(out, 0, 1.0)",
     "kk.store on a 2-D array needs 2 indices, got 1"),
])
def test_what_vectors_cannot_do_is_an_error_at_the_line(backend, kernel, line, message):
    with pytest.raises(kk.CompileError) as info:
        launch(backend, kernel, kk.zeros(backend, np.float64, (N, 2)), ndrange=N)
    assert message in str(info.value)
    assert_points_at(info.value, kernel.name, line)


@kk.kernel
def matrix_rows(out, mats: kk.Const):
    i = kk.index(kk.Global)
    m = kk.load_mat33(mats, i)
    first, second, third = m
    total = kk.vec3(0.0)
    for row in m:
        total = total + row
    kk.store(out, i, total * len(m) + second - first + third * 0.0)


def test_a_matrix_is_a_sequence_of_rows_for_len_unpacking_and_for_loops(backend):
    mats = np.random.default_rng(5).uniform(-1, 1, (N, 3, 3))
    out = kk.zeros(backend, np.float64, (N, 3))
    launch(backend, matrix_rows, out, kk.to_backend(backend, mats))
    expected = [3 * sum(m) + m[1] - m[0] for m in mats]   # NumPy iterates rows too
    np.testing.assert_allclose(kk.to_numpy(out), expected, rtol=1e-14)
