"""How kernel arguments are typed from values and packed for the device.

The packed layout (`ArgumentLayout`) is one little-endian record: the launch header
(ndrange and number of groups per axis, the error-record pointer), then each argument:
an array as its data pointer, extents and strides (in elements); a scalar in an 8-byte
slot; a frozen dataclass or a tuple of scalars (`struct_type_of`) as its scalar leaves
(`ir.types.leaves`), a slot each, in the order of its fields. Code generators read the
same layout through `fields`.

Arrays in host memory come as NumPy arrays or as other libraries' arrays that say where
their memory is: through DLPack (`__dlpack_device__()` is the CPU) or NumPy's array
interface. `host_array` sees the latter as NumPy arrays over the same memory, so a
kernel's writes reach the library's array."""
from __future__ import annotations

import ctypes
import dataclasses
import struct
from dataclasses import dataclass

import numpy as np

from ..errors import LaunchError
from ..ir import types as T

DLPACK_CPU = 1
"""DLPack's device type of host memory (kDLCPU)."""

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


def struct_type_of(value, name: str, kernel: str, array_type=None
                   ) -> T.StructType | T.TupleType | None:
    """The argument type of a frozen dataclass instance or a tuple whose leaves are Python
    or NumPy scalars (a dataclass's fields may also hold tuples of scalars and such
    dataclasses, and arrays): `StructType` and `TupleType`, their leaves typed as scalar
    arguments are (NEP 50: a Python float is a weak float, a np.float32 a float32), a
    dataclass's arrays by the backend's `array_type(array, where)`. None for anything
    else, a tuple of arrays included (`unsupported_argument` says what to do with it); a
    dataclass that is not frozen, or a leaf of another kind, is an error naming it."""
    if isinstance(value, tuple):
        if value and all(hasattr(item, "shape") and not isinstance(item, np.generic)
                         for item in value):
            return None
    elif not is_dataclass_instance(value):
        return None
    return _struct_type(value, name, name, kernel, False, array_type)


_STRUCT_LEAVES = ("Python or NumPy scalars (bool, int, float, np.float32 ...), tuples of "
                  "them, arrays, or frozen dataclasses of those")


def _struct_type(value, where: str, name: str, kernel: str, in_tuple: bool,
                 array_type) -> T.IRType:
    """The type of `value`, which is `where` in the argument `name` (`p.inner.x`)."""
    scalar = scalar_type_of(value)
    if scalar is not None:
        return scalar
    kind = type(value)
    if isinstance(value, tuple):
        return T.TupleType(tuple(_struct_type(item, f"{where}[{position}]", name, kernel, True,
                                              array_type)
                                 for position, item in enumerate(value)))
    if array_type is not None and not in_tuple and _is_array(value):
        return array_type(value, where)
    if is_dataclass_instance(value) and not in_tuple:
        if not kind.__dataclass_params__.frozen:
            place = f"argument '{name}'" if where == name else f"argument '{name}': {where}"
            raise LaunchError(f"kernel '{kernel}': {place} is a {kind.__qualname__}, a "
                              f"dataclass that is not frozen; kernels take frozen dataclasses, "
                              f"whose fields cannot change once they are made\n  hint: "
                              f"declare it @dataclasses.dataclass(frozen=True)")
        remember_struct_class(kind)
        return T.StructType(kind.__module__, kind.__qualname__,
                            tuple((field.name, _struct_type(getattr(value, field.name),
                                                            f"{where}.{field.name}", name,
                                                            kernel, False, array_type))
                                  for field in dataclasses.fields(value)))
    if in_tuple:
        allowed = "a tuple in a kernel argument holds Python or NumPy scalars or tuples of them"
    else:
        allowed = f"the fields of a dataclass argument hold {_STRUCT_LEAVES}"
    if _is_array(value):
        advice = f"pass the array as an argument of its own and leave it out of '{name}'"
    elif is_dataclass_instance(value):
        advice = f"pass {where} as an argument of its own"
    elif isinstance(value, (complex, np.complexfloating)):
        advice = "kernels have no complex numbers: hold its real and imaginary parts apart"
    else:
        advice = f"hold a number there, or pass {where} as an argument of its own"
    shown = str(value.dtype) if isinstance(value, np.generic) else kind.__name__
    raise LaunchError(f"kernel '{kernel}': argument '{name}' cannot be passed: {where} is a "
                      f"{shown}, and {allowed}\n  hint: {advice}")


_CLASSES: dict[tuple[str, str], type] = {}
"""The dataclass of each `StructType` an argument was given (by module and qualified
name; a class defined in a function has no other way back from its type)."""


def struct_class(struct: T.StructType) -> type | None:
    """The class of the dataclasses of `struct`'s type, or None if none was seen."""
    return _CLASSES.get((struct.module, struct.qualname))


def remember_struct_class(kind: type) -> None:
    _CLASSES[(kind.__module__, kind.__qualname__)] = kind


def is_dataclass_instance(value) -> bool:
    return hasattr(type(value), "__dataclass_fields__")


def _is_array(value) -> bool:
    return isinstance(value, np.ndarray) or in_host_memory(value) or \
        device_memory(value) is not None


def struct_key(value, array_key):
    """The argument key of a dataclass instance or a tuple: its class, and the keys of
    what it holds (a Python float and a np.float32 field type apart; an array field by
    the backend's `array_key`)."""
    if isinstance(value, tuple):
        return (type(value), *(struct_key(item, array_key) for item in value))
    if is_dataclass_instance(value):
        return (type(value), *(struct_key(getattr(value, field.name), array_key)
                               for field in dataclasses.fields(value)))
    kind = type(value)
    if kind is float or kind is int or kind is bool or isinstance(value, np.generic):
        return kind
    return array_key(value)


def supported_dtypes() -> str:
    """The dtypes of the arrays and scalars kernels take, as a sentence lists them."""
    names = [str(scalar.numpy_dtype) for scalar in T.SCALAR_TYPES]
    return f"{', '.join(names[:-1])} or {names[-1]}"


def array_type_of(dtype, ndim: int, c_contiguous: bool, const: bool, name: str,
                  kernel: str) -> T.ArrayType:
    scalar = T.from_numpy(dtype)
    if scalar is None and np.dtype(dtype).names:
        raise LaunchError(f"kernel '{kernel}': argument '{name}' is a structured array "
                          f"(dtype {dtype}); kernels take its fields as arrays of their own, "
                          f"held by a frozen dataclass (a struct of arrays: each field's "
                          f"elements side by side, so that neighbouring work-items read "
                          f"neighbouring addresses)\n  hint: pass Fields(**{{name: a[name] "
                          f"for name in a.dtype.names}}), Fields a dataclass with those "
                          f"fields: the views share the array's memory")
    if scalar is None:
        raise LaunchError(f"kernel '{kernel}': argument '{name}' has dtype {dtype}, which kernels "
                          f"do not support (use {supported_dtypes()})")
    return T.ArrayType(scalar, ndim, "C" if c_contiguous else "A", const)


def dlpack_device(value) -> tuple[int, int] | None:
    """(device type, device id) of an object that speaks DLPack, or None (no DLPack, or a
    producer that cannot say)."""
    device = getattr(value, "__dlpack_device__", None)
    if device is None or not hasattr(value, "__dlpack__"):
        return None
    try:
        device_type, device_id = device()
    except Exception:
        return None
    return int(device_type), int(device_id)


def in_host_memory(value) -> bool:
    """Whether `value` is an array in host memory: a NumPy array, or another library's
    array whose DLPack device is the CPU or (without DLPack) that has NumPy's array
    interface. NumPy scalars are numbers, not arrays."""
    if isinstance(value, np.ndarray):
        return True
    if isinstance(value, np.generic):
        return False
    device = dlpack_device(value)
    if device is not None:
        return device[0] == DLPACK_CPU
    return hasattr(value, "__array_interface__")


def host_array(value) -> np.ndarray | None:
    """`value` as a NumPy array over the same memory (never a copy) if it is in host memory
    (`in_host_memory`), else None. A library may refuse to share its memory (PyTorch, for
    a tensor that requires grad): its error propagates."""
    if isinstance(value, np.ndarray):
        return value
    if not in_host_memory(value):
        return None
    if dlpack_device(value) is None:
        return np.asarray(value)
    return _dlpack_view(value)


_NUMPY_TAKES_VERSIONED_DLPACK = np.lib.NumpyVersion(np.__version__) >= "2.1.0"
_VERSIONED_CAPSULE = b"dltensor_versioned"
_READ_ONLY_FLAG = 1   # DLPACK_FLAG_BITMASK_READ_ONLY
_FLAGS_OFFSET = 24
"""Where `flags` is in DLPack 1.0's DLManagedTensorVersioned: after the version (two
uint32), the manager context and the deleter (two pointers)."""
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))


def _dlpack_view(value) -> np.ndarray:
    """NumPy's view of a DLPack producer's host memory: writable where the producer says
    so. A DLPack 1.0 producer says it with its read-only flag; one older than DLPack 1.0
    cannot say, and its memory may be immutable (a JAX array), so its view is read-only
    (kernels may read it, as a `kk.Const` argument), as NumPy makes it."""
    capsule = None
    if _NUMPY_TAKES_VERSIONED_DLPACK:
        try:
            capsule = value.__dlpack__(stream=None, max_version=(1, 0), copy=False)
        except TypeError:   # a producer older than DLPack 1.0
            capsule = None
    if capsule is None:
        capsule = value.__dlpack__(stream=None)
    view = np.from_dlpack(_Exported(capsule, value.__dlpack_device__()))
    if view.flags.writeable or not _capsule_is_valid(capsule, _VERSIONED_CAPSULE):
        return view
    manager = _capsule_pointer(capsule, _VERSIONED_CAPSULE)
    if ctypes.c_uint64.from_address(manager + _FLAGS_OFFSET).value & _READ_ONLY_FLAG:
        return view
    # NumPy before 2.2.5 makes every DLPack view read-only; the producer said it is not.
    return np.asarray(_WritableAlias(view))


class _Exported:
    """A capsule already exported, as `np.from_dlpack` takes it."""

    def __init__(self, capsule, device):
        self.capsule, self.device = capsule, device

    def __dlpack__(self, **options):
        return self.capsule

    def __dlpack_device__(self):
        return self.device


class _WritableAlias:
    """`view`'s memory through the array interface, without NumPy's read-only mark; it
    keeps `view`, and so the producer's memory, alive."""

    def __init__(self, view: np.ndarray):
        interface = dict(view.__array_interface__)
        interface["data"] = (interface["data"][0], False)
        self.__array_interface__ = interface
        self.view = view


def device_memory(value) -> str | None:
    """Where `value`'s memory is, in words, if it is an array in device memory (a GPU's):
    one with the CUDA array interface, or a DLPack device other than the CPU. None for
    anything else."""
    device = dlpack_device(value)
    if device is not None and device[0] != DLPACK_CPU:
        return f"DLPack device {device}"
    try:
        if hasattr(value, "__cuda_array_interface__"):
            return "CUDA array interface"
    except Exception:  # a producer that refuses to describe it (PyTorch: requires grad)
        return "CUDA array interface"
    return None


@dataclass(frozen=True)
class Field:
    name: str
    offset: int
    type: T.IRType   # scalars: their type; arrays: the ArrayType (pointer, shape, strides)


SCALAR_SLOT = 8
"""Bytes a scalar takes in a launch record, whatever its type (`scalar_slot`)."""


def scalar_slot(argtype: T.ScalarType) -> struct.Struct:
    """The struct of a scalar's slot in a launch record: its value, padded to
    `SCALAR_SLOT` bytes."""
    return struct.Struct("<" + _SCALAR_CODES[argtype.name])


class ArgumentLayout:
    def __init__(self, argtypes: tuple[T.IRType, ...], ndim: int):
        codes = ["<", "q" * (2 * ndim), "q"]
        offset = 8 * (2 * ndim + 1)
        fields = []
        for index, argtype in enumerate(argtypes):
            for path, leaf in T.leaves(argtype):
                fields.append(Field(f"arg{index}{T.path_text(path)}", offset, leaf))
                if isinstance(leaf, T.ArrayType):
                    codes.append("q" * (1 + 2 * leaf.ndim))
                    offset += 8 * (1 + 2 * leaf.ndim)
                else:
                    codes.append(_SCALAR_CODES[leaf.name])
                    offset += SCALAR_SLOT
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
    where the kernel may write it) apart from writable ones. Another library's array in
    host memory has the key of its NumPy view (`host_array`), with its own type."""
    kind = type(value)
    if kind is np.ndarray:
        flags = value.flags
        return (value.dtype, value.ndim, flags.c_contiguous, flags.writeable)
    if kind is float or kind is int or kind is bool or isinstance(value, np.generic):
        return kind
    if isinstance(value, np.ndarray):   # a subclass: np.memmap, say
        flags = value.flags
        return (kind, value.dtype, value.ndim, flags.c_contiguous, flags.writeable)
    if isinstance(value, tuple) or is_dataclass_instance(value):
        return struct_key(value, numpy_argument_key)
    try:
        view = host_array(value)
    except Exception:  # the library refuses to share it; argument_type says why, by name
        return ("refused", kind)
    if view is None:
        return kind
    flags = view.flags
    return (kind, view.dtype, view.ndim, flags.c_contiguous, flags.writeable)


def numpy_argument_type(value, const: bool, name: str, kernel: str) -> T.IRType | None:
    """The argument type of a NumPy array, a Python/NumPy scalar, or a frozen dataclass or
    tuple of scalars (`struct_type_of`); None for anything else. A read-only array
    (`flags.writeable` False: a view made read-only, an array over `bytes`, a memory map
    opened with mode 'r') is taken only for a kk.Const parameter."""
    if isinstance(value, np.ndarray):
        if not const and not value.flags.writeable:
            raise read_only_argument(name, kernel, "its flags.writeable is False")
        return array_type_of(value.dtype, value.ndim, value.flags.c_contiguous, const, name,
                             kernel)
    scalar = scalar_type_of(value)
    if scalar is not None:
        return scalar
    return struct_type_of(value, name, kernel, lambda array, where: numpy_array_field_type(
        array, const, where, kernel))


def numpy_array_field_type(value, const: bool, where: str, kernel: str) -> T.ArrayType:
    """The type of an array a dataclass argument holds (`where`: `p.x`), which on the
    host is a NumPy array."""
    if not isinstance(value, np.ndarray):
        raise LaunchError(f"kernel '{kernel}': {where} is a {type(value).__name__}; a "
                          f"dataclass argument's arrays are NumPy arrays on the CPU\n  hint: "
                          f"hold np.asarray(...) of it, or the backend's array "
                          f"(kk.to_backend)")
    if not const and not value.flags.writeable:
        parameter = where.split(".")[0]
        raise LaunchError(f"kernel '{kernel}': {where} is read-only (its flags.writeable is "
                          f"False) and parameter '{parameter}' is not annotated kk.Const, so "
                          f"the kernel may write it\n  hint: annotate '{parameter}: kk.Const' "
                          f"if the kernel only reads it; otherwise hold a writable copy")
    return array_type_of(value.dtype, value.ndim, value.flags.c_contiguous, const, where,
                         kernel)


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
        advice = (f"its dtype {value.dtype} is not one kernels support: pass a scalar of "
                  f"dtype {supported_dtypes()}")
    elif isinstance(value, (list, tuple)) and value and \
            all(hasattr(item, "shape") for item in value):
        advice = f"pass each of its {len(value)} arrays as an argument of its own"
    elif isinstance(value, (list, tuple)) or in_host_memory(value) or \
            hasattr(value, "__array__"):
        advice = f"pass an array: {make_array}"
    elif value is None:
        advice = "pass an array or a number"
    else:
        advice = ("pass the arrays and numbers it holds as arguments of their own, or its "
                  "numbers as a @dataclasses.dataclass(frozen=True)")
    return LaunchError(f"kernel '{kernel}': argument '{name}' has type {kind}, which kernels "
                       f"cannot take; they take {accepted}\n  hint: {advice}")


def scalar_conversion(argtype: T.IRType) -> str:
    """The Python type a launch record's slot for a scalar of `argtype` holds."""
    return "bool" if argtype.is_bool else "float" if argtype.is_float else "int"


def packing_function(argtypes: tuple[T.IRType, ...], names: list[str], array_fields,
                     namespace: dict, finish=None):
    """`pack(header, args, context) -> tuple`: the launch record's fields (`header`, then
    each argument's), written out as Python for these argument types, so that a launch
    costs one call rather than one per argument. `names` are the compiled kernel's
    parameter names, one per leaf of the argument types (`ir.types.leaves`).
    `array_fields(variable, argtype, name)` is the backend's expression for an array
    argument's fields (pointer, extents, strides in elements); it may use `context` and
    the names in `namespace`. Scalars, and the scalar leaves of a struct or tuple argument,
    convert to the Python type their slot holds. With `finish`, `pack` returns
    `finish(*fields)` instead (a `struct.Struct.pack`, say), with no tuple made in
    between."""
    values = [f"a{index}" for index in range(len(argtypes))]
    parts = ["*header"]
    leaf_names = iter(names)
    for value, argtype in zip(values, argtypes):
        for path, leaf in T.leaves(argtype):
            name = next(leaf_names)
            if isinstance(leaf, T.ArrayType):
                parts.append(f"*{array_fields(value, leaf, name)}")
            else:
                parts.append(f"{scalar_conversion(leaf)}({value}{T.path_text(path)})")
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


def unpacking_source(names: list[str], indent: str) -> str:
    """Lines of a generated fast launcher (`Backend.fast_launcher`) that unpack `args` into
    `names`, returning False where their count differs (unpacking checks it: no len())."""
    if not names:
        return f"{indent}if args:\n{indent}    return False\n"
    return (f"{indent}try:\n"
            f"{indent}    {', '.join(names)}, = args\n"
            f"{indent}except ValueError:\n"
            f"{indent}    return False\n")


def launch_frame(names: list[str] | None, checks: list[str], indent: str) -> str:
    """Lines of a generated fast launcher (`Backend.fast_launcher`), the frame every
    backend's shares: unpack `args` into `names` (None: they are already), check their
    kinds (`checks`: expressions that hold where they are the launcher's), and find the
    launch's geometry by its ndrange `n` in `geometry` (kept per ndrange by the
    backend's general launch) as `launch`; returning False (the general launch takes
    it) where one of these fails."""
    return (f"{unpacking_source(names, indent) if names is not None else ''}"
            f"{indent}if not ({' and '.join(checks) or 'True'}):\n"
            f"{indent}    return False\n"
            f"{indent}try:\n"
            f"{indent}    launch = geometry.get(n if type(n) is tuple else (n,))\n"
            f"{indent}except TypeError:   # (an unhashable ndrange: `launch` says why)\n"
            f"{indent}    return False\n"
            f"{indent}if launch is None:\n"
            f"{indent}    return False\n")


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
