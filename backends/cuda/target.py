"""PTXTarget: kernels as PTX for one NVIDIA GPU architecture, through LLVM's NVPTX back
end, then a cubin for exactly that architecture through nvJitLink.

The kernel function itself is built by `thread.py`; this module owns the target's
hooks. Loading code onto a GPU needs a context, which belongs to a backend, so `load`
only says what to load (the runtime loads it when a launch is prepared)."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from llvmlite import binding as llvm

from kernelkit.compiler.target import Target

from .exactness import check_exact_lowering
from .libdevice import link_libdevice, uses_libdevice
from .linker import linker_unavailable_reason, ptx_to_cubin
from .thread import ThreadFunctionBuilder

TRIPLE = "nvptx64-nvidia-cuda"

# The oldest PTX ISA version each architecture needs: the oldest is what the most
# drivers and linkers accept.
_PTX_VERSION = {"sm_50": 40, "sm_52": 41, "sm_53": 42, "sm_60": 50, "sm_61": 50,
                "sm_62": 50, "sm_70": 60, "sm_72": 61, "sm_75": 63, "sm_80": 70, "sm_86": 71,
                "sm_87": 74, "sm_89": 78, "sm_90": 78, "sm_90a": 80, "sm_100": 86,
                "sm_100a": 86, "sm_101": 86, "sm_103": 88, "sm_120": 87, "sm_121": 88}


def supported_architectures() -> tuple[str, ...]:
    return tuple(_PTX_VERSION)


def architecture_for(major: int, minor: int) -> tuple[str, bool]:
    """The architecture to compile for on a GPU of compute capability major.minor, and
    whether it is exactly the GPU's (else PTX of the newest older one, which the driver
    compiles for the GPU)."""
    exact = f"sm_{major}{minor}"
    if exact in _PTX_VERSION:
        return exact, True
    older = [arch for arch in _PTX_VERSION if not arch.endswith("a")
             and (int(arch[3:-1]), int(arch[-1])) <= (major, minor)]
    if not older:
        from kernelkit.errors import BackendError
        raise BackendError(f"GPUs of compute capability {major}.{minor} are too old for "
                           f"kernelkit (the oldest it compiles for is {next(iter(_PTX_VERSION))})")
    return max(older, key=lambda arch: (int(arch[3:-1]), int(arch[-1]))), False


@functools.lru_cache(maxsize=1)
def _initialize_llvm() -> None:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()


@functools.lru_cache(maxsize=None)
def _target_machine(arch: str, opt_level: int):
    _initialize_llvm()
    target = llvm.Target.from_triple(TRIPLE)
    return target.create_target_machine(cpu=arch, features=f"+ptx{_PTX_VERSION[arch]}",
                                        opt=min(opt_level, 3))


@dataclass(frozen=True, slots=True)
class KernelImage:
    """What a runtime loads: the kernel's symbol and its cubin (or PTX, for the driver to
    compile, where nvJitLink is not installed)."""

    symbol: str
    code: bytes
    is_cubin: bool


@dataclass(frozen=True, slots=True)
class PTXTarget(Target):
    """`cubin=False`: the artifact is the PTX, for the driver to compile when it loads it
    (where nvJitLink is missing, or its cubin is newer than the driver)."""

    arch: str
    name: str = "cuda"
    cubin: bool = True
    subgroups_in_hardware = True    # warps (`warps.py`)

    def __post_init__(self):
        if self.arch not in _PTX_VERSION:
            from kernelkit.errors import BackendError
            raise BackendError(f"unknown GPU architecture '{self.arch}'; known: "
                               f"{', '.join(_PTX_VERSION)}")

    @property
    def dependent_launch(self) -> bool:
        """Whether kernels wait for the previous grid at entry and let the next one start
        early (`thread.py`): sm_90 and newer have `griddepcontrol`."""
        return int(re.match(r"sm_(\d+)", self.arch).group(1)) >= 90

    def machine(self, opt_level: int = 3) -> llvm.TargetMachine:
        return _target_machine(self.arch, opt_level)

    def passes(self) -> tuple[str, ...]:
        """Grid-stride loops with their trip counts, which LLVM needs to unroll them: a
        thread then has the loads of several trips in flight, as a GPU needs to hide
        memory latency (`kernelkit/passes/trip_counts.py`)."""
        return ("trip-counts",)

    def triple(self) -> str:
        return TRIPLE

    def emit_kernel(self, module, ir_module, job) -> dict:
        builder = ThreadFunctionBuilder(module, ir_module.kernel, job, kernel_symbol(job))
        builder.build()
        return {"locations": builder.locations, "coarsening": builder.coarsening,
                "dependent_launch": builder.dependent_launch}

    def link_libraries(self, llvm_module, job) -> None:
        if uses_libdevice(llvm_module):
            link_libdevice(llvm_module)

    def emit(self, llvm_module, job) -> bytes:
        check_exact_lowering(str(llvm_module), job.source.function.__name__)
        ptx = self.assembly(llvm_module, job)
        if not self.cubin or linker_unavailable_reason() is not None:
            return ptx.encode()
        return ptx_to_cubin(ptx, self.arch, job.source.function.__name__)

    def load(self, artifact: bytes, job) -> KernelImage:
        return KernelImage(kernel_symbol(job), artifact, artifact[:4] == b"\x7fELF")


def kernel_symbol(job) -> str:
    """Each kernel is a module of its own: its Python name is a unique, readable symbol."""
    return "kk_" + job.source.function.__name__
