"""kernelkit: a portable kernel language for Python.

    import kernelkit as kk

    @kk.kernel
    def saxpy(y, a, x: kk.Const):
        i = kk.index(kk.Global)
        y[i] = a * x[i] + y[i]

    saxpy(kk.CPU(), 256)(y, 2.0, x, ndrange=len(y))

Backends are found through the `kernelkit.backends` entry points: `kk.CPU` is the
class registered as `cpu`."""
from __future__ import annotations

from .backend import (Backend, backend_names, backend_unavailable_reason, get_backend,
                      make_backend)
from .errors import BackendError, CompileError, KernelkitError, LaunchError
from .lang.intrinsics import (Cartesian, Const, Global, Group, Linear, Local, NTuple,
                              atomic_add, atomic_and_, atomic_cas, atomic_exchange, atomic_max,
                              atomic_min, atomic_or_, atomic_sub, atomic_xor, deferred,
                              groupsize, index, localmem, ndrange, private, synchronize,
                              synchronize_any)
from .lang.intrinsics import print_ as print  # noqa: A001 - kk.print mirrors print
from .lang.kernel import Kernel, code_ir, code_llvm, code_native, kernel
from .lang.math import *  # noqa: F401,F403 - kk.sqrt, kk.exp, ...
from .memory import allocate, copyto, ones, to_backend, to_numpy, zeros

__version__ = "0.1.0"

_BACKEND_CLASS_NAMES = {"CPU": "cpu", "CUDABackend": "cuda"}


def __getattr__(name: str):
    if name in _BACKEND_CLASS_NAMES:
        from .backend import backend_class
        return backend_class(_BACKEND_CLASS_NAMES[name])
    raise AttributeError(f"module 'kernelkit' has no attribute '{name}'")
