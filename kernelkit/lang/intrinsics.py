"""The functions and constants a kernel calls: `kk.index`, `kk.localmem`, atomics ...

On the host they are stubs that explain themselves; inside a kernel the frontend
translates each into IR (see `kernelkit.frontend.intrinsics`).
"""
from __future__ import annotations

import enum

from ..errors import KernelkitError


class IndexKind(enum.Enum):
    GLOBAL = "Global"
    LOCAL = "Local"
    GROUP = "Group"

    def __repr__(self) -> str:
        return f"kk.{self.value}"


class IndexStyle(enum.Enum):
    LINEAR = "Linear"
    CARTESIAN = "Cartesian"
    NTUPLE = "NTuple"

    def __repr__(self) -> str:
        return f"kk.{self.value}"


Global, Local, Group = IndexKind.GLOBAL, IndexKind.LOCAL, IndexKind.GROUP
Linear, Cartesian, NTuple = IndexStyle.LINEAR, IndexStyle.CARTESIAN, IndexStyle.NTUPLE


class Const:
    """Annotate a kernel parameter with `kk.Const`: the array is only read, and no other
    argument aliases it, so the compiler may cache and reorder its loads."""


def _kernel_only(name: str):
    def stub(*args, **kwargs):
        raise KernelkitError(f"kk.{name}() can only be called inside a @kk.kernel function")
    stub.__name__ = stub.__qualname__ = name
    stub.__doc__ = f"kk.{name}: only meaningful inside a kernel."
    return stub


index = _kernel_only("index")
groupsize = _kernel_only("groupsize")
ndrange = _kernel_only("ndrange")
localmem = _kernel_only("localmem")
private = _kernel_only("private")
print_ = _kernel_only("print")
atomic_add = _kernel_only("atomic_add")
atomic_sub = _kernel_only("atomic_sub")
atomic_min = _kernel_only("atomic_min")
atomic_max = _kernel_only("atomic_max")
atomic_and_ = _kernel_only("atomic_and_")
atomic_or_ = _kernel_only("atomic_or_")
atomic_xor = _kernel_only("atomic_xor")
atomic_exchange = _kernel_only("atomic_exchange")
atomic_cas = _kernel_only("atomic_cas")
deferred = _kernel_only("deferred")
synchronize_any = _kernel_only("synchronize_any")

ATOMICS = {atomic_add: "add", atomic_sub: "sub", atomic_min: "min", atomic_max: "max",
           atomic_and_: "and", atomic_or_: "or", atomic_xor: "xor", atomic_exchange: "exchange"}


def synchronize(backend=None) -> None:
    """On the host, `kk.synchronize(backend)` waits for every launch on `backend`.
    Inside a kernel, `kk.synchronize()` is a work-group barrier."""
    if backend is None:
        raise KernelkitError(
            "kk.synchronize() without a backend is a work-group barrier and only means something "
            "inside a kernel; on the host call kk.synchronize(backend)")
    backend.synchronize()
