"""PTX to cubin for one GPU architecture through nvJitLink (the `nvidia-nvjitlink` wheel,
through cuda-python's bindings): no CUDA toolkit, no ptxas on the machine."""
from __future__ import annotations

import functools

from kernelkit.errors import BackendError, CompileError


@functools.lru_cache(maxsize=1)
def nvjitlink():
    """cuda-python's nvJitLink module, or None where it is not installed."""
    try:
        from cuda.bindings import nvjitlink as module
        module.version()
    except Exception:  # not installed, or the shared library is missing
        return None
    return module


def linker_unavailable_reason() -> str | None:
    if nvjitlink() is None:
        return ("nvJitLink is not installed (pip install -e '.[cuda]': cuda-bindings and "
                "nvidia-nvjitlink)")
    return None


def ptx_to_cubin(ptx: str, arch: str, kernel: str) -> bytes:
    """The cubin of `ptx` for `arch` (e.g. "sm_90"); invalid PTX is a CompileError with
    nvJitLink's log."""
    linker = nvjitlink()
    if linker is None:
        raise BackendError(f"cannot make a cubin for {arch}: {linker_unavailable_reason()}")
    handle = linker.create(2, [f"-arch={arch}", "-O3"])
    try:
        data = ptx.encode()
        try:
            linker.add_data(handle, linker.InputType.PTX, data, len(data), kernel)
            linker.complete(handle)
        except linker.nvJitLinkError as error:
            size = linker.get_error_log_size(handle)
            log = bytearray(size)
            if size:
                linker.get_error_log(handle, log)
            raise CompileError(f"nvJitLink rejected the PTX for {arch}: {error}\n"
                               f"{log.decode(errors='replace').strip(chr(0)).strip()}", kernel=kernel,
                               hint="this is a bug in kernelkit's CUDA code generator; "
                                    "please report it with the kernel") from error
        cubin = bytearray(linker.get_linked_cubin_size(handle))
        linker.get_linked_cubin(handle, cubin)
        return bytes(cubin)
    finally:
        linker.destroy(handle)
