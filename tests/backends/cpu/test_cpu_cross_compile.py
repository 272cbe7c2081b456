"""What the CPU backend generates compiles for another machine than this one: a kernel,
and the runtime's own native code (the launch policy, the work sharing, the native
argument checks, the spin waits), as object code for AArch64 Linux
(`CPUTarget.cross`), with no cycle counter read anywhere: every wait and budget counts nanoseconds of the system's monotonic clock,
which AArch64 user code may always read."""
import numpy as np
import pytest
from llvmlite import binding as llvm

import kernelkit as kk
from backends.cpu import work_sharing
from backends.cpu.target import CPUTarget
from kernelkit.compiler.driver import generate, typed_module
from kernelkit.compiler.job import CompilerConfig, CompilerJob, function_source
from kernelkit.ir.printer import print_module

AARCH64 = "aarch64-unknown-linux-gnu"
ELF_MACHINE_AARCH64 = 183


def aarch64_machine():
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm.Target.from_triple(AARCH64).create_target_machine(
        cpu="generic", features="", opt=2, reloc="pic", codemodel="default")


def elf_machine(object_code: bytes) -> int:
    assert object_code[:4] == b"\x7fELF"
    return int.from_bytes(object_code[18:20], "little")


@kk.kernel
def step(u_next, u: kk.Const, alpha):
    i = kk.index(kk.Global)
    total = 0.0
    while total < alpha:          # a polled loop, besides the group loop
        total += u[i] * u[i] + 0.5
    u_next[i] = total


def test_a_kernel_compiles_to_aarch64_object_code():
    u = np.ones(64, np.float32)
    argtypes = step.argument_types(kk.CPU(), (u, u, np.float32(1)))
    config = CompilerConfig(CPUTarget.cross(AARCH64), kernel=True, workgroupsize=(64,),
                            opt_level=3)
    job = CompilerJob(function_source(step.function, argtypes), config)
    module = typed_module(job)
    entry, llvm_module = generate(job, module, print_module(module))
    assert elf_machine(entry.artifact) == ELF_MACHINE_AARCH64
    assert f"target triple = \"{AARCH64}\"" in entry.llvm_ir
    # The kernel sets FPCR's default around its groups (`fp_environment.py`).
    assert "@llvm.aarch64.set.fpcr" in entry.llvm_ir


def test_the_runtimes_native_code_compiles_for_aarch64_and_reads_no_cycle_counter():
    source = work_sharing.native_source(checked=True, triple=AARCH64)
    assert "readcyclecounter" not in source and "@now_ns()" in source
    module = llvm.parse_assembly(source)
    module.triple = AARCH64
    module.verify()
    machine = aarch64_machine()
    assembly = machine.emit_assembly(module)
    assert "CNTVCT_EL0" not in assembly and "PMCCNTR_EL0" not in assembly
    assert "clock_gettime" in assembly
    assert elf_machine(machine.emit_object(module)) == ELF_MACHINE_AARCH64
