"""The launch call itself, in native code.

A launch through cuda-python's `cuLaunchKernel` converts eleven Python values to C on
every call, which costs about as much as the rest of our launch path. Here each prepared
kernel gets a builtin function of its own, `go(packed) -> CUresult`: `packed` is a bytes
object holding the grid (`GRID`) and then the launch record, made by one `struct.pack`;
what stays the same from one launch to the next (the driver's function, the kernel, the
stream, the block size) is in a `LaunchBlock` written once, when the kernel is prepared.
The driver copies the parameters before the launch call returns, so the record needs to
live only as long as the call: no buffer is shared between launches, and launches from
several threads need no lock. A kernel that waits for the previous grid itself (sm_90 and
newer, `thread.py`) is launched through cuLaunchKernelEx with programmatic stream
serialization: its CUlaunchConfig is made on the native function's stack, and the
attribute it points at is kept in the block.

The builtin is a CPython function object whose C function is compiled here from LLVM IR
(`kernelkit.compiler.native`'s `host_functions` and `builtin_function`), bound to the
block (a bytes object it keeps alive); calling it costs what calling any builtin with one
argument costs. It lets go of the GIL during the driver call, as cuda-python does: a
launch may wait for room in the driver's queue, and what frees it may need the GIL
(another library's host callback on a stream ours waits for)."""
from __future__ import annotations

import functools
import struct

from kernelkit.compiler.native import METH_O, builtin_function, host_functions, python_api
from kernelkit.errors import BackendError

from .driver import check, cuda_driver

BLOCK = struct.Struct("<QQQ4IQQ")
"""Written once: the driver's launch function, the CUfunction, the CUstream, block x, y,
z, shared memory bytes, the size of `packed`, and the number of launch attributes that
follow it (`ATTRIBUTE` each). With none, the driver's function is cuLaunchKernel; with
some, cuLaunchKernelEx, given a CUlaunchConfig made on the stack for each launch."""
ATTRIBUTE = struct.Struct("<I4xi60x")
"""A CUlaunchAttribute (72 bytes): its id, and an int value at the start of its union."""
PROGRAMMATIC_STREAM_SERIALIZATION = 6
"""CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION: the kernel may be scheduled
before the previous kernel in its stream has ended; it waits for it itself (`thread.py`)."""
GRID = "3I4x"
"""The start of each launch's `packed`: grid x, y, z; the launch record follows."""
RECORD_OFFSET = struct.calcsize("<" + GRID)

_NATIVE = f"""
declare ptr @PyLong_FromLong(i64)
declare ptr @PyBytes_AsString(ptr)
declare i64 @PyBytes_Size(ptr)
declare ptr @PyEval_SaveThread()
declare void @PyEval_RestoreThread(ptr)

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

define private void @set(ptr %base, i64 %offset, i32 %value) {{
  %slot = getelementptr i8, ptr %base, i64 %offset
  store i32 %value, ptr %slot
  ret void
}}

define ptr @kk_cuda_launch(ptr %self, ptr %packed) {{
entry:
  %params = alloca ptr
  %config = alloca [56 x i8], align 8      ; CUlaunchConfig
  %data = call ptr @PyBytes_AsString(ptr %packed)
  %refused = icmp eq ptr %data, null
  br i1 %refused, label %error, label %check
error:
  ret ptr null
check:
  %block = call ptr @PyBytes_AsString(ptr %self)
  %size.slot = getelementptr i8, ptr %block, i64 40
  %size = load i64, ptr %size.slot
  %given = call i64 @PyBytes_Size(ptr %packed)
  %fits = icmp eq i64 %given, %size
  br i1 %fits, label %launch, label %wrong
wrong:
  %invalid = call ptr @PyLong_FromLong(i64 1)   ; CUDA_ERROR_INVALID_VALUE, nothing launched
  ret ptr %invalid
launch:
  %driver = call ptr @pointer(ptr %block, i64 0)
  %function = call ptr @pointer(ptr %block, i64 8)
  %stream = call ptr @pointer(ptr %block, i64 16)
  %bx = call i32 @field(ptr %block, i64 24)
  %by = call i32 @field(ptr %block, i64 28)
  %bz = call i32 @field(ptr %block, i64 32)
  %shared = call i32 @field(ptr %block, i64 36)
  %count.slot = getelementptr i8, ptr %block, i64 48
  %count = load i64, ptr %count.slot
  %gx = call i32 @field(ptr %data, i64 0)
  %gy = call i32 @field(ptr %data, i64 4)
  %gz = call i32 @field(ptr %data, i64 8)
  %record = getelementptr i8, ptr %data, i64 {RECORD_OFFSET}
  store ptr %record, ptr %params
  %plain = icmp eq i64 %count, 0
  %state = call ptr @PyEval_SaveThread()
  br i1 %plain, label %classic, label %extended
classic:
  %result.classic = call i32 %driver(ptr %function, i32 %gx, i32 %gy, i32 %gz, i32 %bx,
                                     i32 %by, i32 %bz, i32 %shared, ptr %stream,
                                     ptr %params, ptr null)
  br label %done
extended:
  call void @set(ptr %config, i64 0, i32 %gx)
  call void @set(ptr %config, i64 4, i32 %gy)
  call void @set(ptr %config, i64 8, i32 %gz)
  call void @set(ptr %config, i64 12, i32 %bx)
  call void @set(ptr %config, i64 16, i32 %by)
  call void @set(ptr %config, i64 20, i32 %bz)
  call void @set(ptr %config, i64 24, i32 %shared)
  %stream.slot = getelementptr i8, ptr %config, i64 32
  store ptr %stream, ptr %stream.slot
  %attributes = getelementptr i8, ptr %block, i64 {BLOCK.size}
  %attributes.slot = getelementptr i8, ptr %config, i64 40
  store ptr %attributes, ptr %attributes.slot
  %narrow = trunc i64 %count to i32
  call void @set(ptr %config, i64 48, i32 %narrow)
  %result.extended = call i32 %driver(ptr %config, ptr %function, ptr %params, ptr null)
  br label %done
done:
  %result = phi i32 [%result.classic, %classic], [%result.extended, %extended]
  call void @PyEval_RestoreThread(ptr %state)
  %wide = zext i32 %result to i64
  %object = call ptr @PyLong_FromLong(i64 %wide)
  ret ptr %object
}}
"""


@functools.lru_cache(maxsize=1)
def _launch_code() -> int:
    """The address of `kk_cuda_launch`, which every launch builtin calls."""
    address = host_functions(_NATIVE, python_api("PyLong_FromLong", "PyBytes_AsString",
                                                 "PyBytes_Size", "PyEval_SaveThread",
                                                 "PyEval_RestoreThread"))
    return address["kk_cuda_launch"]


@functools.lru_cache(maxsize=None)
def _driver_function(name: str) -> int:
    """The address of the driver's function `name` (its CUDA 12 version)."""
    cu = cuda_driver()
    error, address, _status = cu.cuGetProcAddress(name.encode(), 12000, 0)
    check(error, f"cuGetProcAddress({name})")
    if not address:
        raise BackendError(f"the CUDA driver gave no address for {name}")
    return int(address)


class LaunchBlock:
    """What one prepared kernel's launches share (`BLOCK`), and `go(packed)`, which
    launches with the grid and record that `packed` holds (`size` bytes; a bytes object
    of another size launches nothing and gives CUDA_ERROR_INVALID_VALUE). `dependent`:
    launched with programmatic stream serialization, for a kernel that waits for the
    previous grid itself (`thread.py`)."""

    def __init__(self, function, stream: int, block: tuple[int, int, int], size: int,
                 dependent: bool = False):
        attributes = [ATTRIBUTE.pack(PROGRAMMATIC_STREAM_SERIALIZATION, 1)] if dependent else []
        driver = _driver_function("cuLaunchKernelEx" if attributes else "cuLaunchKernel")
        # The builtin's bound object is this bytes object: it owns the block's memory
        # (and the attributes the launch configuration points at) for as long as the
        # builtin lives.
        self.block = BLOCK.pack(driver, int(function), stream, *block, 0, size,
                                len(attributes)) + b"".join(attributes)
        self.go = builtin_function(_launch_code(), "launch", METH_O, bound=self.block,
                                   doc="go(packed) -> CUresult: launch the kernel over the "
                                       "grid and with the launch record that `packed` holds.")
