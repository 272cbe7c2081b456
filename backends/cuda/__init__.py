"""The CUDA backend: `CUDABackend.compile_only(arch)` compiles kernels to PTX and cubins
on any machine (see `runtime.py` for what runs on a GPU)."""
from .runtime import CompileOnlyError, CUDABackend

__all__ = ["CUDABackend", "CompileOnlyError"]
