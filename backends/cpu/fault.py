"""Naming the kernel when a CPU kernel crashes the process.

Without bounds checks (`debug=False`, the default), an out-of-bounds access in a kernel
is a wild write or read: the process may die of SIGSEGV (or SIGBUS, SIGFPE, SIGILL)
with no word of which kernel did it. So the runtime records, before each chunk of
work-groups it runs, which kernel that is (`running[0] = kernel.description`: one
pointer store), and a signal handler for those signals writes the recorded kernel to
stderr with a hint to run with KERNELKIT_DEBUG=1, then hands the signal on.

The handler is native code (a Python handler would run only after the faulting call
returned, which it never does), compiled from LLVM IR with `compiler.native`. It uses
only async-signal-safe calls: `write(2)`, and `sigaction(2)` to put back the handler
that was there before it (Python's `faulthandler`, which then prints the Python stacks,
or the default action); returning re-runs the faulting instruction, which now meets
that handler, so the process dies by the same signal as it would have without this.
The record is process-wide: where several kernels run at once (launches from several
Python threads) it names the one started last. On systems other than Linux nothing is
installed (the layout of `struct sigaction` is Linux's)."""
from __future__ import annotations

import ctypes
import ctypes.util
import signal
import sys
import threading

_SIGNALS = tuple(getattr(signal, name) for name in ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL")
                 if hasattr(signal, name))
_ACTION_BYTES = 256     # room for any libc's struct sigaction, kept as opaque bytes
_SA_SIGINFO = 4
_SA_ONSTACK = 0x08000000
_SA_NODEFER = 0x40000000

_PREFIX = b"\nkernelkit: fatal signal in kernel "
_SUFFIX = (b", the last one kernelkit started.\nAn out-of-bounds array access in a "
           b"kernel crashes the process without a message: run with KERNELKIT_DEBUG=1 "
           b"(or kk.CPU(debug=True)) to have it raised as an IndexError naming the line.\n")


def _constant(name: str, text: bytes) -> str:
    escaped = "".join(chr(b) if 32 <= b < 127 and b not in (34, 92) else f"\\{b:02X}"
                      for b in text)
    return (f'@{name} = private unnamed_addr constant [{len(text)} x i8] c"{escaped}"\n')


_HANDLER = (
    _constant("prefix", _PREFIX) + _constant("suffix", _SUFFIX) + f"""
@kernelkit_running_slot = global ptr null
@kernelkit_previous_actions = global [64 x [{_ACTION_BYTES} x i8]] zeroinitializer

declare i64 @write(i32, ptr, i64)
declare i32 @sigaction(i32, ptr, ptr)

define ptr @kernelkit_fault_slot() {{
  ret ptr @kernelkit_running_slot
}}

define ptr @kernelkit_fault_previous_actions() {{
  ret ptr @kernelkit_previous_actions
}}

define void @kernelkit_fault_handler(i32 %signal, ptr %info, ptr %context) {{
entry:
  %slot = load volatile ptr, ptr @kernelkit_running_slot, align 8
  %installed = icmp ne ptr %slot, null
  br i1 %installed, label %read, label %hand_on
read:
  %name = load volatile ptr, ptr %slot, align 8
  %none = icmp eq ptr %name, null
  br i1 %none, label %hand_on, label %report
report:
  call i64 @write(i32 2, ptr @prefix, i64 {len(_PREFIX)})
  br label %count
count:
  %length = phi i64 [ 0, %report ], [ %next, %count ]
  %at = getelementptr i8, ptr %name, i64 %length
  %byte = load volatile i8, ptr %at, align 1
  %next = add i64 %length, 1
  %end = icmp eq i8 %byte, 0
  br i1 %end, label %counted, label %count
counted:
  call i64 @write(i32 2, ptr %name, i64 %length)
  call i64 @write(i32 2, ptr @suffix, i64 {len(_SUFFIX)})
  br label %hand_on
hand_on:
  %index = zext i32 %signal to i64
  %previous = getelementptr [64 x [{_ACTION_BYTES} x i8]], ptr @kernelkit_previous_actions,
                            i64 0, i64 %index
  call i32 @sigaction(i32 %signal, ptr %previous, ptr null)
  ret void
}}
""")


class _Action(ctypes.Structure):
    """glibc's (and musl's) `struct sigaction` on Linux."""

    _fields_ = [("handler", ctypes.c_void_p), ("mask", ctypes.c_uint64 * 16),
                ("flags", ctypes.c_int), ("restorer", ctypes.c_void_p)]


running = (ctypes.c_void_p * 1)()
"""Where the runtime records the running kernel: `running[0] = ctypes.addressof(its
description)`; the handler reads it once installed."""

_lock = threading.Lock()
_installed = False


def install() -> None:
    """Install the handler for SIGSEGV, SIGBUS, SIGFPE and SIGILL, once per process."""
    global _installed
    with _lock:
        if _installed or not sys.platform.startswith("linux"):
            return
        _installed = True
        from kernelkit.compiler.native import host_functions
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        functions = host_functions(_HANDLER, {
            "write": ctypes.cast(libc.write, ctypes.c_void_p).value,
            "sigaction": ctypes.cast(libc.sigaction, ctypes.c_void_p).value})
        address = ctypes.CFUNCTYPE(ctypes.c_void_p)
        previous = address(functions["kernelkit_fault_previous_actions"])()
        slot = (ctypes.c_void_p * 1).from_address(address(functions["kernelkit_fault_slot"])())
        slot[0] = ctypes.addressof(running)
        action = _Action(handler=functions["kernelkit_fault_handler"],
                         flags=_SA_SIGINFO | _SA_ONSTACK | _SA_NODEFER)
        for number in _SIGNALS:
            if libc.sigaction(int(number), None,
                              ctypes.c_void_p(previous + int(number) * _ACTION_BYTES)):
                continue   # the old action cannot be read: leave this signal alone
            libc.sigaction(int(number), ctypes.byref(action), None)


def description(name: str, function) -> ctypes.Array:
    """What the handler writes for the kernel `name` (defined by `function`): a C string
    to keep while the kernel can run; `ctypes.addressof` of it goes into `running`."""
    code = getattr(function, "__code__", None)
    where = f" ({code.co_filename}:{code.co_firstlineno})" if code is not None else ""
    return ctypes.create_string_buffer(f"'{name}'{where}".encode(errors="replace"))
