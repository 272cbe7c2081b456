"""The CUDA backends' method of `enzyme_ext.compiler_job_from_backend`, registered through
the `enzyme_ext.backends` entry point as any backend's would be. Both the GPU runtime and
the compile-only one (no driver) give their jobs."""
from __future__ import annotations


def register(compiler_job_from_backend) -> None:
    from .runtime import CompileOnlyCUDA, CUDABackend

    for backend_class in (CUDABackend, CompileOnlyCUDA):
        compiler_job_from_backend.register(backend_class)(cuda_compiler_job)


def cuda_compiler_job(backend, function, argtypes, **options):
    return backend.compiler_job(function, argtypes, **options)
