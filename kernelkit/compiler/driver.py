"""The generic compiler driver: job -> typed IR -> passes -> LLVM -> artifact.

It never asks which target it has; the target's hooks do everything target-specific.
Compiled kernels are cached in memory by job."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from ..frontend.translate import translate_kernel
from ..ir.function import Module
from ..ir.printer import print_module
from ..ir.verifier import verify_module
from ..passes import Pipeline
from .job import CompilerJob

GENERIC_PASSES = ("inline", "simplify", "dce", "cse", "simplify", "dce", "check-barriers")


@dataclass
class CompiledKernel:
    job: CompilerJob
    ir: str                 # typed IR after all passes
    llvm_ir: str            # optimized LLVM IR
    artifact: bytes
    entry: Any              # what the target's `load` gave: a callable, a function handle
    uses_print: bool = False
    info: dict = field(default_factory=dict)
    _llvm_module: Any = None

    def assembly(self) -> str:
        return self.job.config.target.assembly(self._llvm_module, self.job)


_cache: dict[CompilerJob, CompiledKernel] = {}
_lock = threading.Lock()


def compile_job(job: CompilerJob) -> CompiledKernel:
    compiled = _cache.get(job)
    if compiled is None:
        with _lock:
            compiled = _cache.get(job)
            if compiled is None:
                compiled = build(job)
                _cache[job] = compiled
    return compiled


def typed_module(job: CompilerJob) -> Module:
    """The kernel's IR after the generic and the target's passes."""
    source = job.source
    module = translate_kernel(source.function, source.argtypes, job.config.workgroupsize)
    Pipeline(GENERIC_PASSES + job.config.target.passes())(module)
    verify_module(module)
    return module


def build(job: CompilerJob) -> CompiledKernel:
    from llvmlite import binding as llvm
    from llvmlite import ir as llvm_ir

    target = job.config.target
    module = typed_module(job)
    kernel = module.kernel
    llvm_module = llvm_ir.Module(name=kernel.name)
    llvm_module.triple = target.triple()
    llvm_module.data_layout = target.datalayout()
    info = target.emit_kernel(llvm_module, kernel, job)
    parsed = llvm.parse_assembly(str(llvm_module))
    parsed.verify()
    target.optimize(parsed, job)
    artifact = target.emit(parsed, job)
    entry = target.load(artifact, job)
    uses_print = any(op.opcode == "print" for op in kernel.ops())
    return CompiledKernel(job, print_module(module), str(parsed), artifact, entry, uses_print,
                          info, _llvm_module=parsed)
