"""`kk.svd3`, `kk.qr3` and `kk.eig3`: the singular value, QR and symmetric eigenvalue
decompositions of 3x3 matrices, the ones physics kernels use (polar decompositions,
principal stretches and stresses, orthonormal frames).

    U, sigma, V = kk.svd3(F)     # F = U @ kk.diag(sigma) @ V.T, U and V rotations
    Q, R = kk.qr3(F)             # F = Q @ R, Q a rotation, R upper triangular
    Q, d = kk.eig3(S)            # S = Q @ kk.diag(d) @ Q.T, d ascending, Q a rotation

Each is a plain Python function written in the kernel language, as `kk.clamp` is: a
kernel compiles it as a device function, so automatic differentiation sees the
operations it is made of, and on the host it runs as Python on NumPy scalars. It uses
`+ - * /`, `kk.sqrt`, comparisons and selects only, in a fixed order, each rounded as
IEEE 754 defines it, so every backend and the host give the same bits. There is no
iteration to a tolerance: the loops have constant trip counts.

How they compute:

- `eig3` runs cyclic Jacobi rotations on the symmetric part of A: each rotation zeroes
  one off-diagonal element exactly (the smaller of the two angles that do), and the
  product of the rotations is Q. A 3x3 converges quadratically; the fixed count of
  sweeps (`JACOBI_SWEEPS`) takes any matrix to float64 round-off.
- `qr3` applies Givens rotations to A, zeroing A[1, 0], A[2, 0] and A[2, 1] in turn; Q is
  the product of their transposes.
- `svd3` finds V by the Jacobi rotations that diagonalize A^T A, applied to A's columns
  instead (one-sided Jacobi: each rotation computed from the two columns as they are
  then, so that B = A V has orthogonal columns to round-off relative to each column's
  own length), sorts B's columns by decreasing length, and factors B = U R by the same
  Givens rotations as `qr3`: R is then diagonal to round-off and is sigma. This is the
  plan of McAdams et al., "Computing the singular value decomposition of 3x3 matrices
  with minimal branching and elementary floating point operations" (2011), with exact
  rotations instead of their approximate ones and B's columns instead of A^T A, which
  would lose the singular vectors of singular values below sqrt(round-off) times the
  largest. Sigma is accurate to round-off relative to the largest singular value.

A rotation whose 2x2 block is a repeated value to round-off is not made (see
`_jacobi_rotation`): its angle would come from the round-off, and its derivatives would
be of the round-off's size inverted. So a rotation or the identity keeps V the identity,
and a function of the values alone has its analytic derivative there.

A matrix whose largest element is outside [UNSCALED_BELOW, UNSCALED_ABOVE] is divided by
that element first (and the results multiplied back), so that squares and fourth
powers neither overflow nor underflow, in float32 too; other matrices are decomposed as
they are, so a diagonal matrix gives its own elements exactly. Float16 is computed in
float16, whose fourth powers overflow above 16: convert such matrices to float32 first.

This module knows the kernel language only: nothing here is backend-specific, and the
frontend treats these functions as any device function."""
from __future__ import annotations

from .math import sqrt
from .vectors import mat33, vec3

__all__ = ["svd3", "qr3", "eig3"]

# Jacobi sweeps (three rotations each) after the first rotation. A 3x3 converges
# quadratically: four sweeps reach float64 round-off from any start; one more is margin.
JACOBI_SWEEPS = 5
# A difference of diagonal elements and an off-diagonal element both below this many
# units in the last place of the diagonal elements are round-off: no rotation is made.
NEGLIGIBLE_ULPS = 16
# The largest element of a matrix decomposed without scaling: in float32 too, the fourth
# powers the Jacobi rotations of A^T A form stay normal numbers.
UNSCALED_BELOW = 2.0 ** -24
UNSCALED_ABOVE = 2.0 ** 24


def svd3(A):
    """The singular value decomposition of a 3x3 matrix: `U, sigma, V = kk.svd3(A)` with
    `A == U @ kk.diag(sigma) @ kk.transpose(V)` to round-off, as Warp's `wp.svd3`:

    - U and V are rotations (orthogonal, determinant +1), whose columns are the left and
      right singular vectors;
    - sigma (a vector) is sorted by decreasing magnitude, sigma[0] >= sigma[1] >=
      |sigma[2]|; sigma[0] and sigma[1] are >= 0, and sigma[2] has the sign of
      `kk.determinant(A)` (so `abs(sigma)` are NumPy's singular values, and
      `U @ kk.transpose(V)` is the rotation of A's polar decomposition).

    Integers compute in float64. The singular vectors of a repeated singular value are
    not unique: U and V are then some valid pair (for the identity, the identity).

    Derivatives: where the singular values are distinct, those of sigma, U and V are
    the analytic ones (U's and V's grow as 1 / the difference of two singular values).
    A function of sigma that does not depend on its order, such as an elastic energy
    sum(f(sigma)), has its analytic derivative U diag(f'(sigma)) V^T also where values
    repeat (at a rotation, for one); a function of the singular vectors of a repeated
    value, or of one of two equal values, has none, and gets a finite but arbitrary
    one."""
    A, largest, scaled = _for_decomposing(A)
    B, V = _orthogonalize_columns(A)
    # The longest column of B first: the Givens rotations then leave R diagonal.
    _, B, V = _sort_by_magnitude(_column_lengths(B), B, V)
    U, R = _givens_qr(B)
    # Round-off can leave two nearly equal values out of order, and R[2, 2] may be the
    # negative one that moved: sort by magnitude, then keep the sign in sigma[2].
    sigma, U, V = _sort_by_magnitude(vec3(R[0, 0], R[1, 1], R[2, 2]), U, V)
    for i in range(2):
        if sigma[i] < 0.0:
            sigma[i] = -sigma[i]
            sigma[2] = -sigma[2]
            for k in range(3):
                U[k, i] = -U[k, i]
                U[k, 2] = -U[k, 2]
    if scaled:
        sigma = sigma * largest
    return U, sigma, V


def qr3(A):
    """The QR decomposition of a 3x3 matrix by Givens rotations: `Q, R = kk.qr3(A)` with
    `A == Q @ R` to round-off, Q a rotation (orthogonal, determinant +1, as Warp's
    `wp.qr3`) and R upper triangular (its elements below the diagonal exactly 0), with
    R[0, 0] >= 0 and R[1, 1] >= 0; R[2, 2] has the sign of `kk.determinant(A)`. NumPy's
    `np.linalg.qr` chooses the signs otherwise: where A has full rank the two agree
    after making R's diagonal positive (multiplying a column of Q and that row of R by
    -1). Integers compute in float64. Differentiable where A has full rank; the
    derivatives grow as 1 / R[0, 0] and 1 / R[1, 1], and where A has not, Q is not
    unique and its derivatives are arbitrary."""
    A, largest, scaled = _for_decomposing(A)
    Q, R = _givens_qr(A)
    if scaled:
        R = R * largest
    return Q, R


def eig3(A):
    """The eigendecomposition of a symmetric 3x3 matrix by Jacobi rotations:
    `Q, d = kk.eig3(A)` with `A == Q @ kk.diag(d) @ kk.transpose(Q)` to round-off, the
    eigenvalues d sorted ascending (as NumPy's `np.linalg.eigh`), and Q a rotation
    (orthogonal, determinant +1) whose columns are the eigenvectors, each with a sign of
    its own choosing. What is decomposed is `(A + A^T) / 2`, which is A for a symmetric
    A. Integers compute in float64.

    Derivatives, as for `kk.svd3`: the analytic ones where the eigenvalues are distinct
    (Q's grow as 1 / the difference of two eigenvalues); for a function of d that does
    not depend on its order, Q diag(f'(d)) Q^T (symmetrized, as A enters through its
    symmetric part) also where eigenvalues repeat; arbitrary for the eigenvectors of a
    repeated eigenvalue."""
    A, largest, scaled = _for_decomposing(A)
    S = mat33(A)
    for r in range(3):
        for c in range(3):
            S[r, c] = (A[r, c] + A[c, r]) * 0.5
    Q, D = _jacobi_eigen(S)
    d = vec3(D[0, 0], D[1, 1], D[2, 2])
    for i, j in ((0, 1), (0, 2), (1, 2)):
        if d[i] > d[j]:
            d[i], d[j] = d[j], d[i]
            for k in range(3):
                Q[k, i], Q[k, j] = Q[k, j], -Q[k, i]
    if scaled:
        d = d * largest
    return Q, d


# -- the steps ---------------------------------------------------------------------------------
# A step that changes a matrix or vector returns it changed: in a kernel a new value, on
# the host the NumPy array it was given, changed in place (always one the decomposition
# made itself, never the caller's).

def _for_decomposing(A):
    """A copy of A in its float type (float64 for integers), divided by its largest
    element where that is outside [UNSCALED_BELOW, UNSCALED_ABOVE]; that element; and
    whether A was divided by it."""
    A = mat33(A[0], A[1], A[2]) * 1.0   # three rows of three: a 3x3 matrix
    largest = abs(A[0, 0])
    for r in range(3):
        for c in range(3):
            largest = max(largest, abs(A[r, c]))
    scaled = largest > UNSCALED_ABOVE or (largest < UNSCALED_BELOW and largest > 0.0)
    if scaled:
        A = A / largest
    return A, largest, scaled


def _jacobi_eigen(S):
    """V and V^T S V for a symmetric S: V the product of Jacobi rotations, the second
    diagonal to round-off. The first rotation makes V; the sweeps go on in cyclic order."""
    c, s, t = _jacobi_rotation(S[0, 0], S[1, 1], S[0, 1])
    S = _rotate_symmetric(S, 0, 1, 2, c, s, t)
    V = mat33(c, s, 0.0, -s, c, 0.0, 0.0, 0.0, 1.0)
    for _ in range(JACOBI_SWEEPS):
        for p, q, r in ((0, 2, 1), (1, 2, 0), (0, 1, 2)):
            c, s, t = _jacobi_rotation(S[p, p], S[q, q], S[p, q])
            S = _rotate_symmetric(S, p, q, r, c, s, t)
            V = _rotate_columns(V, p, q, c, s)
    return V, S


def _orthogonalize_columns(A):
    """B = A V with orthogonal columns and V: the Jacobi rotations of A^T A applied to A's
    columns (one-sided Jacobi), each computed from the dot products of the two columns
    as they are then. Rotating A^T A itself would lose the directions of singular values
    below sqrt(round-off) of the largest; the columns' own products keep them."""
    c, s, _ = _column_rotation(A, 0, 1)
    B = _rotate_columns(A, 0, 1, c, s)
    V = mat33(c, s, 0.0, -s, c, 0.0, 0.0, 0.0, 1.0)
    for _ in range(JACOBI_SWEEPS):
        for p, q in ((0, 2), (1, 2), (0, 1)):
            c, s, _ = _column_rotation(B, p, q)
            B = _rotate_columns(B, p, q, c, s)
            V = _rotate_columns(V, p, q, c, s)
    return B, V


def _column_rotation(B, p, q):
    """The Jacobi rotation of B^T B's (p, q) element, from columns p and q of B (their
    dot products summed from the first row to the last)."""
    pp, qq, pq = B[0, p] * B[0, p], B[0, q] * B[0, q], B[0, p] * B[0, q]
    for k in range(1, 3):
        pp = pp + B[k, p] * B[k, p]
        qq = qq + B[k, q] * B[k, q]
        pq = pq + B[k, p] * B[k, q]
    return _jacobi_rotation(pp, qq, pq)


def _jacobi_rotation(pp, qq, pq):
    """The cosine c, sine s and tangent t of the rotation J (J[p, p] = J[q, q] = c,
    J[p, q] = s, J[q, p] = -s) for which (J^T S J)[p, q] is 0, where S[p, p], S[q, q] and
    S[p, q] are `pp`, `qq` and `pq`: t is the smaller root of
    t^2 + 2 t (qq - pp) / (2 pq) - 1 = 0, written without dividing by pq (so an element
    that is already 0 gives t = 0) and with |t| <= 1."""
    d = qq - pp
    e = 2.0 * pq
    if d < 0.0:
        e = -e
    # A repeated value, to round-off (d and e below NEGLIGIBLE_ULPS units in the last
    # place of both pp and qq, in their own precision): no rotation. One made from the
    # round-off would do no harm to the values, but its derivatives (as 1 / round-off)
    # would swamp those of everything computed after it.
    small = max(abs(d), abs(e)) * (0.5 / NEGLIGIBLE_ULPS)
    if pp + small == pp and qq + small == qq:
        e = 0.0 * e
    squared = d * d + e * e
    # Where both are 0 (or their squares underflow), t is e / (|d| + 1): 0, or nearly.
    # Taking the square root of 1 there keeps its derivative finite.
    root = sqrt(squared if squared > 0.0 else squared + 1.0)
    t = e / (abs(d) + root)
    c = 1.0 / sqrt(1.0 + t * t)
    return c, t * c, t


def _rotate_symmetric(S, p, q, r, c, s, t):
    """J^T S J for the rotation of `_jacobi_rotation`, with its (p, q) element 0 and the
    diagonal updated by t (Rutishauser's form: S[p, p] - t S[p, q], exact where t is 0)."""
    pq = S[p, q]
    rp, rq = S[r, p], S[r, q]
    S[p, p] = S[p, p] - t * pq
    S[q, q] = S[q, q] + t * pq
    S[p, q] = 0.0
    S[q, p] = 0.0
    S[r, p] = c * rp - s * rq
    S[p, r] = S[r, p]
    S[r, q] = s * rp + c * rq
    S[q, r] = S[r, q]
    return S


def _rotate_columns(M, p, q, c, s):
    """M @ J: columns p and q of M become c m_p - s m_q and s m_p + c m_q."""
    for k in range(3):
        mp, mq = M[k, p], M[k, q]
        M[k, p] = c * mp - s * mq
        M[k, q] = s * mp + c * mq
    return M


def _givens(a, b):
    """The cosine and sine of the rotation that takes (a, b) to (r, 0) with r >= 0; (1, 0)
    where a and b are 0 (or their squares underflow)."""
    squared = a * a + b * b
    positive = squared > 0.0
    r = sqrt(squared if positive else squared + 1.0)
    return (a if positive else a + 1.0) / r, b / r


def _rotate_rows(R, i, j, c, s):
    """G @ R for the Givens rotation G of rows i and j: row i becomes c r_i + s r_j and
    row j c r_j - s r_i, whose element in column i (the one the rotation zeroes) is
    made exactly 0."""
    for k in range(3):
        ri, rj = R[i, k], R[j, k]
        R[i, k] = c * ri + s * rj
        R[j, k] = c * rj - s * ri
    R[j, i] = 0.0
    return R


def _givens_qr(A):
    """Q and R with A = Q R: R = G3 G2 G1 A, zeroing A[1, 0], A[2, 0], A[2, 1] in turn,
    and Q = G1^T G2^T G3^T, made from the first rotation and then rotated as R's rows."""
    c, s = _givens(A[0, 0], A[1, 0])
    R = _rotate_rows(A, 0, 1, c, s)
    Q = mat33(c, -s, 0.0, s, c, 0.0, 0.0, 0.0, 1.0)
    for i, j in ((0, 2), (1, 2)):
        c, s = _givens(R[i, i], R[j, i])
        R = _rotate_rows(R, i, j, c, s)
        Q = _rotate_columns(Q, i, j, c, -s)
    return Q, R


def _column_lengths(M):
    """The squared lengths of M's columns, each summed from the first row to the last."""
    lengths = vec3(M[0, 0] * M[0, 0], M[0, 1] * M[0, 1], M[0, 2] * M[0, 2])
    for k in range(1, 3):
        for c in range(3):
            lengths[c] = lengths[c] + M[k, c] * M[k, c]
    return lengths


def _sort_by_magnitude(v, M, N):
    """v sorted by decreasing magnitude, and M and N with their columns exchanged as v's
    elements are, the one moved to the later place negated (a rotation stays one, and
    M diag(v) N^T is unchanged)."""
    for i, j in ((0, 1), (0, 2), (1, 2)):
        if abs(v[j]) > abs(v[i]):
            v[i], v[j] = v[j], v[i]
            for k in range(3):
                M[k, i], M[k, j] = M[k, j], -M[k, i]
                N[k, i], N[k, j] = N[k, j], -N[k, i]
    return v, M, N
