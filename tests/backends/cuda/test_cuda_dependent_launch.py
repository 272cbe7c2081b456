"""Dependent launch on sm_90 and newer (backends/cuda/thread.py): every kernel waits for
the previous grid at its entry (`griddepcontrol.wait`) and then lets the next one be
scheduled (`griddepcontrol.launch_dependents`), and the runtime launches it through
cuLaunchKernelEx with programmatic stream serialization. What must hold: the waits come
before any memory access in every kind of kernel; older architectures have neither; and
results are those of stream order, for kernels that read what other blocks of the
previous kernel wrote, and where launches of both kinds alternate on one stream."""
import numpy as np
import pytest

import kernelkit as kk
import backends.cuda.runtime as runtime
from backends.cuda import CUDABackend
from backends.cuda.runtime import compile_only_unavailable_reason
from backends.cuda.target import PTXTarget

REASON = CUDABackend.unavailable_reason()
ON_HOST_DRIVER = getattr(runtime, "HOST_DRIVER", False)
needs_gpu = pytest.mark.skipif(REASON is not None, reason=f"no GPU to run on: {REASON}")
needs_toolchain = pytest.mark.skipif(compile_only_unavailable_reason() is not None,
                                     reason=str(compile_only_unavailable_reason()))

WAIT, TRIGGER = "griddepcontrol.wait;", "griddepcontrol.launch_dependents;"
MEMORY = ("ld.global", "st.global", "atom.", "red.", "ld.shared", "st.shared", "vprintf")


@kk.kernel
def reverse_plus_one(y, x: kk.Const):
    """Each work-item reads what another block of the previous launch wrote."""
    i = kk.index(kk.Global)
    y[i] = x[len(x) - 1 - i] + 1


@kk.kernel
def tiled_total(out, x: kk.Const):
    li = kk.index(kk.Local)
    tile = kk.localmem(np.float32, 64)
    tile[li] = x[kk.index(kk.Global)]
    kk.synchronize()
    if li == 0:
        total = 0.0
        for p in range(64):
            total += tile[p]
        kk.atomic_add(out, 0, total)
        kk.print("group total", total)


def ptx_of(kernel, arch, *args, ndrange, group, debug=False):
    return kk.code_native(kernel, CUDABackend.compile_only(arch, debug=debug), *args,
                          ndrange=ndrange, workgroupsize=group)


@needs_toolchain
@pytest.mark.parametrize("arch", ["sm_90", "sm_100", "sm_120"])
@pytest.mark.parametrize("debug", [False, True], ids=["plain", "debug"])
def test_kernels_for_sm_90_and_newer_wait_for_the_previous_grid_before_touching_memory(
        arch, debug):
    x = np.zeros(256, np.float32)
    for kernel, args, group in [(reverse_plus_one, (x, x), 64),      # coarsened
                                (tiled_total, (np.zeros(1, np.float32), x), 64)]:
        ptx = ptx_of(kernel, arch, *args, ndrange=256, group=group, debug=debug)
        body = ptx[ptx.index(".entry"):]
        first_access = min(body.index(op) for op in MEMORY if op in body)
        assert body.index(WAIT) < body.index(TRIGGER) < first_access, kernel.name
        assert body.count(WAIT) == body.count(TRIGGER) == 1


@needs_toolchain
def test_older_architectures_have_no_dependent_launch():
    x = np.zeros(256, np.float32)
    for arch in ("sm_80", "sm_89"):
        backend = CUDABackend.compile_only(arch)
        assert "griddepcontrol" not in ptx_of(reverse_plus_one, arch, x, x, ndrange=256,
                                              group=64)
        compiled = reverse_plus_one.specialize(
            backend, reverse_plus_one.argument_types(backend, (x, x)), (64,))
        assert compiled.info["dependent_launch"] is False
    backend = CUDABackend.compile_only("sm_90")
    compiled = reverse_plus_one.specialize(
        backend, reverse_plus_one.argument_types(backend, (x, x)), (64,))
    assert compiled.info["dependent_launch"] is True


def launch_kinds(host_driver, seen: int) -> list:
    """The driver functions the launches since `seen` went through, with their attributes."""
    return [call[0] if call[0] == "launch" else (call[0], call[2])
            for call in host_driver.calls[seen:] if call[0] in ("launch", "launch_ex")]


@needs_gpu
def test_a_chain_of_kernels_that_read_other_blocks_writes_gets_stream_order_results():
    gpu = CUDABackend()
    n = 1 << 22
    a, b = kk.zeros(gpu, np.float32, n), kk.zeros(gpu, np.float32, n)
    step = reverse_plus_one(gpu, 256)
    if ON_HOST_DRIVER:
        import host_driver
        seen = len(host_driver.calls)
    for _ in range(100):
        step(b, a, ndrange=n)
        step(a, b, ndrange=n)
    np.testing.assert_array_equal(kk.to_numpy(a), np.full(n, 200, np.float32))
    if ON_HOST_DRIVER:   # the stand-in is an sm_90: every launch lets the next one start
        assert launch_kinds(host_driver, seen) == [("launch_ex", {6: 1})] * 200


@needs_gpu
def test_kernels_with_and_without_dependent_launch_alternate_on_one_stream(monkeypatch):
    """A kernel compiled for sm_80 (PTX the driver compiles; launched by cuLaunchKernel)
    between kernels that overlap their neighbours: each waits for the one before."""
    gpu = CUDABackend()
    if not PTXTarget(gpu.arch).dependent_launch:
        pytest.skip(f"{gpu.arch} has no dependent launch")
    n = 1 << 22
    a, b = kk.zeros(gpu, np.float32, n), kk.zeros(gpu, np.float32, n)
    waiting = reverse_plus_one(gpu, 256)
    plain_kernel = kk.kernel(reverse_plus_one.function)
    with monkeypatch.context() as patch:
        patch.setattr(gpu, "_target", PTXTarget("sm_80", cubin=False))
        plain_kernel(gpu, 256)(b, a, ndrange=n)   # compiled for sm_80 here
    plain = plain_kernel(gpu, 256)
    if ON_HOST_DRIVER:
        import host_driver
        seen = len(host_driver.calls)
    for _ in range(50):
        waiting(a, b, ndrange=n)
        plain(b, a, ndrange=n)
    np.testing.assert_array_equal(kk.to_numpy(b), np.full(n, 101, np.float32))
    if ON_HOST_DRIVER:
        assert launch_kinds(host_driver, seen) == [("launch_ex", {6: 1}), "launch"] * 50


@pytest.mark.skipif(not ON_HOST_DRIVER, reason="checks the host stand-in for the driver")
def test_the_stand_in_refuses_a_dependent_launch_of_a_kernel_that_does_not_wait(monkeypatch):
    import host_driver
    from backends.cuda.launch import LaunchBlock
    gpu = CUDABackend()
    x = kk.zeros(gpu, np.float32, 64)
    kernel = kk.kernel(reverse_plus_one.function)
    with monkeypatch.context() as patch:
        patch.setattr(gpu, "_target", PTXTarget("sm_80", cubin=False))
        kernel(gpu, 64)(x, x, ndrange=64)
    (prepared,) = kernel._specializations.values()
    packed = prepared.pack(prepared.geometry[(64,)], (x, x), [])
    launch = LaunchBlock(prepared.function, gpu.stream_handle, (64, 1, 1), len(packed),
                         dependent=True)
    seen = len(host_driver.problems)
    invalid_value = 1
    assert launch.go(packed) == invalid_value
    assert [name for name, _ in host_driver.problems[seen:]] == ["cuLaunchKernelEx"]
    assert "does not wait" in host_driver.problems[-1][1]
    del host_driver.problems[seen:]
