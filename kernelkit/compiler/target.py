"""The `Target` contract: the named hooks a backend's code generator overrides.

The driver calls these and never asks which target it has. A target is a frozen,
hashable value, because it is part of `CompilerConfig` and so of the cache key.

Most hooks have defaults built around one LLVM target machine (`machine(opt_level)`):
the data layout is the machine's, the optimization pipeline is LLVM's standard one for
the job's opt level, and the assembly is what the machine prints. A new target writes
`machine`, `triple`, `emit_kernel`, `emit` and `load`; it overrides a default only where
it needs more (CUDA links libdevice, the CPU tunes the pipeline to vectorize)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .cache import code_fingerprint

if TYPE_CHECKING:
    from llvmlite import binding as llvm
    from llvmlite import ir

    from ..ir.function import Module
    from .job import CompilerJob


class Target:
    """Subclasses are frozen dataclasses. Hooks, in the order the driver calls them:

    - `passes()`: names of extra IR passes to run after the generic ones.
    - `triple()`, `datalayout()`: for the LLVM module.
    - `emit_kernel(llvm_module, ir_module, job)`: build the LLVM entry point of the
      kernel (`ir_module.kernel`; its calling convention and how work-items map to
      hardware) around the body,
      which `kernelkit.compiler.lowering.BodyLowering` lowers through a target's
      `KernelEnvironment` (`kernelkit.compiler.environment`).
    - `link_libraries(llvm_module, job)`: link the libraries the module calls into it.
    - `optimize(llvm_module, job)`: run the LLVM pipeline (tuned by
      `pipeline_options(opt_level)`).
    - `emit(llvm_module, job) -> bytes`: the artifact (object code, PTX, cubin).
    - `load(artifact, job)`: make the artifact callable.
    - `assembly(llvm_module, job) -> str`: native assembly for reflection.

    `machine(opt_level)` is the LLVM target machine the defaults use; `fingerprint()`
    is part of the disk cache key of every kernel compiled for the target.
    """

    name: str = "abstract"

    subgroups_in_hardware = False
    """Whether a subgroup's work-items run together and exchange values in registers (a
    GPU's warp), so that a subgroup operation costs a few instructions; where not (the
    CPU: `subgroups-in-local-memory`), each costs the group a barrier."""

    def machine(self, opt_level: int = 3) -> llvm.TargetMachine:
        """The LLVM target machine that generates code at `opt_level` (0 to 3; higher
        levels are 3)."""
        raise NotImplementedError

    def passes(self) -> tuple[str, ...]:
        return ()

    def triple(self) -> str:
        raise NotImplementedError

    def datalayout(self) -> str:
        return str(self.machine().target_data)

    def emit_kernel(self, module: ir.Module, ir_module: Module, job: CompilerJob) -> dict:
        """Returns facts the runtime needs (e.g. 'locations' of bounds checks)."""
        raise NotImplementedError

    def link_libraries(self, llvm_module: llvm.ModuleRef, job: CompilerJob) -> None:
        pass

    def pipeline_options(self, opt_level: int) -> llvm.PipelineTuningOptions:
        """How LLVM's standard pipeline is tuned at `opt_level` (LLVM's defaults)."""
        from llvmlite import binding as llvm
        return llvm.create_pipeline_tuning_options(speed_level=opt_level)

    def optimize(self, llvm_module: llvm.ModuleRef, job: CompilerJob) -> None:
        from llvmlite import binding as llvm
        opt_level = job.config.opt_level
        builder = llvm.create_pass_builder(self.machine(opt_level),
                                           self.pipeline_options(opt_level))
        builder.getModulePassManager().run(llvm_module, builder)

    def emit(self, llvm_module: llvm.ModuleRef, job: CompilerJob) -> bytes:
        raise NotImplementedError

    def load(self, artifact: bytes, job: CompilerJob) -> Any:
        raise NotImplementedError

    def assembly(self, llvm_module: llvm.ModuleRef, job: CompilerJob) -> str:
        return self.machine(job.config.opt_level).emit_assembly(llvm_module)

    def fingerprint(self) -> str:
        """A digest of the target's code, part of the disk cache key, so that an edited
        code generator does not find the old one's artifacts: by default, of the source
        files of the package (or module file) its class is defined in. (kernelkit's own
        targets are in every key already, with the rest of the compiler.)"""
        return code_fingerprint(type(self))
