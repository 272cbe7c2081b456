"""kernelkit: a portable kernel language for Python.

    import numpy as np
    import kernelkit as kk

    @kk.kernel
    def saxpy(y, a, x: kk.Const):
        i = kk.index(kk.Global)
        y[i] = a * x[i] + y[i]

    backend = kk.CPU()                         # or kk.CUDABackend()
    x = kk.ones(backend, np.float32, 1000)
    y = kk.zeros(backend, np.float32, 1000)
    saxpy(backend, 256)(y, 2.0, x, ndrange=len(y))
    kk.synchronize(backend)

- Kernels: `kernel` (also `kernel(fn, source=text)` for a function whose source Python
  did not keep), `Kernel`, and what they compile to: `code_ir`, `code_llvm`, `code_native`.
- Inside a kernel: `index` with `Global` / `Local` / `Group` and `Linear` / `Cartesian` /
  `NTuple`; `groupsize`, `ngroups`, `ndrange`; `localmem`, `private`; `synchronize`,
  `synchronize_any`; subgroups of 32 work-items (a warp on CUDA): `subgroup_size`,
  `subgroup_index`, `shuffle`, `shuffle_down`, `shuffle_up`, `shuffle_xor`,
  `subgroup_sum`, `subgroup_max`, `subgroup_min`, `subgroup_any`, `subgroup_all`,
  `subgroup_ballot`; the atomics (`atomic_add` ...); `deferred`; `kk.print`; the math
  functions (`sqrt`, `exp` ..., also usable on the host); `Const` for read-only parameters;
  small vectors and matrices: `vec2`, `vec3`, `vec4`, `mat22`, `mat33`, `mat44` with `dot`,
  `cross`, `length`, `normalize`, `transpose`, `determinant`, `inverse`, `trace`, `diag`,
  `identity`, `outer`, `skew`, `ddot`, `load_vec3` ..., `load_mat33` ..., `store`; the
  decompositions of 3x3 matrices `svd3`, `qr3`, `eig3` (also usable on the host).
- Helpers, inside kernels and on the host: `clamp`, `lerp`, `sign`; the scalar functions
  `bitcast`, `round` (half to even), `frac`, `step`, `nonzero`, `smoothstep`, `erfinv`,
  `erfcinv`; and counter-based random numbers, the same on every backend:
  `kk.random.uniform(seed, counter)`, `kk.random.normal`, `kk.random.integers`,
  `kk.random.uniform_bits`, `kk.random.philox4x32`.
- Arrays on a backend: `allocate`, `empty`, `zeros`, `ones`, `full`, `empty_like`,
  `zeros_like`, `ones_like`, `to_backend`, `to_numpy`, `copyto`; `synchronize(backend)`.
- Backends: `CPU`, `CUDABackend`, `Backend`, `get_backend`, `make_backend`,
  `backend_names`, `backend_unavailable_reason`. They are found through the
  `kernelkit.backends` entry points (`kk.CPU` is the class registered as `cpu`) and
  imported when first named.
- Errors: `KernelkitError`, `CompileError`, `LaunchError`, `BackendError`, `RaceError`
  (the CPU's race detector, `KERNELKIT_DEBUG=races`). Their
  tracebacks end at the call into kernelkit; `KERNELKIT_TRACEBACK=full` shows the rest.

`kk.print`, `kk.round` and `kk.random` are not in `__all__`, so that `from kernelkit
import *` keeps Python's print and round and leaves a `random` module imported before it
alone."""
from typing import TYPE_CHECKING

from .backend import (Backend, backend_names, backend_unavailable_reason, get_backend,
                      make_backend)
from .errors import BackendError, CompileError, KernelkitError, LaunchError, RaceError
from .lang.intrinsics import (Cartesian, Const, Global, Group, Linear, Local, NTuple,
                              atomic_add, atomic_and_, atomic_cas, atomic_exchange, atomic_max,
                              atomic_min, atomic_or_, atomic_sub, atomic_xor, deferred,
                              groupsize, index, localmem, ndrange, ngroups, private, synchronize,
                              synchronize_any)
from .lang.intrinsics import print_ as print  # noqa: A001,F401 - kk.print mirrors print
from .lang import random  # noqa: F401 - the submodule: kk.random.uniform, ...
from .lang.helpers import clamp, lerp, sign
from .lang.subgroups import (shuffle, shuffle_down, shuffle_up, shuffle_xor, subgroup_all,
                             subgroup_any, subgroup_ballot, subgroup_index, subgroup_max,
                             subgroup_min, subgroup_size, subgroup_sum)
from .lang.decompositions import eig3, qr3, svd3
from .lang.scalars import (bitcast, erfcinv, erfinv, frac, nonzero, smoothstep,  # noqa: F401
                           step)
from .lang.scalars import round  # noqa: A004,F401 - kk.round, as Warp names it
from .lang.kernel import Kernel, code_ir, code_llvm, code_native, kernel
from .lang.math import *  # noqa: F401,F403 - kk.sqrt, kk.exp, ...
from .lang.math import __all__ as _MATH_FUNCTIONS
from .lang.vectors import *  # noqa: F401,F403 - kk.vec3, kk.mat33, kk.dot, ...
from .lang.vectors import __all__ as _VECTORS
from .memory import (allocate, copyto, empty, empty_like, full, ones, ones_like, to_backend,
                     to_numpy, zeros, zeros_like)

if TYPE_CHECKING:
    # For type checkers and editors; a program imports a backend when it first names it
    # (`__getattr__` below), through the entry points, so the core imports none.
    from backends.cpu import CPU
    from backends.cuda import CUDABackend

__version__ = "0.1.0"

_BACKEND_CLASS_NAMES = {"CPU": "cpu", "CUDABackend": "cuda"}

__all__ = [
    # kernels
    "kernel", "Kernel", "code_ir", "code_llvm", "code_native",
    # the kernel language
    "index", "Global", "Local", "Group", "Linear", "Cartesian", "NTuple",
    "groupsize", "ngroups", "ndrange", "localmem", "private", "synchronize",
    "synchronize_any", "atomic_add", "atomic_sub", "atomic_min", "atomic_max", "atomic_and_",
    "atomic_or_", "atomic_xor", "atomic_exchange", "atomic_cas", "deferred", "Const",
    "subgroup_size", "subgroup_index", "shuffle", "shuffle_down", "shuffle_up", "shuffle_xor",
    "subgroup_sum", "subgroup_max", "subgroup_min", "subgroup_any", "subgroup_all",
    "subgroup_ballot",
    *_MATH_FUNCTIONS, *_VECTORS, "svd3", "qr3", "eig3", "clamp", "lerp", "sign", "bitcast",
    "frac", "step", "nonzero", "smoothstep", "erfinv", "erfcinv",
    # arrays
    "allocate", "empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like",
    "to_backend", "to_numpy", "copyto",
    # backends
    "CPU", "CUDABackend", "Backend", "get_backend", "make_backend", "backend_names",
    "backend_unavailable_reason",
    # errors
    "KernelkitError", "CompileError", "LaunchError", "BackendError", "RaceError",
]


def __getattr__(name: str) -> type:
    if name in _BACKEND_CLASS_NAMES:
        from .backend import backend_class
        return backend_class(_BACKEND_CLASS_NAMES[name])
    raise AttributeError(f"module 'kernelkit' has no attribute '{name}'")


def __dir__() -> list[str]:
    return sorted({*globals(), *_BACKEND_CLASS_NAMES})
