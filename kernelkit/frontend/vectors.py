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

import ast
import functools

from ..ir import types as T
from ..ir.definitions import MATH
from ..ir.ops import Value
from ..lang import vectors as kk
from .intrinsics import dtype_argument, handles, positional
from ..ir.ops import constant_value
from .values import PyConst, is_const

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
        """`v[i]`, `m[i]` (a row) and `m[i, j]`."""
        offsets = self.vector_offsets(base, index, node)
        shape, rest = base.type.shape, base.type.shape[len(offsets):]
        chosen = self.chosen_positions(base, offsets)
        elements = self.elements(base)
        picked = []
        for within in _positions(rest) if rest else [()]:
            value = None   # out of range (a run-time index): 0
            for prefix, condition in chosen:
                element = elements[_flat((*prefix, *within), shape)]
                value = element if condition is None else self.select(
                    condition, element, value if value is not None else
                    self.constant(0, base.type.element))
            picked.append(value)
        return self.vector(picked, rest) if rest else picked[0]

    def vector_with(self, base: Value, offsets: list, value, node) -> Value:
        """`base` with `base[offsets] = value`: a number (into each element it names), or
        a vector of the shape of `base[offsets]`, converted to the element type."""
        shape, rest = base.type.shape, base.type.shape[len(offsets):]
        if self.is_scalar(value):
            values = [value] * (len(_positions(rest)) if rest else 1)
        elif is_vector(value) and value.type.shape == rest:
            values = self.elements(value)
        else:
            target = f"a {_shape_name(rest)}" if rest else "an element"
            raise self.error(f"cannot assign a {self.type_name(value)} to {target} of a "
                             f"{base.type.name}", node,
                             hint="assign a number, or a vector of the row's length" if rest
                             else "assign a number")
        element = base.type.element
        values = [self.cast(v, element) for v in values]
        elements = self.elements(base)
        for prefix, condition in self.chosen_positions(base, offsets):
            for within, new in zip(_positions(rest) if rest else [()], values):
                flat = _flat((*prefix, *within), shape)
                elements[flat] = new if condition is None else \
                    self.select(condition, new, elements[flat])
        return self.builder.make_tuple(elements, shape)

    def vector_offsets(self, base: Value, index, node) -> list:
        """The index of `base[index]` along each axis it gives: a constant (an int), or
        a value known at run time (an int64, a negative one counted from the end)."""
        shape = base.type.shape
        if isinstance(index, PyConst) and isinstance(index.value, tuple):
            index = self.python_value(index.value, node)
        if isinstance(index, PyConst) and isinstance(index.value, slice):
            raise self.error(f"slices of a {base.type.name} are not supported", node,
                             hint="read or assign the elements one by one, or whole rows "
                                  "of a matrix (m[1])")
        positions = [index] if not (isinstance(index, Value) and
                                    isinstance(index.type, T.TupleType)) else \
            [self.extract(index, i) for i in range(len(index.type.elements))]
        if len(positions) > len(shape):
            raise self.error(f"a {base.type.name} takes at most {len(shape)} indices, got "
                             f"{len(positions)}", node)
        offsets = []
        for position, extent in zip(positions, shape):
            if not (self.is_scalar(position) and position.type.is_integer):
                raise self.error(f"a {base.type.name} is indexed with integers, got "
                                 f"{self.type_name(position)}", node,
                                 hint="convert the index with int(...)")
            if is_const(position):
                offsets.append(self.constant_index(position, extent, node))
                continue
            self.unroll_for_index(position)   # a loop over a constant range: constants
            position = self.cast(position, T.index_type)
            negative = self.compare("lt", position, self.constant(0, T.index_type), node)
            offsets.append(self.select(negative, self.binary(
                "add", position, self.constant(extent, T.index_type), node), position))
        return offsets

    def chosen_positions(self, base: Value, offsets: list) -> list:
        """The positions along the indexed axes that `offsets` may name, each with the
        condition (a bool value) on which it does, or None where it surely does."""
        chosen = []
        for prefix in _positions(base.type.shape[:len(offsets)]):
            conditions = []
            for at, offset in zip(prefix, offsets):
                if isinstance(offset, int):
                    if offset != at:
                        break
                else:
                    conditions.append(self.compare(
                        "eq", offset, self.constant(at, T.index_type), self.node))
            else:
                chosen.append((prefix, functools.reduce(
                    lambda a, b: self.binary("and", a, b, self.node), conditions)
                    if conditions else None))
        return chosen

    def component_position(self, base: Value, node: ast.Attribute) -> int:
        """The element `v.x`, `v.y`, `v.z` or `v.w` names."""
        shape = base.type.shape
        names = "xyzw"[:shape[0]] if len(shape) == 1 else ""
        if node.attr not in names or len(node.attr) != 1:
            listed = ", ".join(f".{n}" for n in names)
            raise self.error(f"a {base.type.name} has no attribute '{node.attr}'", node,
                             hint=f"its elements are {listed}, or v[0], v[1] ..." if names
                             else "index a matrix's elements: m[i, j], or its rows: m[i]")
        return names.index(node.attr)

    def vector_atomic(self, definition, array: Value, index, value: Value, node,
                      name: str) -> Value:
        """An atomic update of each element of a vector or matrix along the array's
        trailing axes (`kk.atomic_add(a, i, v)` adds v[k] to a[i, k]); the elements from
        before, as a vector or matrix."""
        before = []
        for position, element in zip(_positions(value.type.shape), self.elements(value)):
            indices = array_position(self, array, [index], list(position), node, name)
            before.append(self.builder.op(definition, [array, *indices,
                                                       self.cast(element, array.type.dtype)],
                                          array.type.dtype))
        return self.vector(before, value.type.shape)

    def vector_compare(self, op: str, left, right, node) -> Value:
        """`a == b` and `a != b` of two vectors or matrices of one shape: whether all
        their elements are equal (NumPy's `array_equal`; NaN equals nothing), a bool."""
        described = f"{self.type_name(left)} {_COMPARISON_SYMBOLS[op]} {self.type_name(right)}"
        if op not in ("eq", "ne"):
            raise self.error(f"{described}: vectors and matrices compare with == and != "
                             f"only", node, hint="compare their elements, or kk.length(v)")
        if not (is_vector(left) and is_vector(right) and left.type.shape == right.type.shape):
            raise self.error(f"{described}: == compares a vector or matrix with one of its "
                             f"shape", node, hint="compare the elements: v[0] == x")
        equal = functools.reduce(lambda a, b: self.binary("and", a, b, node),
                                 [self.compare("eq", a, b, node) for a, b in
                                  zip(self.elements(left), self.elements(right))])
        return equal if op == "eq" else self.unary("not", equal, node)


def _flat(position: tuple[int, ...], shape: tuple[int, ...]) -> int:
    return position[0] * shape[1] + position[1] if len(shape) == 2 else position[0]


def _shape_name(shape: tuple[int, ...]) -> str:
    return f"row of {shape[0]}" if len(shape) == 1 else "x".join(map(str, shape))


_COMPARISON_SYMBOLS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}

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
        args, kwargs = positional(tr, node, 0, count, name, keywords=("dtype",))
        values = components(tr, args, node, name) or [tr.constant(0.0, T.float64)]
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


def square_matrix(tr, value, node, name) -> Value:
    m = vector_argument(tr, value, node, name, ndim=2)
    rows, cols = m.type.shape
    if rows != cols:
        raise tr.error(f"{name} needs a square matrix, got a {m.type.name}", node)
    return m


def rows_of(tr, m: Value, as_float: bool = False) -> list[list[Value]]:
    """A matrix's elements, row by row; in its float type (float64 for integers)."""
    rows, cols = m.type.shape
    elements = tr.elements(m)
    if as_float and not m.type.element.is_float:
        elements = [tr.cast(e, T.float64) for e in elements]
    return [elements[r * cols:(r + 1) * cols] for r in range(rows)]


@handles(kk.trace)
def trace(tr, node):
    (m,), _ = positional(tr, node, 1, 1, "kk.trace")
    rows = rows_of(tr, vector_argument(tr, m, node, "kk.trace", ndim=2))
    return functools.reduce(lambda a, b: tr.binary("add", a, b, node),
                            [rows[k][k] for k in range(min(len(rows), len(rows[0])))])


@handles(kk.diag)
def diag(tr, node):
    (v,), _ = positional(tr, node, 1, 1, "kk.diag")
    v = vector_argument(tr, v, node, "kk.diag", ndim=None)
    if len(v.type.shape) == 2:
        rows = rows_of(tr, square_matrix(tr, v, node, "kk.diag"))
        return tr.vector([rows[k][k] for k in range(len(rows))], (len(rows),))
    size, elements = v.type.shape[0], tr.elements(v)
    zero = tr.constant(0, v.type.element)
    return tr.vector([elements[r] if r == c else zero for r in range(size)
                      for c in range(size)], (size, size))


@handles(kk.identity)
def identity(tr, node):
    args, kwargs = positional(tr, node, 1, 2, "kk.identity", keywords=("dtype",))
    size = args[0]
    if not (is_const(size) and constant_value(size) in (2, 3, 4) and size.type.is_integer):
        raise tr.error("kk.identity(n) needs n of 2, 3 or 4, known when the kernel is "
                       "compiled", node)
    dtype = args[1] if len(args) > 1 else kwargs.get("dtype", PyConst(float))
    element = dtype_argument(tr, dtype, node, "kk.identity's dtype").strong
    n = constant_value(size)
    return tr.vector([tr.constant(1 if r == c else 0, element) for r in range(n)
                      for c in range(n)], (n, n))


@handles(kk.outer)
def outer(tr, node):
    (a, b), _ = positional(tr, node, 2, 2, "kk.outer")
    a, b = (vector_argument(tr, v, node, "kk.outer") for v in (a, b))
    return tr.vector([tr.binary("mul", x, y, node) for x in tr.elements(a)
                      for y in tr.elements(b)], (a.type.shape[0], b.type.shape[0]))


@handles(kk.skew)
def skew(tr, node):
    (v,), _ = positional(tr, node, 1, 1, "kk.skew")
    v = vector_argument(tr, v, node, "kk.skew", 1, 3)
    x, y, z = tr.elements(v)
    zero = tr.constant(0, v.type.element)

    def neg(value):
        return tr.unary("neg", value, node)
    return tr.vector([zero, neg(z), y, z, zero, neg(x), neg(y), x, zero], (3, 3))


@handles(kk.ddot)
def ddot(tr, node):
    (a, b), _ = positional(tr, node, 2, 2, "kk.ddot")
    a, b = (vector_argument(tr, m, node, "kk.ddot", ndim=2) for m in (a, b))
    if a.type.shape != b.type.shape:
        raise tr.error(f"kk.ddot of matrices of different shapes: {a.type.name} and "
                       f"{b.type.name}", node)
    return tr.sum_of_products(tr.elements(a), tr.elements(b), node)


def cofactor_determinant(tr, rows: list[list[Value]], node) -> Value:
    """By cofactors along the first row, as the host's `lang.vectors._determinant`."""
    def op(name, x, y):
        return tr.binary(name, x, y, node)
    if len(rows) == 2:
        return op("sub", op("mul", rows[0][0], rows[1][1]), op("mul", rows[0][1], rows[1][0]))
    total = None
    for column in range(len(rows)):
        minor = [row[:column] + row[column + 1:] for row in rows[1:]]
        term = op("mul", rows[0][column], cofactor_determinant(tr, minor, node))
        total = term if total is None else op("sub" if column % 2 else "add", total, term)
    return total


@handles(kk.determinant)
def determinant(tr, node):
    (m,), _ = positional(tr, node, 1, 1, "kk.determinant")
    m = square_matrix(tr, m, node, "kk.determinant")
    return cofactor_determinant(tr, rows_of(tr, m, as_float=True), node)


@handles(kk.inverse)
def inverse(tr, node):
    (m,), _ = positional(tr, node, 1, 1, "kk.inverse")
    rows = rows_of(tr, square_matrix(tr, m, node, "kk.inverse"), as_float=True)
    size = len(rows)
    det = cofactor_determinant(tr, rows, node)

    def neg(value):
        return tr.unary("neg", value, node)
    if size == 2:
        adjugate = [rows[1][1], neg(rows[0][1]), neg(rows[1][0]), rows[0][0]]
    else:
        adjugate = [None] * (size * size)
        for row in range(size):
            for column in range(size):
                minor = [r[:column] + r[column + 1:] for k, r in enumerate(rows) if k != row]
                cofactor = cofactor_determinant(tr, minor, node)
                adjugate[column * size + row] = neg(cofactor) if (row + column) % 2 \
                    else cofactor
    return tr.vector([tr.binary("truediv", a, det, node) for a in adjugate], (size, size))


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
