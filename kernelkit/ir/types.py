"""IR types: value objects, compared by value, printed by their `name`.

This module owns the type system of the IR and NumPy-style promotion (NEP 50).
It knows nothing about Python ASTs, LLVM or backends.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np


class Kind(enum.Enum):
    BOOL = "bool"
    INT = "int"
    UINT = "uint"
    FLOAT = "float"


class IRType:
    """Base of all IR types."""

    __slots__ = ()

    @property
    def name(self) -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class ScalarType(IRType):
    """A number. `weak` marks Python literals and Python scalars (NEP 50): they take the
    precision of the other operand instead of imposing their own."""

    kind: Kind
    bits: int
    weak: bool = False

    @property
    def name(self) -> str:
        if self.weak:
            return {Kind.INT: "int", Kind.FLOAT: "float", Kind.BOOL: "bool"}[self.kind]
        if self.kind is Kind.BOOL:
            return "bool"
        return {Kind.INT: "i", Kind.UINT: "u", Kind.FLOAT: "f"}[self.kind] + str(self.bits)

    @property
    def is_float(self) -> bool:
        return self.kind is Kind.FLOAT

    @property
    def is_integer(self) -> bool:
        return self.kind in (Kind.INT, Kind.UINT)

    @property
    def is_signed(self) -> bool:
        return self.kind is Kind.INT

    @property
    def is_bool(self) -> bool:
        return self.kind is Kind.BOOL

    @property
    def strong(self) -> ScalarType:
        return ScalarType(self.kind, self.bits) if self.weak else self

    @property
    def numpy_dtype(self) -> np.dtype:
        return _TO_NUMPY[self.strong]

    @property
    def itemsize(self) -> int:
        return max(self.bits // 8, 1)


@dataclass(frozen=True, slots=True)
class ArrayType(IRType):
    """An array. `space` is where its elements live: 'global' arrays are kernel arguments
    (pointer, shape and strides at run time); 'local' (work-group shared) and 'private'
    arrays have a static `shape` and C layout.  `layout` 'C' means C-contiguous, so
    strides follow from the shape; 'A' means any strides."""

    dtype: ScalarType
    ndim: int
    layout: str = "A"
    const: bool = False
    space: str = "global"
    shape: tuple[int, ...] | None = None

    @property
    def name(self) -> str:
        if self.space == "global":
            flags = f", {self.layout}" + (", const" if self.const else "")
            return f"array<{self.dtype.name}, {self.ndim}{flags}>"
        dims = "x".join(str(d) for d in self.shape)
        return f"{self.space}<{self.dtype.name}, {dims}>"


@dataclass(frozen=True, slots=True)
class TupleType(IRType):
    elements: tuple[IRType, ...]

    @property
    def name(self) -> str:
        return "tuple<" + ", ".join(t.name for t in self.elements) + ">"


@dataclass(frozen=True, slots=True)
class VectorType(TupleType):
    """A small vector (`shape` (n,)) or matrix (`shape` (rows, cols)) of one scalar type:
    `kk.vec3`, `kk.mat33`. A tuple of its elements in row-major order, which the frontend
    gives arithmetic (elementwise, by scalars, `@`); every other layer sees a tuple."""

    shape: tuple[int, ...] = ()

    @property
    def element(self) -> ScalarType:
        return self.elements[0]

    @property
    def name(self) -> str:
        kind = "vec" if len(self.shape) == 1 else "mat"
        return f"{kind}<{self.element.name}, " + "x".join(map(str, self.shape)) + ">"


def vector_type(element: ScalarType, shape: tuple[int, ...]) -> VectorType:
    return VectorType((element,) * int(np.prod(shape)), tuple(shape))


@dataclass(frozen=True, slots=True)
class StructType(IRType):
    """A frozen dataclass passed to a kernel: its class (module and qualified name) and
    its fields, each a scalar, a tuple of scalars or a struct. A kernel argument's type,
    never an IR value's: a launch passes its scalar leaves (`leaves`), each as a
    parameter of the kernel, and the frontend rebuilds the fields from them."""

    module: str
    qualname: str
    fields: tuple[tuple[str, IRType], ...]

    @property
    def name(self) -> str:
        return f"{self.qualname}(" + ", ".join(f"{field}: {field_type.name}"
                                               for field, field_type in self.fields) + ")"


@dataclass(frozen=True, slots=True)
class FunctionRefType(IRType):
    """A reference to a function of the module (`kk.deferred`): its parameter types and
    result type."""
    params: tuple[IRType, ...]
    result: IRType

    @property
    def name(self) -> str:
        return "funcref<" + ", ".join(t.name for t in self.params) + \
            f" -> {self.result.name}>"


@dataclass(frozen=True, slots=True)
class VoidType(IRType):
    @property
    def name(self) -> str:
        return "void"


void = VoidType()
bool_ = ScalarType(Kind.BOOL, 1)
int8, int16, int32, int64 = (ScalarType(Kind.INT, b) for b in (8, 16, 32, 64))
uint8, uint16, uint32, uint64 = (ScalarType(Kind.UINT, b) for b in (8, 16, 32, 64))
float16, float32, float64 = (ScalarType(Kind.FLOAT, b) for b in (16, 32, 64))
weak_int = ScalarType(Kind.INT, 64, weak=True)
weak_float = ScalarType(Kind.FLOAT, 64, weak=True)
index_type = int64

SCALAR_TYPES = (bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
                float16, float32, float64)
SCALARS_BY_NAME: dict[str, ScalarType] = {t.name: t for t in SCALAR_TYPES}
SCALARS_BY_NAME.update({"int": weak_int, "float": weak_float})

_TO_NUMPY = {t: np.dtype(n) for t, n in zip(
    SCALAR_TYPES, ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                   "uint64", "float16", "float32", "float64"))}
_FROM_NUMPY = {d: t for t, d in _TO_NUMPY.items()}


def from_numpy(dtype) -> ScalarType | None:
    """The scalar type of a NumPy dtype, or None if the dtype is not supported."""
    return _FROM_NUMPY.get(np.dtype(dtype))


def promote(a: ScalarType, b: ScalarType) -> ScalarType:
    """The result type of a binary arithmetic operation, following NumPy's NEP 50:
    a weak (Python) scalar adopts the other operand's type unless its kind is higher."""
    if a == b:
        return a
    if a.weak and b.weak:
        return a if _kind_rank(a) >= _kind_rank(b) else b
    if a.weak or b.weak:
        weak, strong = (a, b) if a.weak else (b, a)
        if _kind_rank(weak) <= _kind_rank(strong):
            return strong
        # A Python float with an integer array: NumPy gives the default float.
        return float64 if weak.is_float else int64
    result = np.promote_types(a.numpy_dtype, b.numpy_dtype)
    return _FROM_NUMPY[result]


def _kind_rank(t: ScalarType) -> int:
    return {Kind.BOOL: 0, Kind.UINT: 1, Kind.INT: 1, Kind.FLOAT: 2}[t.kind]


def unify(a: IRType, b: IRType) -> IRType | None:
    """The type a variable takes when it holds values of types `a` and `b` at a merge
    point, or None if no single type can hold both."""
    if a == b:
        return a
    if isinstance(a, ScalarType) and isinstance(b, ScalarType):
        return promote(a, b)
    if isinstance(a, VectorType) or isinstance(b, VectorType):
        if isinstance(a, VectorType) and isinstance(b, VectorType) and a.shape == b.shape:
            element = unify(a.element, b.element)
            return None if element is None else vector_type(element.strong, a.shape)
        return None
    if isinstance(a, TupleType) and isinstance(b, TupleType) and len(a.elements) == len(b.elements):
        elements = tuple(unify(x, y) for x, y in zip(a.elements, b.elements))
        return None if None in elements else TupleType(elements)
    if isinstance(a, StructType) and isinstance(b, StructType) and \
            (a.module, a.qualname) == (b.module, b.qualname) and \
            [name for name, _ in a.fields] == [name for name, _ in b.fields]:
        fields = tuple(unify(x, y) for (_, x), (_, y) in zip(a.fields, b.fields))
        return None if None in fields else \
            StructType(a.module, a.qualname, tuple(zip((n for n, _ in a.fields), fields)))
    return None


def leaves(argtype: IRType, path: tuple = ()) -> list[tuple[tuple, IRType]]:
    """The parts of a struct or tuple `argtype` that are not structs or tuples, depth
    first, each with its path from `argtype` (field names and tuple positions): how a
    struct or tuple argument is passed to a kernel, one parameter per leaf. Any other
    type is its own only leaf."""
    if isinstance(argtype, StructType):
        return [leaf for field, field_type in argtype.fields
                for leaf in leaves(field_type, (*path, field))]
    if isinstance(argtype, TupleType):
        return [leaf for position, element in enumerate(argtype.elements)
                for leaf in leaves(element, (*path, position))]
    return [(path, argtype)]


def path_text(path: tuple) -> str:
    """A leaf's path (`leaves`) as Python writes it after the value's name: '.inner.y',
    '[0]'."""
    return "".join(f".{part}" if isinstance(part, str) else f"[{part}]" for part in path)


def parse_type(text: str) -> IRType:
    """The inverse of `IRType.name`."""
    text = text.strip()
    if text == "void":
        return void
    if text in SCALARS_BY_NAME:
        return SCALARS_BY_NAME[text]
    head, _, rest = text.partition("<")
    body = rest[:-1]
    if head == "funcref":
        params, _, result = body.rpartition(" -> ")
        return FunctionRefType(tuple(parse_type(p) for p in split_top_level(params)),
                               parse_type(result))
    if head in ("vec", "mat"):
        element, extents = (p.strip() for p in split_top_level(body))
        return vector_type(SCALARS_BY_NAME[element], tuple(int(d) for d in extents.split("x")))
    if head == "tuple":
        return TupleType(tuple(parse_type(p) for p in split_top_level(body)))
    parts = [p.strip() for p in split_top_level(body)]
    dtype = SCALARS_BY_NAME[parts[0]]
    if head == "array":
        return ArrayType(dtype, int(parts[1]), parts[2], const="const" in parts[3:])
    if head in ("local", "private"):
        shape = tuple(int(d) for d in parts[1].split("x"))
        return ArrayType(dtype, len(shape), "C", space=head, shape=shape)
    raise ValueError(f"unknown type {text!r}")


def split_top_level(text: str) -> list[str]:
    """`text` split at the commas outside any brackets (<>, [], ())."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char in "<[(":
            depth += 1
        elif char in ">])" and text[index - 1:index + 1] != "->":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    if text[start:].strip():
        parts.append(text[start:])
    return parts
