"""Small vectors and matrices: `kk.vec2`, `kk.vec3`, `kk.vec4`, `kk.mat22`, `kk.mat33`,
`kk.mat44`, and what kernels do with them (`kk.dot`, `kk.cross`, `kk.length`,
`kk.normalize`, `kk.transpose`, the linear algebra of `kk.determinant`, `kk.inverse`,
`kk.trace`, `kk.diag`, `kk.identity`, `kk.outer`, `kk.skew`, `kk.ddot`, and
`kk.load_vec3`, `kk.store` ...). The decompositions of 3x3 matrices (`kk.svd3`, `kk.qr3`,
`kk.eig3`) are device functions written with these, in `decompositions`.

    @kk.kernel
    def rotate(points, R: kk.Const):
        i = kk.index(kk.Global)
        m = kk.load_mat33(R, 0)                 # R has shape (1, 3, 3)
        kk.store(points, i, m @ kk.load_vec3(points, i))

Inside a kernel a vector or matrix is a value, like a number: it is built from scalars,
passed to and returned from device functions, carried through loops and branches, and
costs what its elements cost (the compiler works on the elements). Its element type is
that of its arguments, promoted as NumPy promotes (NEP 50): `kk.vec3(x, 0.0, 0.0)` with
a float32 `x` is a vector of float32; of Python floats only, of float64; `dtype=` chooses.

Arithmetic is NumPy's: `+ - * / // % **` elementwise between two of the same shape and
with a scalar on either side; `@` is the matrix product (matrix @ vector, vector @ matrix,
matrix @ matrix; vector @ vector is the dot product). In Warp `m1 * m2` is the matrix
product: here it is elementwise, as for NumPy arrays; write `m1 @ m2`. `v[i]` reads an
element, `m[i]` a row (a vector), `m[i, j]` an element, and each can be assigned
(`v[0] = x`, `v[i] += y`, `m[1] = row`, `m[i, j] = x`, converted to the element type as
NumPy's assignment converts); `v.x`, `v.y`, `v.z`, `v.w` read and assign a vector's
elements (in kernels). An index may be known only at run time (negative counts from the
end; one out of range reads 0 and assigns nothing). `a == b` and `a != b` of two of one
shape are one bool, as NumPy's `array_equal` (in kernels; on the host they compare
elementwise). `len(v)`, `for c in v`, `x, y, z = v` and `f(*v)` work as for tuples,
and on a matrix go by rows, as NumPy's do; `abs`, `min(a, b)` and `max(a, b)` work
elementwise (in kernels only: on the host, Python's `min` and `max` of two arrays
raise). `kk.atomic_add(a, i, v)` (and the other atomics) updates each element of `v`
along the array's trailing axes, each atomically.

On the host (in plain Python) the same functions compute with NumPy: a vector is a 1-D
NumPy array, a matrix a 2-D one, so a device function written with them runs on either.
"""
from __future__ import annotations

import numpy as np

__all__ = ["vec2", "vec3", "vec4", "mat22", "mat33", "mat44", "dot", "cross", "length",
           "normalize", "transpose", "trace", "diag", "identity", "outer", "skew", "ddot",
           "determinant", "inverse", "load_vec2", "load_vec3", "load_vec4", "load_mat22",
           "load_mat33", "load_mat44", "store"]


def _components(arguments: tuple, name: str, count: int, takes: str, dtype) -> np.ndarray:
    """The numbers given to a constructor, as the kernel takes them: each argument a
    number, or a vector, matrix or tuple whose elements come in order (a matrix's row by
    row); one number fills all `count`. Their type is NumPy's promotion of theirs (a
    Python number is weak), or `dtype`."""
    values = []
    for argument in arguments:
        if isinstance(argument, (tuple, list)):
            values.extend(argument)
        elif isinstance(argument, np.ndarray):
            values.extend(argument.ravel())
        else:
            values.append(argument)
    for value in values:
        if np.ndim(value) != 0 or isinstance(value, (bool, np.bool_, str)):
            raise TypeError(f"{name}() takes numbers, got {value!r}")
    if not values:
        values = [np.float64(0.0)]
    if len(values) == 1:
        values = values * count
    if len(values) != count:
        raise TypeError(f"{name}() takes {takes}, got {len(values)} numbers")
    element = np.dtype(dtype) if dtype is not None else np.result_type(*values)
    return np.array(values, dtype=element)


def _vector(size: int):
    name = f"vec{size}"

    def make(*components, dtype=None):
        return _components(components, name, size, f"1 or {size} numbers", dtype)
    make.__name__ = make.__qualname__ = name
    make.__doc__ = (f"A vector of {size} numbers: `kk.vec{size}(" +
                    ", ".join("xyzw"[:size]) + f")`, `kk.vec{size}(s)` for "
                    f"{size} copies of `s`, or `kk.vec{size}()` for zeros (float64); a "
                    "vector or tuple among the arguments gives its numbers in order "
                    "(`kk.vec4(v3, 1.0)`). `dtype=` sets the element type "
                    "(otherwise NumPy's promotion of the components). In a kernel a value; "
                    "on the host a NumPy array.")
    return make


def _matrix(size: int):
    name = f"mat{size}{size}"

    def make(*elements, dtype=None):
        takes = (f"1 number, {size * size} numbers (row by row) or {size} vectors "
                 "(the rows)")
        return _components(elements, name, size * size, takes, dtype).reshape(size, size)
    make.__name__ = make.__qualname__ = name
    make.__doc__ = (f"A {size}x{size} matrix: `kk.mat{size}{size}(a00, a01, ...)` with its "
                    f"{size * size} elements row by row, `kk.mat{size}{size}(row0, row1, ...)` "
                    f"from {size} vectors (its rows), `kk.mat{size}{size}(s)` filled with "
                    f"`s`, or `kk.mat{size}{size}()` of zeros (float64); `dtype=` sets the "
                    "element type. `@` multiplies matrices; `*` is elementwise.")
    return make


vec2, vec3, vec4 = _vector(2), _vector(3), _vector(4)
mat22, mat33, mat44 = _matrix(2), _matrix(3), _matrix(4)


def dot(a, b):
    """The dot product of two vectors of the same length, summed from the first element
    to the last: `kk.dot(kk.vec3(1, 2, 3), v)`. Float16 products are summed in float32
    and rounded once, as NumPy's dot and matmul sum them."""
    a, b = np.asarray(a), np.asarray(b)
    result = np.result_type(a, b)
    accumulate = np.float32 if result == np.float16 else result
    products = a.astype(accumulate) * b.astype(accumulate)
    total = products[0]
    for product in products[1:]:
        total = total + product
    return result.type(total)


def cross(a, b):
    """The cross product of two 3-vectors: `kk.cross(u, v)` is
    (u1 v2 - u2 v1, u2 v0 - u0 v2, u0 v1 - u1 v0)."""
    a, b = np.asarray(a), np.asarray(b)
    return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2],
                     a[0] * b[1] - a[1] * b[0]])


def length(v):
    """The Euclidean length `sqrt(dot(v, v))`, in the vector's float type (float64 for
    integers): `kk.length(kk.vec2(3.0, 4.0)) == 5.0`. Differentiated, its derivative at
    the zero vector is 0."""
    v = np.asarray(v)
    squared = dot(v, v)
    return np.sqrt(squared if v.dtype.kind == "f" else np.float64(squared))


def normalize(v):
    """`v / kk.length(v)`, or a vector of zeros where the length is 0 (as Warp's
    `normalize`), whose derivative there is 0: `kk.normalize(kk.vec2(3.0, 4.0))` is
    (0.6, 0.8)."""
    norm = length(v)
    v = np.asarray(v)
    if norm > 0:
        return v / norm
    return np.zeros(v.shape, dtype=np.result_type(v, norm))


def transpose(m):
    """The transpose of a matrix: `kk.transpose(m)[i, j] == m[j, i]`."""
    return np.asarray(m).T.copy()


def trace(m):
    """The sum of a matrix's diagonal, from the first element to the last, in its
    element type: `kk.trace(kk.identity(3)) == 3.0`."""
    m = np.asarray(m)
    total = m[0, 0]
    for k in range(1, min(m.shape)):
        total = total + m[k, k]
    return total


def diag(v):
    """NumPy's `np.diag`: a vector's diagonal matrix (Warp's `diag`), or a square
    matrix's diagonal as a vector."""
    return np.diag(np.asarray(v)).copy()


def identity(n, dtype=np.float64):
    """The n x n identity matrix (n of 2, 3 or 4): `kk.identity(3, dtype=np.float32)`."""
    return np.eye(n, dtype=dtype)


def outer(a, b):
    """The outer product of two vectors: `kk.outer(a, b)[i, j] == a[i] * b[j]`."""
    return np.multiply.outer(np.asarray(a), np.asarray(b))


def skew(v):
    """The cross-product matrix of a 3-vector: `kk.skew(a) @ b == kk.cross(a, b)`."""
    v = np.asarray(v)
    x, y, z = v
    zero = v.dtype.type(0)
    return np.array([[zero, -z, y], [z, zero, -x], [-y, x, zero]])


def ddot(a, b):
    """The double dot product of two matrices of one shape: the sum of their elementwise
    products, row by row from the first to the last (`kk.dot` of their elements)."""
    return dot(np.asarray(a).ravel(), np.asarray(b).ravel())


def _as_float(m) -> np.ndarray:
    m = np.asarray(m)
    return m if m.dtype.kind == "f" else m.astype(np.float64)


def _determinant(m):
    """The determinant by cofactors along the first row, in a fixed order (the same
    operations as kernels compute)."""
    size = m.shape[0]
    if size == 2:
        return m[0, 0] * m[1, 1] - m[0, 1] * m[1, 0]
    total = None
    for column in range(size):
        minor = np.delete(np.delete(m, 0, axis=0), column, axis=1)
        term = m[0, column] * _determinant(minor)
        total = term if total is None else (total - term if column % 2 else total + term)
    return total


def determinant(m):
    """The determinant of a 2x2, 3x3 or 4x4 matrix, by cofactors along the first row,
    in the matrix's float type (float64 for integers)."""
    return _determinant(_as_float(m))


def inverse(m):
    """The inverse of a 2x2, 3x3 or 4x4 matrix: its adjugate divided by its determinant
    (a singular matrix gives infinities and NaNs, where NumPy raises)."""
    m = _as_float(m)
    size = m.shape[0]
    det = _determinant(m)
    if size == 2:
        adjugate = np.array([[m[1, 1], -m[0, 1]], [-m[1, 0], m[0, 0]]])
    else:
        adjugate = np.empty_like(m)
        for row in range(size):
            for column in range(size):
                minor = np.delete(np.delete(m, row, axis=0), column, axis=1)
                cofactor = _determinant(minor)
                adjugate[column, row] = -cofactor if (row + column) % 2 else cofactor
    with np.errstate(divide="ignore", invalid="ignore"):
        return adjugate / det


def _indices(array, index: tuple, trailing: int, name: str) -> tuple:
    """The indices before the trailing axes, as the kernel takes them: integers and
    tuples of them, in order."""
    flat = tuple(i for part in index
                 for i in (part if isinstance(part, tuple) else (part,)))
    if len(flat) + trailing != np.ndim(array):
        axes = {1: " before the last axis", 2: " before the last two axes"}.get(trailing, "")
        raise IndexError(f"{name} on a {np.ndim(array)}-D array needs "
                         f"{np.ndim(array) - trailing} indices{axes}, got {len(flat)}")
    return flat


def _loader(size: int, ndim: int, name: str):
    def load(array, *index):
        index = _indices(array, index, ndim, f"kk.{name}")
        if ndim == 1:
            return np.array([array[(*index, k)] for k in range(size)])
        return np.array([[array[(*index, r, c)] for c in range(size)] for r in range(size)])
    load.__name__ = load.__qualname__ = name
    what = f"vector of {size}" if ndim == 1 else f"{size}x{size} matrix"
    trailing = "its last axis" if ndim == 1 else "its last two axes"
    load.__doc__ = (f"The {what} at `array[index]`, read along {trailing}: "
                    f"`kk.{name}(a, i)` reads " +
                    (", ".join(f"a[i, {k}]" for k in range(size)) if ndim == 1 else
                     f"a[i, r, c] for r, c < {size}") +
                    "; several indices (`kk." + name + "(a, i, j)`) for a larger array.")
    return load


load_vec2, load_vec3, load_vec4 = (_loader(n, 1, f"load_vec{n}") for n in (2, 3, 4))
load_mat22, load_mat33, load_mat44 = (_loader(n, 2, f"load_mat{n}{n}") for n in (2, 3, 4))


def store(array, index, value):
    """Write `value` at `array[index]`: a number to that element, a vector along the last
    axis (`kk.store(a, i, v)` writes a[i, 0], a[i, 1], ...), a matrix along the last two;
    `index` is an integer or a tuple of them."""
    value = np.asarray(value)
    index = _indices(array, (index,), value.ndim, "kk.store")
    for position in np.ndindex(value.shape):
        array[(*index, *position)] = value[position]
