"""How kernel arguments are typed from values and packed for the device.

The packed layout (`ArgumentLayout`) is one little-endian record: the launch header
(ndrange and number of groups per axis, the error-record pointer), then each argument:
an array as its data pointer, extents and strides (in elements); a scalar in an 8-byte
slot. Code generators read the same layout through `fields`."""
from __future__ import annotations

import ctypes
import struct
from dataclasses import dataclass

import numpy as np

from ..errors import LaunchError
from ..ir import types as T

_SCALAR_CODES = {"bool": "?7x", "i8": "b7x", "i16": "h6x", "i32": "i4x", "i64": "q",
                 "u8": "B7x", "u16": "H6x", "u32": "I4x", "u64": "Q", "f16": "e6x",
                 "f32": "f4x", "f64": "d", "int": "q", "float": "d"}


def scalar_type_of(value) -> T.ScalarType | None:
    if isinstance(value, np.generic):  # before float: np.float64 is a float subclass
        return T.from_numpy(value.dtype)
    if isinstance(value, bool):
        return T.bool_
    if isinstance(value, int):
        return T.weak_int
    if isinstance(value, float):
        return T.weak_float
    return None


def array_type_of(dtype, ndim: int, c_contiguous: bool, const: bool, name: str,
                  kernel: str) -> T.ArrayType:
    scalar = T.from_numpy(dtype)
    if scalar is None:
        raise LaunchError(f"kernel '{kernel}': argument '{name}' has dtype {dtype}, which kernels "
                          "do not support (use bool, int8..int64, uint8..uint64 or "
                          "float16/32/64)")
    return T.ArrayType(scalar, ndim, "C" if c_contiguous else "A", const)


@dataclass(frozen=True)
class Field:
    name: str
    offset: int
    type: T.IRType   # scalars: their type; arrays: the ArrayType (pointer, shape, strides)


class ArgumentLayout:
    def __init__(self, argtypes: tuple[T.IRType, ...], ndim: int):
        codes = ["<", "q" * (2 * ndim), "q"]
        offset = 8 * (2 * ndim + 1)
        fields = []
        for index, argtype in enumerate(argtypes):
            fields.append(Field(f"arg{index}", offset, argtype))
            if isinstance(argtype, T.ArrayType):
                codes.append("q" * (1 + 2 * argtype.ndim))
                offset += 8 * (1 + 2 * argtype.ndim)
            else:
                codes.append(_SCALAR_CODES[argtype.name])
                offset += 8
        self.ndim = ndim
        self.fields = fields
        self.size = offset
        self.struct = struct.Struct("".join(codes))
        assert self.struct.size == offset

    def ndrange_offset(self, axis: int) -> int:
        return 8 * axis

    def groups_offset(self, axis: int) -> int:
        return 8 * (self.ndim + axis)

    error_record_offset = property(lambda self: 8 * 2 * self.ndim)


def numpy_argument_key(value):
    """A cheap key with equal keys for NumPy arrays and scalars of equal argument types.
    An array's key says whether it is writable: a read-only one is typed (and refused
    where the kernel may write it) apart from writable ones."""
    kind = type(value)
    if kind is np.ndarray:
        flags = value.flags
        return (value.dtype, value.ndim, flags.c_contiguous, flags.writeable)
    if kind is float or kind is int:
        return kind
    if isinstance(value, np.ndarray):   # a subclass: np.memmap, say
        flags = value.flags
        return (kind, value.dtype, value.ndim, flags.c_contiguous, flags.writeable)
    return kind


def numpy_argument_type(value, const: bool, name: str, kernel: str) -> T.IRType | None:
    """The argument type of a NumPy array or a Python/NumPy scalar; None for anything else.
    A read-only array (`flags.writeable` False: a view made read-only, an array over
    `bytes`, a memory map opened with mode 'r') is taken only for a kk.Const parameter."""
    if isinstance(value, np.ndarray):
        if not const and not value.flags.writeable:
            raise read_only_argument(name, kernel, "its flags.writeable is False")
        return array_type_of(value.dtype, value.ndim, value.flags.c_contiguous, const, name,
                             kernel)
    return scalar_type_of(value)


def read_only_argument(name: str, kernel: str, why: str) -> LaunchError:
    """The error for a read-only array passed for a parameter that is not kk.Const."""
    return LaunchError(f"kernel '{kernel}': argument '{name}' is read-only ({why}) "
                       f"and parameter '{name}' is not annotated kk.Const, so the kernel may "
                       f"write it\n  hint: annotate the parameter '{name}: kk.Const' if the "
                       f"kernel only reads it; otherwise pass a writable copy")


def unsupported_argument(value, name: str, kernel: str, accepted: str,
                         as_array: str) -> LaunchError:
    """The error for an argument no kernel can take, saying what to pass instead.
    `accepted` names what the backend's kernels take; `as_array` is how to make one of
    its arrays from host data, with `{name}` for the argument."""
    kind = type(value).__name__
    make_array = as_array.format(name=name)
    if isinstance(value, (complex, np.complexfloating)):
        advice = (f"kernels have no complex numbers: pass the real and imaginary parts as "
                  f"two arguments ({name}.real, {name}.imag)")
    elif isinstance(value, np.generic):
        advice = (f"its dtype {value.dtype} is not one kernels support: pass a bool, an "
                  f"int8..int64 or uint8..uint64, or a float16/32/64")
    elif isinstance(value, (list, tuple)) and value and \
            all(hasattr(item, "shape") for item in value):
        advice = f"pass each of its {len(value)} arrays as an argument of its own"
    elif isinstance(value, (list, tuple)) or hasattr(value, "__array_interface__") or \
            hasattr(value, "__array__"):
        advice = f"pass an array: {make_array}"
    elif value is None:
        advice = "pass an array or a number"
    else:
        advice = "pass the arrays and numbers it holds as arguments of their own"
    return LaunchError(f"kernel '{kernel}': argument '{name}' has type {kind}, which kernels "
                       f"cannot take; they take {accepted}\n  hint: {advice}")


def scalar_conversion(argtype: T.IRType) -> str:
    """The Python type a launch record's slot for a scalar of `argtype` holds."""
    return "bool" if argtype.is_bool else "float" if argtype.is_float else "int"


def packing_function(argtypes: tuple[T.IRType, ...], names: list[str], array_fields,
                     namespace: dict, finish=None):
    """`pack(header, args, context) -> tuple`: the launch record's fields (`header`, then
    each argument's), written out as Python for these argument types, so that a launch
    costs one call rather than one per argument. `array_fields(variable, argtype, name)` is
    the backend's expression for an array argument's fields (pointer, extents, strides in
    elements); it may use `context` and the names in `namespace`. Scalars convert to the
    Python type their slot holds. With `finish`, `pack` returns `finish(*fields)` instead
    (a `struct.Struct.pack`, say), with no tuple made in between."""
    values = [f"a{index}" for index in range(len(argtypes))]
    parts = ["*header"]
    for value, argtype, name in zip(values, argtypes, names):
        if isinstance(argtype, T.ArrayType):
            parts.append(f"*{array_fields(value, argtype, name)}")
        else:
            parts.append(f"{scalar_conversion(argtype)}({value})")
    source = "def pack(header, args, context):\n"
    if values:
        source += f"    {', '.join(values)}, = args\n"
    if finish is None:
        source += f"    return ({', '.join(parts)},)\n"
    else:
        source += f"    return finish({', '.join(parts)})\n"
    scope = dict(namespace, finish=finish)
    exec(compile(source, "<kernelkit launch record>", "exec"), scope)  # noqa: S102
    return scope["pack"]


def element_strides(strides: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Byte strides as element strides; an array whose strides are not multiples of its
    item size (NumPy can make one) cannot be passed to a kernel."""
    if any(s % itemsize for s in strides):
        raise LaunchError(f"an array with strides {strides} (not multiples of the item size "
                          f"{itemsize}) cannot be passed to a kernel")
    return tuple(s // itemsize for s in strides)


def _data_pointer_reader():
    """The fastest way to read an ndarray's data pointer on this interpreter: the
    address field of NumPy's array struct (`PyArrayObject.data`, right after the object
    header), at an offset found and checked here once, in 0.2 us; else the array
    interface (2 us, a dict per call)."""
    probes = [np.zeros(3, np.float64), np.arange(10, dtype=np.int8)[3:], np.ones((2, 2))]
    expected = [p.__array_interface__["data"][0] for p in probes]
    read = ctypes.c_void_p.from_address
    for offset in range(8, 72, 8):
        if all(read(id(p) + offset).value == e for p, e in zip(probes, expected)):
            return lambda array: read(id(array) + offset).value or 0
    return lambda array: array.__array_interface__["data"][0]


data_pointer = _data_pointer_reader()
"""`data_pointer(ndarray) -> int`: the address of the array's first element."""
