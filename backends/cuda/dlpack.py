"""DLPack, both ways: an array's memory as a `dltensor` capsule (`export_capsule`), and the
memory a producer's capsule describes (`import_capsule`).

DLPack is a small C ABI (dlpack.h, versions 0.8 and 1.0): a struct describing the
tensor, with a deleter the consumer calls when it lets go. Nothing here is specific to
a device: the CUDA array exports with device (kDLCUDA, ordinal), and the tests check
the layout against NumPy, which speaks DLPack for host memory."""
from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass

import numpy as np

CPU = 1            # kDLCPU
CUDA = 2           # kDLCUDA
CUDA_HOST = 3      # kDLCUDAHost (pinned host memory the device can read)
CUDA_MANAGED = 13  # kDLCUDAManaged
DEVICE_ACCESSIBLE = (CUDA, CUDA_HOST, CUDA_MANAGED)

READ_ONLY = 1      # DLPACK_FLAG_BITMASK_READ_ONLY
IS_COPIED = 2      # DLPACK_FLAG_BITMASK_IS_COPIED
VERSION = (1, 0)

_INT, _UINT, _FLOAT, _BOOL = 0, 1, 2, 6
_CODES = {"i": _INT, "u": _UINT, "f": _FLOAT, "b": _BOOL}
_KINDS = {code: kind for kind, code in _CODES.items()}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", _DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                ("deleter", _DELETER), ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


_LEGACY_NAME = b"dltensor"
_VERSIONED_NAME = b"dltensor_versioned"
_USED_LEGACY_NAME = b"used_dltensor"
_USED_VERSIONED_NAME = b"used_dltensor_versioned"

_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]

# The deleter of an exported tensor and the destructor of its capsule are native code:
# they may run while an exception is being raised (a capsule dropped on the way out of a
# failed call), or from another library's exit handlers after the interpreter has shut
# down, where Python code cannot run. The deleter drops the one reference that
# `manager_ctx` holds (on what keeps the structs and the exporting array alive); the
# destructor deletes a tensor no consumer took (a consumer renames the capsule).
_NATIVE = """
declare i32 @Py_IsInitialized()
declare i32 @PyGILState_Ensure()
declare void @PyGILState_Release(i32)
declare void @PyErr_Fetch(ptr, ptr, ptr)
declare void @PyErr_Restore(ptr, ptr, ptr)
declare void @Py_DecRef(ptr)
declare i32 @PyCapsule_IsValid(ptr, ptr)
declare ptr @PyCapsule_GetPointer(ptr, ptr)

@legacy = private constant [9 x i8] c"dltensor\\00"
@versioned = private constant [19 x i8] c"dltensor_versioned\\00"

define private void @release(ptr %managed, i64 %context_offset) {{
entry:
  %type = alloca ptr
  %value = alloca ptr
  %traceback = alloca ptr
  %initialized = call i32 @Py_IsInitialized()
  %alive = icmp ne i32 %initialized, 0
  br i1 %alive, label %drop, label %done
drop:
  %state = call i32 @PyGILState_Ensure()
  call void @PyErr_Fetch(ptr %type, ptr %value, ptr %traceback)
  %slot = getelementptr i8, ptr %managed, i64 %context_offset
  %holder = load ptr, ptr %slot
  call void @Py_DecRef(ptr %holder)
  %t = load ptr, ptr %type
  %v = load ptr, ptr %value
  %tb = load ptr, ptr %traceback
  call void @PyErr_Restore(ptr %t, ptr %v, ptr %tb)
  call void @PyGILState_Release(i32 %state)
  br label %done
done:
  ret void
}}

define void @kk_dlpack_delete_legacy(ptr %managed) {{
  call void @release(ptr %managed, i64 {legacy_context})
  ret void
}}

define void @kk_dlpack_delete_versioned(ptr %managed) {{
  call void @release(ptr %managed, i64 {versioned_context})
  ret void
}}

define private void @call_deleter(ptr %capsule, ptr %name, i64 %deleter_offset) {{
entry:
  %managed = call ptr @PyCapsule_GetPointer(ptr %capsule, ptr %name)
  %slot = getelementptr i8, ptr %managed, i64 %deleter_offset
  %deleter = load ptr, ptr %slot
  %present = icmp ne ptr %deleter, null
  br i1 %present, label %call, label %done
call:
  call void %deleter(ptr %managed)
  br label %done
done:
  ret void
}}

define void @kk_dlpack_capsule_destructor(ptr %capsule) {{
entry:
  %type = alloca ptr
  %value = alloca ptr
  %traceback = alloca ptr
  call void @PyErr_Fetch(ptr %type, ptr %value, ptr %traceback)
  %is_legacy = call i32 @PyCapsule_IsValid(ptr %capsule, ptr @legacy)
  %legacy_unused = icmp ne i32 %is_legacy, 0
  br i1 %legacy_unused, label %delete_legacy, label %check_versioned
delete_legacy:
  call void @call_deleter(ptr %capsule, ptr @legacy, i64 {legacy_deleter})
  br label %done
check_versioned:
  %is_versioned = call i32 @PyCapsule_IsValid(ptr %capsule, ptr @versioned)
  %versioned_unused = icmp ne i32 %is_versioned, 0
  br i1 %versioned_unused, label %delete_versioned, label %done
delete_versioned:
  call void @call_deleter(ptr %capsule, ptr @versioned, i64 {versioned_deleter})
  br label %done
done:
  %t = load ptr, ptr %type
  %v = load ptr, ptr %value
  %tb = load ptr, ptr %traceback
  call void @PyErr_Restore(ptr %t, ptr %v, ptr %tb)
  ret void
}}
"""


@functools.lru_cache(maxsize=1)
def _native() -> dict[str, int]:
    from kernelkit.compiler.native import host_functions, python_api
    text = _NATIVE.format(legacy_context=DLManagedTensor.manager_ctx.offset,
                          versioned_context=DLManagedTensorVersioned.manager_ctx.offset,
                          legacy_deleter=DLManagedTensor.deleter.offset,
                          versioned_deleter=DLManagedTensorVersioned.deleter.offset)
    return host_functions(text, python_api(
        "Py_IsInitialized", "PyGILState_Ensure", "PyGILState_Release", "PyErr_Fetch",
        "PyErr_Restore", "Py_DecRef", "PyCapsule_IsValid", "PyCapsule_GetPointer"))


def dtype_of(code: int, bits: int, lanes: int = 1) -> np.dtype | None:
    kind = _KINDS.get(code)
    if kind is None or lanes != 1:
        return None
    if kind == "b":
        return np.dtype(np.bool_) if bits == 8 else None
    try:
        return np.dtype(f"{kind}{bits // 8}")
    except TypeError:
        return None


def export_capsule(owner, pointer: int, shape: tuple[int, ...], strides: tuple[int, ...],
                   dtype: np.dtype, device: tuple[int, int], versioned: bool,
                   read_only: bool = False, copied: bool = False):
    """A DLPack capsule for memory at `pointer` (strides in elements); `owner` stays alive
    until the consumer deletes the tensor."""
    dtype = np.dtype(dtype)
    ndim = len(shape)
    native = _native()
    shape_array = (ctypes.c_int64 * max(ndim, 1))(*shape)
    strides_array = (ctypes.c_int64 * max(ndim, 1))(*strides)
    tensor = DLTensor(pointer, DLDevice(*device), ndim,
                      DLDataType(_CODES[dtype.kind], dtype.itemsize * 8, 1),
                      shape_array, strides_array, 0)
    if versioned:
        flags = (READ_ONLY if read_only else 0) | (IS_COPIED if copied else 0)
        managed = DLManagedTensorVersioned(DLPackVersion(*VERSION), None,
                                           _DELETER(native["kk_dlpack_delete_versioned"]),
                                           flags, tensor)
        name = _VERSIONED_NAME
    else:
        managed = DLManagedTensor(tensor, None, _DELETER(native["kk_dlpack_delete_legacy"]))
        name = _LEGACY_NAME
    # What the tensor keeps alive, with one reference that only its deleter drops.
    holder = (managed, shape_array, strides_array, owner)
    _api.Py_IncRef(ctypes.py_object(holder))
    managed.manager_ctx = id(holder)
    return _api.PyCapsule_New(ctypes.addressof(managed), name,
                              native["kk_dlpack_capsule_destructor"])


@dataclass
class ImportedTensor:
    """What a consumed capsule describes. The producer's memory stays valid while this
    object lives (its deleter runs when this object is collected)."""

    pointer: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]   # in elements
    dtype: np.dtype | None     # None: a type kernels do not have (bfloat16, complex, vectors)
    dtype_text: str
    device_type: int
    device_id: int
    read_only: bool
    _managed: int
    _versioned: bool

    def __del__(self):
        release(self._managed, self._versioned)


def release(managed: int, versioned: bool) -> None:
    """Call the producer's deleter of the managed tensor at address `managed`."""
    if not managed:
        return
    struct = (DLManagedTensorVersioned if versioned else DLManagedTensor).from_address(managed)
    if struct.deleter:
        struct.deleter(managed)


def import_capsule(capsule) -> ImportedTensor:
    """Take ownership of a producer's `dltensor` / `dltensor_versioned` capsule."""
    if _api.PyCapsule_IsValid(capsule, _VERSIONED_NAME):
        managed = _api.PyCapsule_GetPointer(capsule, _VERSIONED_NAME)
        struct = DLManagedTensorVersioned.from_address(managed)
        if struct.version.major > VERSION[0]:
            raise BufferError(f"DLPack {struct.version.major}.{struct.version.minor} tensors "
                              f"are newer than this reader ({VERSION[0]}.{VERSION[1]})")
        versioned, used_name = True, _USED_VERSIONED_NAME
        read_only = bool(struct.flags & READ_ONLY)
    elif _api.PyCapsule_IsValid(capsule, _LEGACY_NAME):
        managed = _api.PyCapsule_GetPointer(capsule, _LEGACY_NAME)
        struct = DLManagedTensor.from_address(managed)
        versioned, used_name, read_only = False, _USED_LEGACY_NAME, False
    else:
        raise BufferError("not an unused DLPack capsule")
    tensor = struct.dl_tensor
    ndim = tensor.ndim
    shape = tuple(tensor.shape[d] for d in range(ndim))
    if tensor.strides:
        strides = tuple(tensor.strides[d] for d in range(ndim))
    else:  # NULL strides: C order
        strides, step = [], 1
        for extent in reversed(shape):
            strides.insert(0, step)
            step *= extent
        strides = tuple(strides)
    code, bits, lanes = tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes
    _api.PyCapsule_SetName(capsule, used_name)
    return ImportedTensor((tensor.data or 0) + tensor.byte_offset, shape, strides,
                          dtype_of(code, bits, lanes), f"code {code}, {bits} bits x {lanes}",
                          tensor.device.device_type, tensor.device.device_id, read_only,
                          managed, versioned)
