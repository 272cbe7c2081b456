"""Vectors and matrices, kernel against host: about thirty device functions of two 3-vectors
`u`, `v`, a 3x3 matrix `m` and a number `s` (arithmetic with vectors, matrices and Python
numbers, `@`, the functions, indexing, constructors from parts, smaller and larger shapes,
a loop, branches, a device function's nested tuple of vectors) run in a kernel and, with
the same inputs, on the host, where `kernelkit.lang.vectors` computes with NumPy. For
each element type the results must agree, and so must their types: each function's
result type in the kernel's IR is that of NumPy's result.

The results agree to the bit, except for float32 and float64 `@` (NumPy's BLAS sums in
an order of its own) and `**` (a pow function on either side): to a few ulps there.
NumPy sums float16 products in float32, and so do kernels."""
import numpy as np
import pytest

import kernelkit as kk
from kernelkit.frontend.specialize import translate_kernel
from kernelkit.ir import types as T

N = 16
WORKGROUP = 4


def halves(u, v):
    return u + v, (u - v, v * 2)


# --- results that are vectors ----------------------------------------------------------------

def sums(u, v, m, s):
    return u + v - s


def products(u, v, m, s):
    return u * v * s


def quotients(u, v, m, s):
    return u / (v * v + 1) + 1 / s


def floor_quotients(u, v, m, s):
    return u // (abs(v) + 1)


def remainders(u, v, m, s):
    return u % (abs(v) + 1) - s % 3


def powers(u, v, m, s):
    return u ** 2 + 2 ** abs(v)


def negations(u, v, m, s):
    return -u + abs(v) - (+u)


def python_numbers(u, v, m, s):
    return u * 0.5 + 3 - 2 * v


def matrix_times_vector(u, v, m, s):
    return m @ u


def vector_times_matrix(u, v, m, s):
    return u @ m + v


def chained_products(u, v, m, s):
    return (m @ kk.transpose(m)) @ v


def cross_products(u, v, m, s):
    return kk.cross(u, v) * s


def normalized(u, v, m, s):
    return kk.normalize(u) + kk.normalize(v * 0)


def rows_and_elements(u, v, m, s):
    return m[1] + m[2, 0] * u - m[-1]


def built_from_parts(u, v, m, s):
    return kk.vec3(kk.vec2(u[0], v[1]) * s, m[2, 2])


def built_with_a_dtype(u, v, m, s):
    return kk.vec3(u[0], 1, s, dtype=np.float32) * u


def smaller_shapes(u, v, m, s):
    p = kk.mat22(u[0], u[1], v[0], v[1]) @ kk.vec2(m[0, 0], s)
    return kk.vec3(p, kk.dot(p, p))


def larger_shapes(u, v, m, s):
    rows = kk.mat44(kk.vec4(u, 1), kk.vec4(v, 0), kk.vec4(m[0], s), kk.vec4(m[2], 1))
    w = rows @ kk.vec4(v, s)
    return kk.vec3(w[0], w[1], w[3]) - w[2]


def loop_carried(u, v, m, s):
    w = u
    for _ in range(3):
        w = m @ w * 0.5 + v
    return w


def branches(u, v, m, s):
    if u[0] > v[0]:
        w = u * s
    else:
        w = v - u
    return w if s > 1 else -w


def nested_results(u, v, m, s):
    a, (b, c) = halves(u, v)
    return a * b + c


VECTORS = (sums, products, quotients, floor_quotients, remainders, powers, negations,
           python_numbers, matrix_times_vector, vector_times_matrix, chained_products,
           cross_products, normalized, rows_and_elements, built_from_parts, built_with_a_dtype,
           smaller_shapes, larger_shapes, loop_carried, branches, nested_results)


# --- results that are numbers --------------------------------------------------------------

def dots(u, v, m, s):
    return kk.dot(u, v)


def vector_at_vector(u, v, m, s):
    return u @ v


def lengths(u, v, m, s):
    return kk.length(u) + kk.length(v * 0)


def elements(u, v, m, s):
    return u[0] * s + v[-1] - m[1, 2]


def iterated_and_unpacked(u, v, m, s):
    total = s
    for c in u:
        total = total + c * len(v)
    x, y, z = v
    return total - x * y + z


def quadratic_form(u, v, m, s):
    return kk.dot(m @ u, v) / s


NUMBERS = (dots, vector_at_vector, lengths, elements, iterated_and_unpacked, quadratic_form)


# --- results that are matrices -------------------------------------------------------------

def matrix_products(u, v, m, s):
    return m @ m @ m


def matrix_arithmetic(u, v, m, s):
    return m * s - kk.transpose(m) / (abs(m) + 1) + (-m)


def matrix_from_rows(u, v, m, s):
    return kk.mat33(u, v, kk.cross(u, v))


def matrix_from_numbers(u, v, m, s):
    return kk.mat33(s) + kk.mat33(u[0], 1, 2, v[1], 0.5, 3, 4, 5, s)


def matrix_powers(u, v, m, s):
    return m ** 2 - m // 2 + m % 2


MATRICES = (matrix_products, matrix_arithmetic, matrix_from_rows, matrix_from_numbers,
            matrix_powers)

# Float32 and float64 results that agree to a few ulps, not to the bit: NumPy's `@` sums
# products in BLAS's order, and `**` of floats is a library's pow on either side (a
# kernel's on the CPU is libmvec's, which is not correctly rounded even for x ** 2).
ROUNDED_ON_THE_HOST_ITS_OWN_WAY = {
    powers, matrix_times_vector, vector_times_matrix, chained_products, smaller_shapes,
    larger_shapes, loop_carried, vector_at_vector, quadratic_form, matrix_products,
    matrix_powers}

KINDS = {"numbers": (NUMBERS, ()), "vectors": (VECTORS, (3,)), "matrices": (MATRICES, (3, 3))}
DTYPES = [np.float64, np.float32, np.float16, np.int64, np.int32]


def applying(functions):
    """A kernel that stores functions[k](u, v, m, s) at out[k, i] for each k."""
    @kk.kernel
    def apply(out, us, vs, ms, ss):
        i = kk.index(kk.Global)
        u, v, m, s = kk.load_vec3(us, i), kk.load_vec3(vs, i), kk.load_mat33(ms, i), ss[i]
        for k in range(len(functions)):
            kk.store(out, (k, i), functions[k](u, v, m, s))
    return apply


KERNELS = {kind: applying(functions) for kind, (functions, _) in KINDS.items()}


def inputs(dtype):
    rng = np.random.default_rng(7)
    if np.issubdtype(dtype, np.integer):
        us, vs, ms = (rng.integers(-4, 5, shape).astype(dtype)
                      for shape in ((N, 3), (N, 3), (N, 3, 3)))
        return us, vs, ms, rng.integers(1, 4, N).astype(dtype)
    us, vs, ms = (rng.uniform(-2, 2, shape).astype(dtype)
                  for shape in ((N, 3), (N, 3), (N, 3, 3)))
    return us, vs, ms, rng.uniform(0.5, 2, N).astype(dtype)


def on_the_host(function, us, vs, ms, ss) -> list:
    return [function(kk.load_vec3(us, i), kk.load_vec3(vs, i), kk.load_mat33(ms, i), ss[i])
            for i in range(N)]


def kernel_result_types(kernel, arrays) -> dict:
    """{function name: the type of its result} in the kernel's IR, as the frontend types it."""
    argtypes = tuple(T.ArrayType(T.from_numpy(a.dtype), a.ndim, "C") for a in arrays)
    module = translate_kernel(kernel.function, argtypes, (WORKGROUP,))
    return {op.attrs["callee"].rsplit(".", 1)[0]: op.type
            for op in module.kernel.ops() if op.opcode == "call"}


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("dtype", DTYPES, ids=[np.dtype(d).name for d in DTYPES])
def test_kernels_compute_what_the_same_functions_compute_with_numpy(backend, kind, dtype):
    functions, shape = KINDS[kind]
    us, vs, ms, ss = inputs(dtype)
    out = kk.zeros(backend, np.float64, (len(functions), N, *shape))
    KERNELS[kind](backend, WORKGROUP)(out, *(kk.to_backend(backend, a) for a in (us, vs, ms, ss)),
                                      ndrange=N)
    kk.synchronize(backend)
    result_types = kernel_result_types(KERNELS[kind], (np.zeros(out.shape), us, vs, ms, ss))
    for function, got in zip(functions, kk.to_numpy(out)):
        expected = np.array(on_the_host(function, us, vs, ms, ss))
        result = result_types[function.__name__]
        element = result.element if isinstance(result, T.VectorType) else result
        assert (element, getattr(result, "shape", ())) == \
            (T.from_numpy(expected.dtype), expected.shape[1:]), function.__name__
        rounded_elsewhere = function in ROUNDED_ON_THE_HOST_ITS_OWN_WAY and \
            expected.dtype in (np.float32, np.float64)
        tolerance = 8 * np.finfo(expected.dtype).eps if rounded_elsewhere else 0
        np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance,
                                   err_msg=function.__name__)

