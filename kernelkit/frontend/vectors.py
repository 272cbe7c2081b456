"""Small vectors and matrices in kernels (`kernelkit.lang.vectors`): a value of
`T.VectorType`, a tuple of its elements in row-major order that knows its shape.

Everything here is done element by element while the kernel is translated: `v + w` is
one addition per element, `m @ v` the sums of products, row by row, from the first term
to the last. So the IR, the passes, every backend and automatic differentiation see only
scalars, tuples and `extract`, which they already know.

`Vectors` is mixed into `translate.FunctionTranslator` (operators and subscripts come
here from `expressions`); the functions (`kk.vec3`, `kk.dot` ...) are entries of the
`intrinsics` table."""
from __future__ import annotations

import functools

from ..ir import types as T
from ..ir.definitions import MATH
from ..ir.ops import Value
from ..lang import vectors as kk
from .intrinsics import dtype_argument, handles, positional
from .values import PyConst

# Operators that apply element by element, as NumPy's do on arrays.
ELEMENTWISE = frozenset({"add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "min",
                         "max"})


def is_vector(value) -> bool:
    return isinstance(value, Value) and isinstance(value.type, T.VectorType)


class Vectors:
    def vector(self, elements: list[Value], shape: tuple[int, ...]) -> Value:
        """A vector (`shape` (n,)) or matrix (rows, cols) of `elements`, row by row, all
        converted to their promoted type."""
        element = functools.reduce(T.promote, [e.type for e in elements]).strong
        return self.builder.make_tuple([self.cast(e, element) for e in elements], shape)

    def elements(self, value: Value) -> list[Value]:
        return [self.extract(value, i) for i in range(len(value.type.elements))]

    def vector_binary(self, op: str, left, right, node) -> Value:
        """`left op right` where one side (or both) is a vector or matrix."""
        described = f"{self.type_name(left)} {_SYMBOLS.get(op, op)} {self.type_name(right)}"
        if op == "matmul":
            return self.matmul(left, right, node)
        if op not in ELEMENTWISE:
            raise self.error(f"{described}: vectors and matrices take + - * / // % ** and @",
                             node)
        for side in (left, right):
            if not (is_vector(side) or self.is_scalar(side)):
                raise self.error(f"{described}: a vector or matrix combines with numbers "
                                 "and with vectors or matrices of its shape", node)
        shape = (left if is_vector(left) else right).type.shape
        if is_vector(left) and is_vector(right) and left.type.shape != right.type.shape:
            raise self.error(f"{described}: the shapes differ", node,
                             hint="use @ for the matrix product" if op == "mul" else None)
        count = len((left if is_vector(left) else right).type.elements)
        lefts = self.elements(left) if is_vector(left) else [left] * count
        rights = self.elements(right) if is_vector(right) else [right] * count
        return self.vector([self.binary(op, a, b, node) for a, b in zip(lefts, rights)], shape)

    def matmul(self, left, right, node) -> Value:
        """`left @ right`, NumPy's matmul for 1-D and 2-D operands."""
        if not (is_vector(left) and is_vector(right)):
            raise self.error(f"@ multiplies vectors and matrices, got {self.type_name(left)} "
                             f"and {self.type_name(right)}", node,
                             hint="use * to multiply by a number")
        a, b = self.as_matrix(left, row=True), self.as_matrix(right, row=False)
        (rows, inner), (inner_b, cols) = a[0], b[0]
        if inner != inner_b:
            raise self.error(f"{self.type_name(left)} @ {self.type_name(right)}: the inner "
                             f"sizes differ ({inner} and {inner_b})", node)
        products = [self.sum_of_products([a[1][r * inner + k] for k in range(inner)],
                                         [b[1][k * cols + c] for k in range(inner)], node)
                    for r in range(rows) for c in range(cols)]
        shape = tuple(extent for extent, keep in ((rows, len(left.type.shape) == 2),
                                                  (cols, len(right.type.shape) == 2)) if keep)
        return self.vector(products, shape) if shape else products[0]

    def as_matrix(self, value: Value, row: bool):
        """((rows, cols), elements) of a matrix, or of a vector as a row (on the left of
        @) or a column (on the right), as NumPy's matmul treats 1-D operands."""
        shape = value.type.shape
        if len(shape) == 1:
            shape = (1, shape[0]) if row else (shape[0], 1)
        return shape, self.elements(value)

    def sum_of_products(self, a: list[Value], b: list[Value], node) -> Value:
        """a[0] * b[0] + a[1] * b[1] + ..., from the first term to the last. Float16
        products are summed in float32 and rounded to float16 once, at the end, as
        NumPy's matmul and dot sum them."""
        half = T.promote(a[0].type, b[0].type) == T.float16
        if half:
            a, b = ([self.cast(x, T.float32) for x in side] for side in (a, b))
        products = [self.binary("mul", x, y, node) for x, y in zip(a, b)]
        total = functools.reduce(lambda x, y: self.binary("add", x, y, node), products)
        return self.cast(total, T.float16) if half else total

    def vector_unary(self, op: str, value: Value, node) -> Value:
        if value.type.element.is_bool:   # the rules of a bool operand, as for a number
            if op == "neg":
                raise self.error("a vector of bools cannot be negated (NumPy raises for "
                                 "-np.array([True]))", node,
                                 hint="negate v * 1, a vector of integers")
            if op == "abs":
                return value
        return self.vector([self.unary(op, e, node) for e in self.elements(value)],
                           value.type.shape)

    def vector_subscript(self, base: Value, index, node) -> Value:
        """`v[i]`, `m[i]` (a row) and `m[i, j]`, with constant indices."""
        shape = base.type.shape
        if isinstance(index, PyConst) and isinstance(index.value, tuple):
            index = self.python_value(index.value, node)
        positions = [index] if not (isinstance(index, Value) and
                                    isinstance(index.type, T.TupleType)) else \
            [self.extract(index, i) for i in range(len(index.type.elements))]
        if len(positions) > len(shape):
            raise self.error(f"a {base.type.name} takes at most {len(shape)} indices, got "
                             f"{len(positions)}", node)
        offsets = [self.constant_index(p, extent, node) for p, extent in zip(positions, shape)]
        if len(offsets) == len(shape):
            flat = offsets[0] * shape[1] + offsets[1] if len(shape) == 2 else offsets[0]
            return self.extract(base, flat)
        row = offsets[0] * shape[1]
        return self.vector([self.extract(base, row + c) for c in range(shape[1])], shape[1:])


_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
            "pow": "**", "matmul": "@", "and": "&", "or": "|", "xor": "^", "shl": "<<",
            "shr": ">>"}


# -- construction ---------------------------------------------------------------------------

def flattened(tr, values, node) -> list:
    """`values` with each tuple, vector or matrix among them replaced by its elements,
    in order."""
    flat = []
    for value in values:
        if isinstance(value, Value) and isinstance(value.type, T.TupleType):
            flat.extend(tr.extract(value, i) for i in range(len(value.type.elements)))
        elif isinstance(value, PyConst) and isinstance(value.value, tuple):
            flat.extend(tr.python_value(v, node) for v in value.value)
        else:
            flat.append(value)
    return flat


def components(tr, args, node, name) -> list[Value]:
    """The numbers given to a constructor: each argument a number, or a vector or tuple
    whose elements are taken in order."""
    values = flattened(tr, args, node)
    for value in values:
        if not tr.is_scalar(value) or value.type.is_bool:
            raise tr.error(f"{name}() takes numbers, got a {tr.type_name(value)}", node)
    return values


def constructor(shape: tuple[int, ...]):
    count = shape[0] * (shape[1] if len(shape) == 2 else 1)
    name = f"kk.vec{shape[0]}" if len(shape) == 1 else f"kk.mat{shape[0]}{shape[1]}"
    takes = f"1 or {count} numbers" if len(shape) == 1 else \
        f"1 number, {count} numbers (row by row) or {shape[0]} vectors (the rows)"

    def handler(tr, node):
        args, kwargs = positional(tr, node, 1, count, name, keywords=("dtype",))
        values = components(tr, args, node, name)
        if len(values) == 1:
            values = values * count
        if len(values) != count:
            raise tr.error(f"{name}() takes {takes}, got {len(values)} numbers", node)
        if "dtype" in kwargs:
            element = dtype_argument(tr, kwargs["dtype"], node, f"{name}'s dtype=")
            values = [tr.cast(v, element) for v in values]
        return tr.vector(values, shape)
    return handler


for _size in (2, 3, 4):
    handles(getattr(kk, f"vec{_size}"))(constructor((_size,)))
    handles(getattr(kk, f"mat{_size}{_size}"))(constructor((_size, _size)))


# -- functions --------------------------------------------------------------------------------

def vector_argument(tr, value, node, name, ndim: int | None = 1, size: int | None = None):
    if not (isinstance(value, Value) and isinstance(value.type, T.VectorType)) or \
            (ndim is not None and len(value.type.shape) != ndim) or \
            (size is not None and value.type.shape != (size,) * len(value.type.shape)):
        what = {1: "a vector", 2: "a matrix", None: "a vector or matrix"}[ndim]
        if size is not None:
            what = f"a vector of {size}" if ndim == 1 else f"a {size}x{size} matrix"
        raise tr.error(f"{name} needs {what}, got a {tr.type_name(value)}", node)
    return value


@handles(kk.dot)
def dot(tr, node):
    (a, b), _ = positional(tr, node, 2, 2, "kk.dot")
    a, b = (vector_argument(tr, v, node, "kk.dot") for v in (a, b))
    if a.type.shape != b.type.shape:
        raise tr.error(f"kk.dot of vectors of different lengths: {a.type.name} and "
                       f"{b.type.name}", node)
    return tr.sum_of_products(tr.elements(a), tr.elements(b), node)


@handles(kk.cross)
def cross(tr, node):
    (a, b), _ = positional(tr, node, 2, 2, "kk.cross")
    (a0, a1, a2), (b0, b1, b2) = (tr.elements(vector_argument(tr, v, node, "kk.cross", 1, 3))
                                  for v in (a, b))

    def minor(p, q, r, s):
        return tr.binary("sub", tr.binary("mul", p, q, node), tr.binary("mul", r, s, node), node)
    return tr.vector([minor(a1, b2, a2, b1), minor(a2, b0, a0, b2), minor(a0, b1, a1, b0)], (3,))


def squared_length(tr, v, node) -> Value:
    """dot(v, v) in the vector's float type, float64 for integers (as kk.sqrt takes it)."""
    squared = tr.sum_of_products(tr.elements(v), tr.elements(v), node)
    return tr.cast(squared, squared.type if squared.type.is_float else T.float64)


# At the zero vector sqrt's derivative is infinite, and the chain rule multiplies it by
# the zero vector's 0: NaN. So where the square is 0 (not positive, for normalize) sqrt is
# taken of 1 and its result not chosen: both functions have the derivative 0 there, in
# either mode, as Warp's have. Their values are sqrt's.

@handles(kk.length)
def length(tr, node):
    (v,), _ = positional(tr, node, 1, 1, "kk.length")
    squared = squared_length(tr, vector_argument(tr, v, node, "kk.length"), node)
    zero, one = tr.constant(0, squared.type), tr.constant(1, squared.type)
    nonzero = tr.compare("ne", squared, zero, node)   # NaN too: its length is NaN
    size = tr.emit(MATH["sqrt"], [tr.select(nonzero, squared, one)], squared.type)
    return tr.select(nonzero, size, zero)


@handles(kk.normalize)
def normalize(tr, node):
    (v,), _ = positional(tr, node, 1, 1, "kk.normalize")
    v = vector_argument(tr, v, node, "kk.normalize")
    squared = squared_length(tr, v, node)
    zero, one = tr.constant(0, squared.type), tr.constant(1, squared.type)
    positive = tr.compare("gt", squared, zero, node)
    size = tr.emit(MATH["sqrt"], [tr.select(positive, squared, one)], squared.type)
    return tr.vector([tr.select(positive, tr.binary("truediv", tr.cast(e, size.type), size,
                                                    node), zero)
                      for e in tr.elements(v)], v.type.shape)


@handles(kk.transpose)
def transpose(tr, node):
    (m,), _ = positional(tr, node, 1, 1, "kk.transpose")
    m = vector_argument(tr, m, node, "kk.transpose", ndim=2)
    rows, cols = m.type.shape
    elements = tr.elements(m)
    return tr.vector([elements[r * cols + c] for c in range(cols) for r in range(rows)],
                     (cols, rows))


# -- arrays -----------------------------------------------------------------------------------

def array_position(tr, array, index_values, trailing: list[int], node, name) -> list[Value]:
    """The indices of `array[(*index_values, *trailing)]`, checked."""
    indices = flattened(tr, index_values, node)
    indices.extend(tr.constant(t, T.int64) for t in trailing)
    if len(indices) != array.type.ndim:
        axes = {0: "", 1: " before the last axis", 2: " before the last two axes"}
        raise tr.error(f"{name} on a {array.type.ndim}-D array needs "
                       f"{array.type.ndim - len(trailing)} indices{axes[len(trailing)]}, got "
                       f"{len(indices) - len(trailing)}", node)
    for value in indices:
        if not tr.is_scalar(value) or not value.type.is_integer:
            raise tr.error(f"{name}: array indices must be integers, got "
                           f"{tr.type_name(value)}", node, hint="convert the index with int(...)")
    return [tr.cast(value, T.index_type) for value in indices]


def loader(shape: tuple[int, ...]):
    name = f"kk.load_vec{shape[0]}" if len(shape) == 1 else f"kk.load_mat{shape[0]}{shape[1]}"

    def handler(tr, node):
        args, _ = positional(tr, node, 2, 9, name)
        array = args[0]
        if not (isinstance(array, Value) and isinstance(array.type, T.ArrayType)):
            raise tr.error(f"{name} needs an array first, got a {tr.type_name(array)}", node)
        elements = []
        for position in _positions(shape):
            indices = array_position(tr, array, args[1:], list(position), node, name)
            elements.append(tr.builder.op("load", [array, *indices], array.type.dtype))
        return tr.vector(elements, shape)
    return handler


def _positions(shape):
    if len(shape) == 1:
        return [(k,) for k in range(shape[0])]
    return [(r, c) for r in range(shape[0]) for c in range(shape[1])]


for _size in (2, 3, 4):
    handles(getattr(kk, f"load_vec{_size}"))(loader((_size,)))
    handles(getattr(kk, f"load_mat{_size}{_size}"))(loader((_size, _size)))


@handles(kk.store)
def store(tr, node):
    (array, index, value), _ = positional(tr, node, 3, 3, "kk.store")
    if not (isinstance(array, Value) and isinstance(array.type, T.ArrayType)):
        raise tr.error(f"kk.store needs an array first, got a {tr.type_name(array)}", node)
    if array.type.const:
        raise tr.error("kk.store cannot write to a kk.Const array", node,
                       hint="remove the kk.Const annotation to write to it")
    if tr.is_scalar(value):
        positions, values = [()], [value]
    elif is_vector(value):
        positions, values = _positions(value.type.shape), tr.elements(value)
    else:
        raise tr.error(f"kk.store writes numbers, vectors and matrices, got a "
                       f"{tr.type_name(value)}", node)
    for position, element in zip(positions, values):
        indices = array_position(tr, array, [index], list(position), node, "kk.store")
        tr.builder.op("store", [array, *indices, tr.cast(element, array.type.dtype)])
    return PyConst(None)
