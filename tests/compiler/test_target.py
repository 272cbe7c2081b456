"""The `Target` contract's defaults: a new target written as a third party would, with
only an LLVM target machine, a triple, and how it emits, makes and loads its kernel
(here the host's, reusing the CPU target's pieces), compiles and runs kernels; the data
layout, optimization pipeline and assembly come from its machine."""
import re
from dataclasses import dataclass

import numpy as np
from llvmlite import binding as llvm

import kernelkit as kk
from backends.cpu.runtime import CPU
from backends.cpu.target import CPUTarget
from kernelkit.compiler.target import Target


@dataclass(frozen=True, slots=True)
class MinimalHostTarget(Target):
    name: str = "minimal-host"

    def machine(self, opt_level=3):
        return CPUTarget.host().machine(opt_level)

    def triple(self):
        return llvm.get_process_triple()

    emit_kernel = CPUTarget.emit_kernel
    emit = CPUTarget.emit
    load = CPUTarget.load


class MinimalHost(CPU):
    def target(self):
        return MinimalHostTarget()


@kk.kernel
def scaled(y, x: kk.Const, a):
    i = kk.index(kk.Global)
    y[i] = a * x[i] + 1.0


def test_a_target_with_a_machine_triple_and_its_kernel_hooks_is_complete():
    hooks = {name for name in vars(MinimalHostTarget) if not name.startswith("_")}
    assert hooks == {"name", "machine", "triple", "emit_kernel", "emit", "load"}
    backend = MinimalHost(threads=1)
    x = np.arange(10, dtype=np.float32)
    y = np.zeros(10, np.float32)
    scaled(backend, 4)(y, x, 3.0, ndrange=10)
    kk.synchronize(backend)
    np.testing.assert_array_equal(y, 3 * x + 1)


def test_the_defaults_take_the_data_layout_pipeline_and_assembly_from_the_machine():
    x = np.arange(10, dtype=np.float32)
    machine = CPUTarget.host().machine()
    llvm_ir = kk.code_llvm(scaled, MinimalHost(threads=1), x, x, 3.0, ndrange=10,
                           workgroupsize=4)
    assert f'target datalayout = "{machine.target_data}"' in llvm_ir
    assert re.search(r"fmul <\d+ x float>", llvm_ir)     # the work-item loop is vectorized
    assembly = kk.code_native(scaled, MinimalHost(threads=1), x, x, 3.0, ndrange=10,
                              workgroupsize=4)
    assert re.search(r"^kk_scaled_\w+:$", assembly, re.MULTILINE)
