"""The launch call itself, in native code.

A launch through cuda-python's `cuLaunchKernel` converts eleven Python values to C on
every call, which costs about as much as the rest of our launch path. Here each prepared
kernel gets a builtin function of its own, `go(packed) -> CUresult`: `packed` is a bytes
object holding the grid (`GRID`) and then the launch record, made by one `struct.pack`;
what stays the same from one launch to the next (the driver's function, the kernel, the
stream, the block size) is in a `LaunchBlock` written once, when the kernel is prepared.
The driver copies the parameters before `cuLaunchKernel` returns, so the record needs to
live only as long as the call: no buffer is shared between launches, and launches from
several threads need no lock.

The builtin is a CPython function object (`PyCFunction_NewEx`) whose C function is
compiled here from LLVM IR (`kernelkit.compiler.native`), bound to the block's address;
calling it costs what calling any builtin with one argument costs."""
from __future__ import annotations

import ctypes
import functools
import struct

from .driver import check, cuda_driver

BLOCK = struct.Struct("<QQQ4I")
"""Written once: the driver's cuLaunchKernel, the CUfunction, the CUstream, block x, y, z
and shared memory bytes."""
GRID = "3I4x"
"""The start of each launch's `packed`: grid x, y, z; the launch record follows."""
RECORD_OFFSET = struct.calcsize("<" + GRID)

_NATIVE = f"""
declare ptr @PyLong_AsVoidPtr(ptr)
declare ptr @PyLong_FromLong(i64)
declare ptr @PyBytes_AsString(ptr)

define private i32 @field(ptr %base, i64 %offset) {{
  %slot = getelementptr i8, ptr %base, i64 %offset
  %value = load i32, ptr %slot
  ret i32 %value
}}

define private ptr @pointer(ptr %base, i64 %offset) {{
  %slot = getelementptr i8, ptr %base, i64 %offset
  %value = load ptr, ptr %slot
  ret ptr %value
}}

define ptr @kk_cuda_launch(ptr %self, ptr %packed) {{
entry:
  %params = alloca ptr
  %data = call ptr @PyBytes_AsString(ptr %packed)
  %refused = icmp eq ptr %data, null
  br i1 %refused, label %error, label %launch
error:
  ret ptr null
launch:
  %block = call ptr @PyLong_AsVoidPtr(ptr %self)
  %driver = call ptr @pointer(ptr %block, i64 0)
  %function = call ptr @pointer(ptr %block, i64 8)
  %stream = call ptr @pointer(ptr %block, i64 16)
  %bx = call i32 @field(ptr %block, i64 24)
  %by = call i32 @field(ptr %block, i64 28)
  %bz = call i32 @field(ptr %block, i64 32)
  %shared = call i32 @field(ptr %block, i64 36)
  %gx = call i32 @field(ptr %data, i64 0)
  %gy = call i32 @field(ptr %data, i64 4)
  %gz = call i32 @field(ptr %data, i64 8)
  %record = getelementptr i8, ptr %data, i64 {RECORD_OFFSET}
  store ptr %record, ptr %params
  %result = call i32 %driver(ptr %function, i32 %gx, i32 %gy, i32 %gz, i32 %bx, i32 %by,
                             i32 %bz, i32 %shared, ptr %stream, ptr %params, ptr null)
  %wide = zext i32 %result to i64
  %object = call ptr @PyLong_FromLong(i64 %wide)
  ret ptr %object
}}
"""


class _MethodDef(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("function", ctypes.c_void_p),
                ("flags", ctypes.c_int), ("doc", ctypes.c_char_p)]


_METH_O = 0x0008


@functools.lru_cache(maxsize=1)
def _definition() -> _MethodDef:
    """The method definition every launch builtin shares (kept for the process's life)."""
    from kernelkit.compiler.native import host_functions, python_api
    address = host_functions(_NATIVE, python_api("PyLong_AsVoidPtr", "PyLong_FromLong",
                                                 "PyBytes_AsString"))
    return _MethodDef(b"launch", address["kk_cuda_launch"], _METH_O,
                      b"go(packed) -> CUresult: launch the kernel over the grid and with "
                      b"the launch record that `packed` holds.")


@functools.lru_cache(maxsize=1)
def _driver_launch() -> int:
    """The address of the driver's cuLaunchKernel."""
    cu = cuda_driver()
    error, address, _status = cu.cuGetProcAddress(b"cuLaunchKernel", 12000, 0)
    check(error, "cuGetProcAddress(cuLaunchKernel)")
    if not address:
        raise RuntimeError("the CUDA driver has no cuLaunchKernel")
    return int(address)


_new_function = ctypes.pythonapi.PyCFunction_NewEx
_new_function.restype = ctypes.py_object
_new_function.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p]


class LaunchBlock:
    """What one prepared kernel's launches share (`BLOCK`), and `go(packed)`."""

    def __init__(self, function, stream: int, block: tuple[int, int, int]):
        self.buffer = ctypes.create_string_buffer(BLOCK.size)
        BLOCK.pack_into(self.buffer, 0, _driver_launch(), int(function), stream, *block, 0)
        # The builtin holds the address only: this object keeps the memory alive.
        self.go = _new_function(ctypes.addressof(_definition()),
                                ctypes.addressof(self.buffer), None)
