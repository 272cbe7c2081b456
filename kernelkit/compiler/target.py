"""The `Target` contract: the named hooks a backend's code generator overrides.

The driver calls these and never asks which target it has. A target is a frozen,
hashable value, because it is part of `CompilerConfig` and so of the cache key."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
      `KernelEnvironment`.
    - `optimize(llvm_module, job)`: run the LLVM pipeline.
    - `emit(llvm_module, job) -> bytes`: the artifact (object code, PTX, cubin).
    - `load(artifact, job)`: make the artifact callable.
    - `assembly(llvm_module, job) -> str`: native assembly for reflection.
    """

    name: str = "abstract"

    def passes(self) -> tuple[str, ...]:
        return ()

    def triple(self) -> str:
        raise NotImplementedError

    def datalayout(self) -> str:
        raise NotImplementedError

    def emit_kernel(self, module: ir.Module, ir_module: Module, job: CompilerJob) -> dict:
        """Returns facts the runtime needs (e.g. 'locations' of bounds checks)."""
        raise NotImplementedError

    def optimize(self, llvm_module, job: CompilerJob) -> None:
        raise NotImplementedError

    def emit(self, llvm_module, job: CompilerJob) -> bytes:
        raise NotImplementedError

    def load(self, artifact: bytes, job: CompilerJob) -> Any:
        raise NotImplementedError

    def assembly(self, llvm_module, job: CompilerJob) -> str:
        raise NotImplementedError
