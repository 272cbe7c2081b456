"""The CUDA backend without a GPU: CUDABackend.compile_only(arch) compiles kernels to PTX
(kk.code_native) and to cubins for each architecture asked for, maps the language onto
CUDA (thread indices, bar.sync, shared memory, atomics, vprintf, libdevice math with only
what is used), and refuses to launch with a clear error; CUDABackend() says why it
cannot run here."""
import math

import numpy as np
import pytest

import kernelkit as kk
from backends.cuda import CompileOnlyError, CUDABackend
from backends.cuda.runtime import compile_only_unavailable_reason

needs_toolchain = pytest.mark.skipif(compile_only_unavailable_reason() is not None,
                                     reason=str(compile_only_unavailable_reason()))


@kk.kernel
def saxpy(y, a, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = a * x[i] + y[i]


@kk.kernel
def tiled_sum(out, x: kk.Const):
    i = kk.index(kk.Global)
    li = kk.index(kk.Local)
    tile = kk.localmem(np.float32, 64)
    tile[li] = x[i]
    kk.synchronize()
    if li == 0:
        total = 0.0
        for p in range(64):
            total += tile[p]
        kk.atomic_add(out, 0, total)
        kk.print("group total", total)


@kk.kernel
def sine(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = math.sin(x[i])


@kk.kernel
def two_d(out):
    i, j = kk.index(kk.Global, kk.NTuple)
    out[i, j] = i * 100 + j


def compiled_for(kernel, backend, args, ndrange, group):
    argtypes = kernel.argument_types(backend, args)
    return kernel.specialize(backend, argtypes, group)


def test_code_native_is_ptx_for_the_architecture_asked_for():
    x = np.zeros(100, np.float32)
    for arch in ("sm_80", "sm_90"):
        ptx = kk.code_native(saxpy, CUDABackend.compile_only(arch), x, np.float32(2), x,
                             ndrange=100, workgroupsize=64)
        assert f".target {arch}" in ptx
        assert ".entry kk_saxpy(" in ptx
        assert "%tid.x" in ptx and "%ctaid.x" in ptx
        assert "ld.global.nc" in ptx          # Const arrays are read through the read-only path


def test_the_last_axis_is_cuda_x_so_neighbouring_items_are_neighbouring_threads():
    out = np.zeros((4, 8), np.int64)
    llvm = kk.code_llvm(two_d, CUDABackend.compile_only("sm_90"), out, ndrange=(4, 8),
                        workgroupsize=(2, 8))
    assert "tid.x" in llvm and "tid.y" in llvm


def test_barriers_shared_memory_atomics_and_print_map_to_cuda():
    x = np.zeros(128, np.float32)
    out = np.zeros(1, np.float32)
    ptx = kk.code_native(tiled_sum, CUDABackend.compile_only("sm_90"), out, x, ndrange=128,
                         workgroupsize=64)
    assert ".shared .align 16 .b8 localmem" in ptx
    assert "bar.sync" in ptx
    assert "atom.global.add.f32" in ptx or "red.global.add.f32" in ptx
    assert "vprintf" in ptx


WAIT, TRIGGER = "griddepcontrol.wait;", "griddepcontrol.launch_dependents;"
MEMORY = ("ld.", "st.", "atom.", "red.", "cp.async", "vprintf")


@pytest.mark.parametrize("arch", ["sm_90", "sm_100", "sm_120"])
@pytest.mark.parametrize("debug", [False, True], ids=["plain", "debug"])
def test_kernels_for_sm_90_and_newer_wait_for_the_previous_grid_before_touching_memory(
        arch, debug):
    """Dependent launch (backends/cuda/thread.py): the wait, then the trigger for the next
    kernel, at the entry of coarsened kernels, kernels with barriers, shared memory,
    atomics and printing, and two-axis ones, with bounds checks or without."""
    backend = CUDABackend.compile_only(arch, debug=debug)
    x, out = np.zeros(128, np.float32), np.zeros(1, np.float32)
    for kernel, args, ndrange, group in [(saxpy, (x, np.float32(2), x), 128, (64,)),
                                         (tiled_sum, (out, x), 128, (64,)),
                                         (two_d, (np.zeros((4, 8), np.int64),), (4, 8),
                                          (2, 8))]:
        ptx = kk.code_native(kernel, backend, *args, ndrange=ndrange, workgroupsize=group)
        body = ptx[ptx.index(".entry"):]
        first_access = min(body.index(op) for op in MEMORY if op in body)
        assert body.index(WAIT) < body.index(TRIGGER) < first_access, kernel.name
        assert body.count(WAIT) == body.count(TRIGGER) == 1
        # Before the wait, only addresses are computed (of the parameter, of the stack).
        prologue = body[body.index("{"):body.index(WAIT)].splitlines()[1:]
        instructions = [line.strip() for line in prologue
                        if line.strip() and not line.strip().startswith((".", "//"))]
        assert instructions and all(line.startswith(("mov.", "cvta.", "add."))
                                    for line in instructions), (kernel.name, instructions)
        compiled = compiled_for(kernel, backend, args, ndrange, group)
        assert compiled.info["dependent_launch"] is True


def test_older_architectures_have_no_dependent_launch():
    x = np.zeros(128, np.float32)
    for arch in ("sm_80", "sm_89"):
        backend = CUDABackend.compile_only(arch)
        ptx = kk.code_native(saxpy, backend, x, np.float32(2), x, ndrange=128,
                             workgroupsize=64)
        assert f".target {arch}" in ptx and "griddepcontrol" not in ptx
        compiled = compiled_for(saxpy, backend, (x, np.float32(2), x), 128, (64,))
        assert compiled.info["dependent_launch"] is False


@needs_toolchain
def test_math_comes_from_libdevice_and_only_what_is_used_is_kept():
    x = np.zeros(100, np.float32)
    backend = CUDABackend.compile_only("sm_90")
    llvm = kk.code_llvm(sine, backend, x, x, ndrange=100, workgroupsize=64)
    assert "__nv_cosf" not in llvm and "__nv_expf" not in llvm
    ptx = kk.code_native(sine, backend, x, x, ndrange=100, workgroupsize=64)
    assert ".func" not in ptx or ptx.count(".func") <= 2   # sin is inlined, nothing else


@needs_toolchain
def test_artifacts_are_cubins_for_each_architecture():
    x = np.zeros(100, np.float32)
    for arch in ("sm_80", "sm_90"):
        compiled = compiled_for(saxpy, CUDABackend.compile_only(arch), (x, np.float32(2), x),
                                (100,), (64,))
        assert compiled.artifact[:4] == b"\x7fELF"
        assert compiled.entry.is_cubin and compiled.entry.symbol == "kk_saxpy"


def test_launching_on_a_compile_only_backend_compiles_then_says_it_cannot_run():
    backend = CUDABackend.compile_only("sm_80", "sm_90")
    x = np.ones(100, np.float32)
    with pytest.raises(CompileOnlyError, match=r"kernel 'saxpy' was compiled for sm_80, sm_90"):
        saxpy(backend, 64)(x, np.float32(2), x, ndrange=100)


def test_cuda_backend_without_a_usable_gpu_says_why_and_what_to_use():
    reason = CUDABackend.unavailable_reason()
    if reason is None:
        pytest.skip("a GPU is available here")
    with pytest.raises(kk.BackendError, match="compile_only"):
        CUDABackend()


def test_a_work_group_larger_than_cuda_allows_is_a_launch_error():
    out = np.zeros((64, 64), np.int64)
    with pytest.raises(kk.LaunchError, match="at most 1024"):
        kk.code_native(two_d, CUDABackend.compile_only("sm_90"), out,
                       ndrange=(64, 64), workgroupsize=(64, 32))


def test_unknown_architecture_is_an_error_listing_known_ones():
    with pytest.raises(kk.BackendError, match="unknown GPU architecture 'sm_1'.*sm_90"):
        CUDABackend.compile_only("sm_1")
