"""Linear algebra of small matrices in kernels: `kk.determinant`, `kk.inverse`,
`kk.trace`, `kk.diag`, `kk.identity`, `kk.outer`, `kk.skew` and `kk.ddot`, against NumPy
(and bit for bit against their host versions, which compute the same operations), their
derivatives against central finite differences, and the errors for what they refuse."""
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


def host_algebra(mats, quads):
    inverses = np.zeros((N, 3, 3, 3))
    products = np.zeros((N, 2, 3, 3))
    scalars = np.zeros((N, 3))
    for i, (m, q) in enumerate(zip(mats, quads)):
        inverses[i, 0] = kk.inverse(m)
        inverses[i, 1, :2, :2] = kk.inverse(m[:2, :2]) @ np.eye(2)
        inverses[i, 2, 0] = kk.inverse(q)[1, :3]
        products[i, 0] = kk.outer(m[0], m[1]) + kk.skew(m[2])
        products[i, 1] = kk.diag(kk.diag(m)) + kk.identity(3, dtype=np.float32)
        scalars[i] = [kk.determinant(m), kk.determinant(q),
                      kk.trace(m) + kk.ddot(m, q[0, 0] * m)]
    return inverses, products, scalars


@kk.kernel
def algebra(inverses, products, scalars, mats: kk.Const, quads: kk.Const):
    i = kk.index(kk.Global)
    m = kk.load_mat33(mats, i)
    q = kk.load_mat44(quads, i)
    kk.store(inverses, (i, 0), kk.inverse(m))
    inverse2 = kk.inverse(kk.mat22(m[0, 0], m[0, 1], m[1, 0], m[1, 1])) @ kk.identity(2)
    for r in range(2):
        for c in range(2):
            inverses[i, 1, r, c] = inverse2[r, c]
    row = kk.inverse(q)[1]
    for c in range(3):
        inverses[i, 2, 0, c] = row[c]
    kk.store(products, (i, 0), kk.outer(m[0], m[1]) + kk.skew(m[2]))
    kk.store(products, (i, 1), kk.diag(kk.diag(m)) + kk.identity(3, dtype=np.float32))
    scalars[i, 0] = kk.determinant(m)
    scalars[i, 1] = kk.determinant(q)
    scalars[i, 2] = kk.trace(m) + kk.ddot(m, q[0, 0] * m)


def test_the_functions_match_numpy_and_their_host_versions_bit_for_bit(backend):
    rng = np.random.default_rng(0)
    mats, quads = rng.uniform(-1, 1, (N, 3, 3)), rng.uniform(-1, 1, (N, 4, 4))
    inverses = kk.zeros(backend, np.float64, (N, 3, 3, 3))
    products = kk.zeros(backend, np.float64, (N, 2, 3, 3))
    scalars = kk.zeros(backend, np.float64, (N, 3))
    launch(backend, algebra, inverses, products, scalars, kk.to_backend(backend, mats),
           kk.to_backend(backend, quads))
    expected = host_algebra(mats, quads)
    for got, want in zip((inverses, products, scalars), expected):
        np.testing.assert_array_equal(kk.to_numpy(got), want)
    np.testing.assert_allclose(kk.to_numpy(inverses)[:, 0], np.linalg.inv(mats), rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_allclose(kk.to_numpy(scalars)[:, 0], np.linalg.det(mats), rtol=1e-12)
    np.testing.assert_allclose(kk.to_numpy(scalars)[:, 1], np.linalg.det(quads), rtol=1e-12)
    np.testing.assert_allclose(
        kk.to_numpy(scalars)[:, 2],
        np.trace(mats, axis1=1, axis2=2) + np.einsum("nij,nij->n", mats, mats) * quads[:, 0, 0],
        rtol=1e-12)
    assert np.array_equal(kk.skew([1.0, 2.0, 3.0]) @ [4.0, 5.0, 6.0],
                          np.cross([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]))


@kk.kernel
def energy(out, mats: kk.Const):
    i = kk.index(kk.Global)
    m = kk.load_mat33(mats, i)
    inv = kk.inverse(m)
    out[i] = kk.determinant(m) * kk.trace(inv) + kk.ddot(kk.outer(m[0], m[2]), inv) + \
        kk.dot(kk.skew(m[1]) @ m[2], m[0])


def test_derivatives_match_central_finite_differences(backend):
    rng = np.random.default_rng(1)
    mats = rng.uniform(-1, 1, (N, 3, 3)) + 2 * np.eye(3)
    seed, tangent = rng.uniform(0.5, 1.5, N), rng.uniform(-1, 1, (N, 3, 3))

    def values(at):
        out = kk.zeros(backend, np.float64, N)
        launch(backend, energy, out, kk.to_backend(backend, at))
        return kk.to_numpy(out)

    gradient = kk.zeros(backend, np.float64, (N, 3, 3))
    autodiff(Reverse, energy(backend, 4),
             Duplicated(kk.zeros(backend, np.float64, N), kk.to_backend(backend, seed.copy())),
             Duplicated(kk.to_backend(backend, mats), gradient), ndrange=N)
    t_out = kk.zeros(backend, np.float64, N)
    autodiff(Forward, energy(backend, 4), Duplicated(kk.zeros(backend, np.float64, N), t_out),
             Duplicated(kk.to_backend(backend, mats), kk.to_backend(backend, tangent)),
             ndrange=N)
    kk.synchronize(backend)
    h = 1e-6
    numeric = np.zeros_like(mats)
    for index in np.ndindex(3, 3):
        step = np.zeros((3, 3))
        step[index] = h
        numeric[(slice(None), *index)] = seed * (values(mats + step) - values(mats - step)) / \
            (2 * h)
    np.testing.assert_allclose(kk.to_numpy(gradient), numeric, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(kk.to_numpy(t_out), (values(mats + h * tangent) -
                                                    values(mats - h * tangent)) / (2 * h),
                               rtol=1e-6, atol=1e-8)


@kk.kernel
def inverts_a_row(out):
    i = kk.index(kk.Global)
    out[i] = kk.inverse(kk.vec3(1.0, 2.0, 3.0))[0]


@kk.kernel
def makes_a_large_identity(out):
    i = kk.index(kk.Global)
    out[i] = kk.identity(5)[0, 0]


@kk.kernel
def ddots_different_shapes(out):
    i = kk.index(kk.Global)
    out[i] = kk.ddot(kk.mat22(1.0), kk.mat33(1.0))


@pytest.mark.parametrize("kernel, line, message", [
    (inverts_a_row, "out[i] = kk.inverse(kk.vec3(1.0, 2.0, 3.0))[0]", "needs a matrix"),
    (makes_a_large_identity, "out[i] = kk.identity(5)[0, 0]", "n of 2, 3 or 4"),
    (ddots_different_shapes, "out[i] = kk.ddot(kk.mat22(1.0), kk.mat33(1.0))",
     "different shapes"),
])
def test_what_they_refuse_is_an_error_at_the_line(backend, kernel, line, message):
    with pytest.raises(kk.CompileError) as info:
        launch(backend, kernel, kk.zeros(backend, np.float64, N))
    assert message in str(info.value)
    assert_points_at(info.value, kernel.name, line)
