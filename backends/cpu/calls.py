"""Calling native functions as CPython builtins: a native wrapper that reads the
arguments through the C API makes a function a builtin (`fast_call_source`,
`fast_call_function`), which the call a fast launch makes is."""
from __future__ import annotations

import ctypes

# A ctypes call converts and checks its arguments in Python's ffi layer: 0.6-1 us for a
# tuple, two bytes and two ints (AMD Zen 3), where a launch of 100k elements takes 10 us.
# A builtin function of CPython's vectorcall protocol (METH_FASTCALL) receives its
# arguments as an array of objects: the native wrapper below reads them through the C
# API itself and calls the function with the GIL released, as ctypes does (0.1 us).

_C_API = ("PyBytes_AsString", "PyLong_AsLongLong", "PyLong_FromLongLong", "PyErr_Occurred",
          "PyErr_BadArgument", "PyEval_SaveThread", "PyEval_RestoreThread")


def _c_api() -> dict[str, int] | None:
    """The addresses of the C API functions a fast-call wrapper calls, by name; None on
    an interpreter without them (not CPython)."""
    if ctypes.sizeof(ctypes.c_void_p) != 8:
        return None   # (the wrappers pass the argument count as an i64)
    from kernelkit.compiler.native import python_api
    try:
        return python_api(*_C_API, "PyCFunction_NewEx")
    except AttributeError:   # (no ctypes.pythonapi, or not these functions)
        return None


C_API = _c_api()
"""The C API's functions for `fast_call_source` (the symbols `host_functions` needs), or
None where calls go through ctypes."""


def fast_call_source(name: str, target: str, kinds: str) -> str:
    """LLVM IR text defining `@name`, a METH_FASTCALL function that calls `i64 @target`
    with `kinds`' arguments (one letter each: `o` an object, passed as its address; `b`
    bytes, passed as the address of their first byte; `i` an int, passed as an i64)
    with the GIL released, and returns its result as an int. A wrong argument count or
    kind raises TypeError (or OverflowError: an int beyond int64). Needs `C_API`."""
    lines, values = [], []
    for index, kind in enumerate(kinds):
        lines.append(f"  %slot.{index} = getelementptr ptr, ptr %argv, i64 {index}\n"
                     f"  %object.{index} = load ptr, ptr %slot.{index}, align 8\n")
        if kind == "o":
            values.append(f"ptr %object.{index}")
            continue
        if kind == "b":
            lines.append(f"  %value.{index} = call ptr @PyBytes_AsString(ptr %object.{index})\n"
                         f"  %bad.{index} = icmp eq ptr %value.{index}, null\n")
            values.append(f"ptr %value.{index}")
        elif kind == "i":
            lines.append(f"  %value.{index} = call i64 @PyLong_AsLongLong(ptr %object.{index})\n"
                         f"  %minus.{index} = icmp eq i64 %value.{index}, -1\n"
                         f"  %raised.{index} = call ptr @PyErr_Occurred()\n"
                         f"  %error.{index} = icmp ne ptr %raised.{index}, null\n"
                         f"  %bad.{index} = and i1 %minus.{index}, %error.{index}\n")
            values.append(f"i64 %value.{index}")
        else:
            raise ValueError(f"an argument kind is o, b or i, not {kind!r}")
        lines.append(f"  br i1 %bad.{index}, label %failed, label %read.{index}\n"
                     f"read.{index}:\n")
    return (f"define ptr @{name}(ptr %self, ptr %argv, i64 %count) {{\n"
            f"start:\n"
            f"  %counted = icmp eq i64 %count, {len(kinds)}\n"
            f"  br i1 %counted, label %read, label %miscounted\n"
            f"miscounted:\n"
            f"  %ignored = call i32 @PyErr_BadArgument()\n"
            f"  ret ptr null\n"
            f"read:\n"
            f"{''.join(lines)}"
            f"  %thread = call ptr @PyEval_SaveThread()\n"
            f"  %result = call i64 @{target}({', '.join(values)})\n"
            f"  call void @PyEval_RestoreThread(ptr %thread)\n"
            f"  %boxed = call ptr @PyLong_FromLongLong(i64 %result)\n"
            f"  ret ptr %boxed\n"
            f"failed:\n"
            f"  ret ptr null\n"
            f"}}\n")


FAST_CALL_DECLARATIONS = """
declare ptr @PyBytes_AsString(ptr)
declare i64 @PyLong_AsLongLong(ptr)
declare ptr @PyLong_FromLongLong(i64)
declare ptr @PyErr_Occurred()
declare i32 @PyErr_BadArgument()
declare ptr @PyEval_SaveThread()
declare void @PyEval_RestoreThread(ptr)
"""
"""The C API functions `fast_call_source`'s wrappers call, declared once per module."""


def fast_call_function(address: int, name: str):
    """The builtin function whose METH_FASTCALL code (`fast_call_source`) is at
    `address`."""
    from kernelkit.compiler.native import METH_FASTCALL, builtin_function
    return builtin_function(address, name, METH_FASTCALL)
