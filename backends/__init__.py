"""kernelkit's backends. Each registers itself under the `kernelkit.backends` entry points."""


def __getattr__(name: str):
    if name == "CPU":
        from .cpu import CPU
        return CPU
    if name == "CUDABackend":
        from .cuda import CUDABackend
        return CUDABackend
    raise AttributeError(f"module 'backends' has no attribute '{name}'")
