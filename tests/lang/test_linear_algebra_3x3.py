"""`kk.svd3`, `kk.qr3` and `kk.eig3` in kernels on every backend: their factorizations
against NumPy's (`np.linalg.svd`, `qr` and `eigh`), their conventions (rotations, order,
signs), degenerate matrices (zero, rank-deficient, repeated values, diagonal, far from
1 in magnitude), the same bits as the host versions, and reverse-mode derivatives
against central finite differences and the analytic ones."""
import numpy as np
import pytest

import kernelkit as kk
from enzyme_ext import Duplicated, Reverse, autodiff

# The largest error allowed, relative to the largest singular value (or eigenvalue).
TOLERANCE = {np.float64: 1e-12, np.float32: 1e-5}
DTYPES = pytest.mark.parametrize("dtype", [np.float64, np.float32],
                                 ids=lambda d: np.dtype(d).name)


@kk.kernel
def decompose(U, sigma, V, Q, R, E, d, mats: kk.Const, symmetric: kk.Const):
    i = kk.index(kk.Global)
    u, s, v = kk.svd3(kk.load_mat33(mats, i))
    kk.store(U, i, u)
    kk.store(sigma, i, s)
    kk.store(V, i, v)
    q, r = kk.qr3(kk.load_mat33(mats, i))
    kk.store(Q, i, q)
    kk.store(R, i, r)
    e, w = kk.eig3(kk.load_mat33(symmetric, i))
    kk.store(E, i, e)
    kk.store(d, i, w)


def decompositions(backend, mats, symmetric):
    """The kernel's (U, sigma, V, Q, R, E, d) of each matrix, checked to be the host
    versions' bit for bit."""
    n, dtype = len(mats), mats.dtype
    outputs = [kk.zeros(backend, dtype, (n, *shape)) for shape in
               ((3, 3), (3,), (3, 3), (3, 3), (3, 3), (3, 3), (3,))]
    decompose(backend, 4)(*outputs, kk.to_backend(backend, mats),
                          kk.to_backend(backend, symmetric), ndrange=n)
    kk.synchronize(backend)
    outputs = [kk.to_numpy(out) for out in outputs]
    for i, (A, S) in enumerate(zip(mats, symmetric)):
        for kernel, host in zip(outputs, (*kk.svd3(A), *kk.qr3(A), *kk.eig3(S))):
            assert host.dtype == dtype
            np.testing.assert_array_equal(kernel[i], host, err_msg=f"matrix {i}")
            np.testing.assert_array_equal(np.signbit(kernel[i]), np.signbit(host))
    return outputs


def rotation(rng):
    Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    return Q * np.sign(np.linalg.det(Q))


def assert_rotations(M, tolerance):
    identity = np.broadcast_to(np.eye(3), M.shape)
    np.testing.assert_allclose(np.swapaxes(M, 1, 2) @ M, identity, atol=tolerance)
    np.testing.assert_allclose(np.linalg.det(M.astype(np.float64)), 1.0, atol=tolerance)


def norms(mats):
    """The largest singular value of each matrix, 1 for a zero matrix."""
    largest = np.linalg.svd(mats.astype(np.float64), compute_uv=False)[:, 0]
    return np.where(largest > 0, largest, 1.0)


def check_conventions(mats, symmetric, outputs, tolerance):
    """What holds for every matrix: the factorizations, rotations, order and signs."""
    U, sigma, V, Q, R, E, d = (out.astype(np.float64) for out in outputs)
    A, S = mats.astype(np.float64), symmetric.astype(np.float64)
    scale, symmetric_scale = norms(A)[:, None, None], norms(S)[:, None, None]
    np.testing.assert_allclose((U * sigma[:, None, :]) @ np.swapaxes(V, 1, 2) / scale,
                               A / scale, atol=tolerance)
    np.testing.assert_allclose(Q @ R / scale, A / scale, atol=tolerance)
    np.testing.assert_allclose((E * d[:, None, :]) @ np.swapaxes(E, 1, 2) / symmetric_scale,
                               S / symmetric_scale, atol=tolerance)
    for M in (U, V, Q, E):
        assert_rotations(M, tolerance)
    assert np.all(sigma[:, 0] >= sigma[:, 1]) and np.all(sigma[:, 1] >= np.abs(sigma[:, 2]))
    assert np.all(sigma[:, 1] >= 0)
    assert np.all(R[:, 0, 0] >= 0) and np.all(R[:, 1, 1] >= 0)
    assert np.all(R[:, [1, 2, 2], [0, 0, 1]] == 0)
    assert np.all(np.diff(d, axis=1) >= 0)
    np.testing.assert_allclose(np.abs(sigma) / scale[:, 0],
                               np.linalg.svd(A, compute_uv=False) / scale[:, 0], atol=tolerance)
    np.testing.assert_allclose(d / symmetric_scale[:, 0],
                               np.linalg.eigvalsh(S) / symmetric_scale[:, 0], atol=tolerance)
    nonsingular = np.abs(np.linalg.det(A)) > 1e-3 * scale[:, 0, 0] ** 3
    np.testing.assert_array_equal(np.sign(sigma[nonsingular, 2]),
                                  np.sign(np.linalg.det(A[nonsingular])))
    np.testing.assert_array_equal(np.sign(R[nonsingular, 2, 2]),
                                  np.sign(np.linalg.det(A[nonsingular])))


def random_matrices(rng, n, dtype):
    mats = rng.normal(size=(n, 3, 3))
    symmetric = rng.normal(size=(n, 3, 3))
    return mats.astype(dtype), (symmetric + np.swapaxes(symmetric, 1, 2)).astype(dtype)


@DTYPES
def test_random_matrices_factor_with_numpys_values_and_the_stated_conventions(backend, dtype):
    mats, symmetric = random_matrices(np.random.default_rng(0), 64, dtype)
    outputs = decompositions(backend, mats, symmetric)
    check_conventions(mats, symmetric, outputs, TOLERANCE[dtype])


@DTYPES
def test_vectors_are_numpys_up_to_the_sign_of_each_column(backend, dtype):
    mats, symmetric = random_matrices(np.random.default_rng(1), 64, dtype)
    U, sigma, V, Q, R, E, d = decompositions(backend, mats, symmetric)
    A, S = mats.astype(np.float64), symmetric.astype(np.float64)
    U_np, sigma_np, Vt_np = np.linalg.svd(A)
    d_np, E_np = np.linalg.eigh(S)
    # Where two values are close their vectors are ill-conditioned (an error of
    # round-off / gap): compare where the gaps are at least a tenth of the largest.
    separated = np.min(-np.diff(sigma_np, axis=1), axis=1) > 0.1 * sigma_np[:, 0]
    separated_d = np.min(np.diff(d_np, axis=1), axis=1) > 0.1 * np.abs(d_np).max(axis=1)
    assert separated.sum() > 8 and separated_d.sum() > 8
    tolerance = 100 * TOLERANCE[dtype]
    for ours, theirs, chosen in ((U, U_np, separated), (V, np.swapaxes(Vt_np, 1, 2), separated),
                                 (E, E_np, separated_d)):
        overlaps = np.abs(np.swapaxes(ours[chosen], 1, 2).astype(np.float64) @ theirs[chosen])
        np.testing.assert_allclose(overlaps, np.broadcast_to(np.eye(3), overlaps.shape),
                                   atol=tolerance)
    # NumPy's QR, with R's diagonal made positive, is ours with R[2, 2] made positive.
    Q_np, R_np = np.linalg.qr(A)
    signs = np.where(np.diagonal(R_np, axis1=1, axis2=2) < 0, -1.0, 1.0)
    ours = np.ones((len(R), 3))
    ours[:, 2] = np.where(R[:, 2, 2] < 0, -1.0, 1.0)
    np.testing.assert_allclose(Q * ours[:, None, :], Q_np * signs[:, None, :], atol=tolerance)
    np.testing.assert_allclose(R * ours[:, :, None], R_np * signs[:, :, None],
                               atol=tolerance * np.abs(R_np).max())


def degenerate_matrices(dtype):
    """Matrices that take the algorithms' edge cases, each with a symmetric one."""
    rng = np.random.default_rng(2)
    first, second = rotation(rng), rotation(rng)
    a, b = rng.normal(size=3), rng.normal(size=3)
    rank_two = rng.normal(size=(3, 3))
    rank_two[:, 2] = rank_two[:, 0] - 2 * rank_two[:, 1]
    huge, tiny = (1e30, 1e-30)
    pairs = [
        (np.zeros((3, 3)), np.zeros((3, 3))),
        (np.eye(3), 3 * np.eye(3)),
        (first, np.diag([3.0, 1.0, 2.0])),                      # all singular values 1
        (np.diag([-2.0, 3.0, 0.5]), np.diag([2.0, 2.0, -1.0])),  # diagonal, already sorted
        (np.diag([1.0, 1.0, -1.0]), np.diag([-1.0, 2.0, -1.0])),
        (np.outer(a, b), np.outer(a, a)),                       # rank one
        (rank_two, first @ np.diag([0.0, 0.0, 1.0]) @ first.T),
        (first @ np.diag([2.0, 2.0, 0.5]) @ second.T, first @ np.diag([1.0, 1.0, 2.0]) @ first.T),
        (first @ np.diag([3.0, 0.7, -0.7]) @ second.T, first @ np.diag([-1.0, 2.0, 2.0]) @ first.T),
        (np.triu(rng.normal(size=(3, 3))), np.diag([1.0, 1.0 + 1e-9, 1.0 - 1e-9])),
        (np.eye(3)[[1, 0, 2]], np.eye(3)[[1, 0, 2]]),           # a reflection
        (huge * rng.normal(size=(3, 3)), huge * (np.outer(a, a) + np.eye(3))),
        (tiny * rng.normal(size=(3, 3)), tiny * (np.outer(b, b) - np.eye(3))),
    ]
    mats, symmetric = (np.array(side).astype(dtype) for side in zip(*pairs))
    return mats, symmetric


@DTYPES
def test_degenerate_matrices_keep_the_conventions(backend, dtype):
    mats, symmetric = degenerate_matrices(dtype)
    outputs = decompositions(backend, mats, symmetric)
    check_conventions(mats, symmetric, outputs, TOLERANCE[dtype])
    U, sigma, V, Q, R, E, d = outputs
    identity = np.eye(3, dtype=dtype)
    for M in (U[0], V[0], Q[0], E[0], U[1], V[1], Q[1], E[1]):   # zero and identity
        np.testing.assert_array_equal(M, identity)
    np.testing.assert_array_equal(sigma[:2], [[0, 0, 0], [1, 1, 1]])
    np.testing.assert_array_equal(d[:2], [[0, 0, 0], [3, 3, 3]])
    np.testing.assert_array_equal(R[0], np.zeros((3, 3)))
    # A diagonal matrix is decomposed without rounding: its elements, sorted.
    np.testing.assert_array_equal(sigma[3], [3.0, 2.0, -0.5])
    np.testing.assert_array_equal(d[3], [-1.0, 2.0, 2.0])
    np.testing.assert_array_equal(sigma[4], [1.0, 1.0, -1.0])
    np.testing.assert_allclose(U[2] @ V[2].T, mats[2], atol=TOLERANCE[dtype])
    assert abs(sigma[5, 1]) <= TOLERANCE[dtype] * sigma[5, 0]          # rank one
    assert abs(sigma[6, 2]) <= TOLERANCE[dtype] * sigma[6, 0]          # rank two


def test_integers_compute_in_float64():
    A = np.array([[2, 0, 0], [0, -3, 0], [0, 0, 1]])
    U, sigma, V = kk.svd3(A)
    Q, R = kk.qr3(A)
    E, d = kk.eig3(A)
    assert sigma.dtype == R.dtype == d.dtype == np.float64
    np.testing.assert_array_equal(sigma, [3.0, 2.0, -1.0])
    np.testing.assert_array_equal(d, [-3.0, 1.0, 2.0])


# Losses of each decomposition that do not depend on the signs a convention chooses
# (U diag(w) V^T takes a column's sign in both U and V), then a function of the singular
# values or eigenvalues alone, unchanged by their order, as elastic energies are.

@kk.kernel
def svd3_losses(out, mats: kk.Const, weights: kk.Const):
    i = kk.index(kk.Global)
    W = kk.load_mat33(weights, i)
    u, s, v = kk.svd3(kk.load_mat33(mats, i))
    out[i, 0] = kk.dot(s, W[0]) + kk.ddot(u @ kk.diag(W[1]) @ kk.transpose(v), W)
    out[i, 1] = kk.dot(s - 1.0, s - 1.0) + s[0] + s[1] + s[2]


@kk.kernel
def qr3_losses(out, mats: kk.Const, weights: kk.Const):
    i = kk.index(kk.Global)
    W = kk.load_mat33(weights, i)
    q, r = kk.qr3(kk.load_mat33(mats, i))
    out[i, 0] = kk.ddot(q, W) + kk.ddot(r, kk.transpose(W))
    out[i, 1] = r[0, 0] * r[1, 1] * r[2, 2]


@kk.kernel
def eig3_losses(out, mats: kk.Const, weights: kk.Const):
    i = kk.index(kk.Global)
    A = kk.load_mat33(mats, i)
    W = kk.load_mat33(weights, i)
    e, d = kk.eig3(A + kk.transpose(A))
    out[i, 0] = kk.dot(d, W[2]) + kk.ddot(e @ kk.diag(W[1]) @ kk.transpose(e), W)
    out[i, 1] = kk.dot(d, d) + kk.sin(d[0]) + kk.sin(d[1]) + kk.sin(d[2])


def reverse_gradient(backend, kernel, mats, weights, loss):
    """The derivative of one of the kernel's two losses with respect to each matrix, in
    reverse mode."""
    n = len(mats)
    seed = np.zeros((n, 2))
    seed[:, loss] = 1.0
    gradient = kk.zeros(backend, np.float64, (n, 3, 3))
    autodiff(Reverse, kernel(backend, 4),
             Duplicated(kk.zeros(backend, np.float64, (n, 2)), kk.to_backend(backend, seed)),
             Duplicated(kk.to_backend(backend, mats), gradient),
             Duplicated(kk.to_backend(backend, weights), kk.zeros(backend, np.float64, (n, 3, 3))),
             ndrange=n)
    kk.synchronize(backend)
    return kk.to_numpy(gradient)


@pytest.mark.parametrize("kernel", [svd3_losses, qr3_losses, eig3_losses],
                         ids=lambda k: k.name.split("_")[0])
def test_reverse_derivatives_match_central_finite_differences(backend, kernel):
    rng = np.random.default_rng(3)
    n = 8
    # Generic matrices: singular values and eigenvalues well apart, one determinant < 0.
    mats = np.array([rotation(rng) @ np.diag(values * rng.uniform(0.9, 1.1, 3)) @
                     rotation(rng).T for values in
                     ([3.0, 1.5, 0.5], [2.0, 1.0, -0.4]) * (n // 2)])
    weights = rng.uniform(-1, 1, (n, 3, 3))
    gradients = [reverse_gradient(backend, kernel, mats, weights, loss) for loss in range(2)]

    def values(at):
        out = kk.zeros(backend, np.float64, (n, 2))
        kernel(backend, 4)(out, kk.to_backend(backend, at), kk.to_backend(backend, weights),
                           ndrange=n)
        kk.synchronize(backend)
        return kk.to_numpy(out)

    h = 1e-6
    numeric = np.zeros((n, 2, 3, 3))
    for index in np.ndindex(3, 3):
        step = np.zeros((3, 3))
        step[index] = h
        numeric[(slice(None), slice(None), *index)] = (values(mats + step) -
                                                       values(mats - step)) / (2 * h)
    for loss, gradient in enumerate(gradients):
        np.testing.assert_allclose(gradient, numeric[:, loss], rtol=1e-6, atol=1e-7,
                                   err_msg=f"loss {loss}")


def test_energies_of_the_values_have_their_analytic_derivatives_where_values_repeat(backend):
    rng = np.random.default_rng(4)
    spectra = ([1.0, 1.0, 1.0], [2.0, 2.0, 0.5], [3.0, 0.7, 0.7], [1.5, 1.5, -1.5])
    mats = np.array([np.eye(3)] + [rotation(rng) @ np.diag(values) @ rotation(rng).T
                                   for values in spectra for _ in range(3)])
    weights = np.zeros_like(mats)
    for A, got in zip(mats, reverse_gradient(backend, svd3_losses, mats, weights, 1)):
        U, sigma, V = kk.svd3(A)     # d(sum f(sigma)) = U diag(f'(sigma)) V^T
        np.testing.assert_allclose(got, U @ np.diag(2 * (sigma - 1) + 1) @ V.T, atol=1e-12)
    for A, got in zip(mats, reverse_gradient(backend, eig3_losses, mats, weights, 1)):
        E, d = kk.eig3(A + A.T)      # of the symmetric part's eigenvalues, symmetrized
        expected = E @ np.diag(2 * d + np.cos(d)) @ E.T
        np.testing.assert_allclose(got, expected + expected.T, atol=1e-12)


@kk.kernel
def decomposes_a_2x2(out):
    i = kk.index(kk.Global)
    u, s, v = kk.svd3(kk.mat22(1.0, 2.0, 3.0, 4.0))
    out[i] = s[0]


def test_a_matrix_that_is_not_3x3_is_an_error(backend):
    with pytest.raises(kk.CompileError) as info:
        decomposes_a_2x2(backend, 4)(kk.zeros(backend, np.float64, 4), ndrange=4)
    assert "decomposes_a_2x2" in str(info.value)
    with pytest.raises((TypeError, IndexError)):
        kk.qr3(np.eye(4))
