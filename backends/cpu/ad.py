"""The CPU backend's method of `enzyme_ext.compiler_job_from_backend`, registered through
the `enzyme_ext.backends` entry point as any backend's would be."""
from __future__ import annotations


def register(compiler_job_from_backend) -> None:
    from .runtime import CPU

    @compiler_job_from_backend.register(CPU)
    def cpu_compiler_job(backend, function, argtypes, **options):
        return backend.compiler_job(function, argtypes, **options)
