"""Calling native functions through ctypes in fewer steps.

A ctypes function with argument types converts each argument through its type's
`from_param` (0.37 us for a group function's bytes and two int64s); one without converts
bytes, None and ints natively (0.17 us), an int as a C int. Where the platform's calls
widen a C int to a 64-bit parameter by its sign (libffi does so on x86-64 and AArch64,
checked here once on the C library's `llabs`), a function whose int64 parameters only
ever receive ints below `SMALL_INT` can thus be called untyped."""
from __future__ import annotations

import ctypes
import ctypes.util

SMALL_INT = 2**31
"""Ints from -SMALL_INT up to here pass through an untyped call unchanged."""


def _untyped_calls_widen_ints() -> bool:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
    llabs = getattr(libc, "llabs", None)
    if llabs is None:
        return False
    probe = ctypes.CFUNCTYPE(ctypes.c_int64)(ctypes.cast(llabs, ctypes.c_void_p).value)
    try:
        return all(probe(value) == abs(value) for value in (-5, 7, -1, -SMALL_INT, SMALL_INT - 1))
    except (ctypes.ArgumentError, OverflowError):
        return False


CALLS_WIDEN_INTS = _untyped_calls_widen_ints()


def untyped(address: int, typed, restype=None):
    """The function at `address`, returning `restype`, without argument types where the
    platform widens ints (`CALLS_WIDEN_INTS`); else `typed`, its typed version. Pass it
    only bytes and ints whose magnitude is below `SMALL_INT`."""
    return ctypes.CFUNCTYPE(restype)(address) if CALLS_WIDEN_INTS else typed
