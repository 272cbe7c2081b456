"""Derivative kernels say that their arrays are disjoint (their launches refuse arguments
that share memory where one is written): the IR marks them `disjoint_arrays`, the
lowering puts each access to an array parameter in that parameter's alias scope and in
no other's, and each block's loads come first (`hoist-loads`), so that a shadow's load
no longer waits behind another array's store. A primal kernel, whose arrays may
overlap, gets none of it. On every backend (CUDA compile-only without a GPU)."""
import numpy as np
import pytest

import kernelkit as kk
from enzyme_ext import compiler_job_from_backend
from enzyme_ext.jobs import derivative_job
from enzyme_ext.signature import AUGMENTED, COMBINED, REVERSE
from kernelkit.compiler.driver import compile_job


@kk.kernel
def sin_times_x(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = kk.sin(x[i]) * x[i]


def compiled(backend, mode):
    x = kk.to_backend(backend, np.zeros(256, np.float32))
    argtypes = sin_times_x.argument_types(backend, (x, x))
    parent = compiler_job_from_backend(backend, sin_times_x, argtypes, workgroupsize=(256,))
    if mode is None:
        return compile_job(parent)
    return compile_job(derivative_job(parent, mode, ("duplicated", "duplicated"),
                                      (argtypes[0], argtypes[0])))


@pytest.mark.parametrize("mode", [AUGMENTED, REVERSE, COMBINED])
def test_derivative_kernels_put_each_array_in_a_scope_of_its_own(backend, mode):
    kernel = compiled(backend, mode)
    assert "disjoint_arrays {" in kernel.ir.splitlines()[0]
    assert "!alias.scope" in kernel.llvm_ir and "!noalias" in kernel.llvm_ir


def test_a_primal_kernel_has_no_scopes(backend):
    kernel = compiled(backend, None)
    assert "disjoint_arrays" not in kernel.ir
    assert "!alias.scope" not in kernel.llvm_ir


def test_the_reverse_loads_the_shadows_before_its_arithmetic(backend):
    """`sin(x) * x`'s reverse reads d_y and d_x at its start, before sin and cos, where it
    read them after (d_x after storing d_y)."""
    lines = [line.strip() for line in compiled(backend, REVERSE).ir.splitlines()]
    loads = [k for k, line in enumerate(lines) if " = load " in line]
    first_math = next(k for k, line in enumerate(lines) if " = math." in line)
    assert len(loads) == 3 and max(loads) < first_math


TILE = 4


@kk.kernel
def tiled_product(c, a: kk.Const, b: kk.Const, k):
    i, j = kk.index(kk.Global, kk.NTuple)
    li, lj = kk.index(kk.Local, kk.NTuple)
    a_tile = kk.localmem(np.float32, (TILE, TILE))
    b_tile = kk.localmem(np.float32, (TILE, TILE))
    acc = 0.0
    for start in range(0, k, TILE):
        a_tile[li, lj] = a[i, start + lj]
        b_tile[li, lj] = b[start + li, j]
        kk.synchronize()
        for p in range(TILE):
            acc += a_tile[li, p] * b_tile[p, lj]
        kk.synchronize()
    c[i, j] = acc


def compiled_product(backend):
    x = kk.to_backend(backend, np.zeros((8, 8), np.float32))
    argtypes = tiled_product.argument_types(backend, (x, x, x, 8))
    parent = compiler_job_from_backend(backend, tiled_product, argtypes,
                                       workgroupsize=(TILE, TILE))
    return compile_job(derivative_job(parent, COMBINED, ("duplicated",) * 3 + ("const",),
                                      (argtypes[0],) * 3 + (None,)))


def test_a_derivative_kernel_s_local_memory_is_in_a_scope_apart_from_the_arrays(backend):
    """The local adjoints of the tiles (`d_a_tile[li, p] += ...`, one element for a row
    of work-items) are in the group's scope, which every array access lists as one it
    does not alias: LLVM needs no run-time check between them and the arrays' loads."""
    lines = [line for line in compiled_product(backend).llvm_ir.splitlines()
             if line.startswith("!") and " = !{" in line]
    groups = [line.split(" = ")[0] for line in lines if '.group"' in line]
    assert len(groups) == 1
    lists = [line for line in lines if f"{groups[0]}," in line or f"{groups[0]} }}" in line
             or f"{groups[0]}}}" in line]
    assert lists, "no access lists the group's scope"


def test_on_the_cpu_the_local_adjoints_of_a_row_are_summed_in_vectors():
    """A group's work-items run one after another on the CPU: the atomic updates of a
    local adjoint become a sum the loop vectorizer takes over the row (atomics have no
    set order), where it was a chain of scalar updates through memory."""
    llvm_ir = compiled_product(kk.CPU()).llvm_ir
    assert "llvm.vector.reduce.fadd" in llvm_ir
