"""The CUDA backend.

`CUDABackend.compile_only(arch, ...)` needs no GPU and no driver: kernels compile to PTX
and cubins, `kk.code_ir / code_llvm / code_native` (PTX) work, NumPy arrays stand in
for device arrays (their dtype, ndim and layout are what count), and a launch compiles
the kernel for every architecture given and then raises `CompileOnlyError`.

Running kernels on a GPU (`CUDABackend()`: context, streams, device arrays, launches)
is not available yet; constructing one says so."""
from __future__ import annotations

import functools

import numpy as np

from kernelkit.backend import Backend
from kernelkit.compiler.job import CompilerConfig, CompilerJob, function_source
from kernelkit.errors import BackendError, LaunchError
from kernelkit.runtime.arguments import numpy_argument_key, numpy_argument_type
from kernelkit.runtime.geometry import default_workgroupsize

MAX_THREADS_PER_BLOCK = 1024


class CompileOnlyError(BackendError):
    """A launch on a compile-only CUDA backend: the kernel was compiled, not run."""


@functools.lru_cache(maxsize=1)
def driver_unavailable_reason() -> str | None:
    try:
        from cuda.bindings import driver
    except ImportError:
        return ("cuda-python is not installed (pip install -e '.[cuda]'); "
                "CUDABackend.compile_only('sm_90') compiles without a GPU")
    try:
        (result,) = driver.cuInit(0)
    except Exception as error:  # the driver library itself is missing
        return f"no CUDA driver ({error}); CUDABackend.compile_only('sm_90') compiles without a GPU"
    if result != driver.CUresult.CUDA_SUCCESS:
        return (f"no usable CUDA driver or GPU ({result.name}); "
                "CUDABackend.compile_only('sm_90') compiles without a GPU")
    return None


def compile_only_unavailable_reason() -> str | None:
    """Why a compile-only backend cannot make cubins and link math here, or None."""
    from .libdevice import libdevice_unavailable_reason
    from .linker import linker_unavailable_reason
    return linker_unavailable_reason() or libdevice_unavailable_reason()


class CUDABackend(Backend):
    """Kernels on an NVIDIA GPU."""

    name = "cuda"

    def __init__(self, device: int = 0, debug: bool | None = None):
        reason = self.unavailable_reason()
        if reason is not None:
            raise BackendError(f"CUDABackend() cannot run kernels here: {reason}")

    @classmethod
    def unavailable_reason(cls) -> str | None:
        reason = driver_unavailable_reason()
        if reason is not None:
            return reason
        return ("running kernels on the GPU is not available yet in this version; "
                "CUDABackend.compile_only(arch) compiles them")

    @classmethod
    def target_named(cls, name):
        from .target import PTXTarget, supported_architectures
        return PTXTarget(name) if name in supported_architectures() else None

    @classmethod
    def compile_only(cls, arch: str = "sm_90", *more_archs: str,
                     debug: bool = False) -> CompileOnlyCUDA:
        """A backend that compiles kernels for `arch` (and each of `more_archs`) without a
        GPU or a driver."""
        return CompileOnlyCUDA((arch, *more_archs), debug)


class CompileOnlyCUDA(Backend):
    name = "cuda"

    def __init__(self, archs: tuple[str, ...] = ("sm_90",), debug: bool = False):
        from .target import PTXTarget
        self.targets = tuple(PTXTarget(arch) for arch in archs)
        self.archs = archs
        self.debug = bool(debug)

    def __repr__(self) -> str:
        return f"CUDABackend.compile_only({', '.join(map(repr, self.archs))})"

    # -- arrays: NumPy arrays stand in for device arrays ---------------------------------

    def allocate(self, dtype, shape):
        return np.empty(shape, dtype=dtype)

    def zeros(self, dtype, shape):
        return np.zeros(shape, dtype=dtype)

    def ones(self, dtype, shape):
        return np.ones(shape, dtype=dtype)

    def to_backend(self, array):
        return np.asarray(array)

    def to_numpy(self, array) -> np.ndarray:
        return np.asarray(array)

    def copyto(self, destination, source) -> None:
        np.copyto(destination, np.asarray(source))

    def synchronize(self) -> None:
        pass

    # -- kernels --------------------------------------------------------------------------

    def argument_key(self, value):
        return numpy_argument_key(value)

    def argument_type(self, value, const, name, kernel):
        type = numpy_argument_type(value, const, name, kernel)
        if type is not None:
            return type
        raise LaunchError(f"kernel '{kernel}': argument '{name}' is a {type(value).__name__}; "
                          "kernels take arrays and Python or NumPy scalars")

    def default_workgroupsize(self, ndim):
        return default_workgroupsize(ndim, 256)

    def compiler_job(self, function, argtypes, *, workgroupsize, opt_level: int = 3,
                     target=None, **options):
        sizes = tuple(workgroupsize)
        threads = 1
        for size in sizes:
            threads *= size
        if threads > MAX_THREADS_PER_BLOCK:
            raise LaunchError(f"kernel '{function.__name__}': a work-group of {sizes} is "
                              f"{threads} work-items; CUDA allows at most "
                              f"{MAX_THREADS_PER_BLOCK} per group")
        config = CompilerConfig(target or self.targets[0], kernel=True, workgroupsize=sizes,
                                opt_level=opt_level, debug=self.debug,
                                params=tuple(sorted(options.items())))
        return CompilerJob(function_source(function, argtypes), config)

    def prepare(self, compiled, argtypes, ndim):
        """Compile for the other architectures too, so that every one is checked."""
        from kernelkit.compiler.driver import compile_job
        job = compiled.job
        for target in self.targets[1:]:
            compile_job(self.compiler_job(job.source.function, argtypes,
                                          workgroupsize=job.config.workgroupsize,
                                          opt_level=job.config.opt_level, target=target))
        return compiled

    def launch(self, prepared, args, ndrange, workgroupsize):
        name = prepared.job.source.function.__name__
        raise CompileOnlyError(f"kernel '{name}' was compiled for {', '.join(self.archs)}; "
                               f"{self!r} has no GPU to run it on")
