"""Dependent launch on sm_90 and newer (backends/cuda/thread.py): every kernel waits for
the previous grid at its entry and then lets the next one be scheduled, and the runtime
launches it through cuLaunchKernelEx with programmatic stream serialization. Results must
be those of stream order, for kernels that read what other blocks of the previous kernel
wrote, and where launches of both kinds alternate on one stream. (The PTX of every kind
of kernel is checked in test_cuda_compile_only.py, without a GPU.)"""
import numpy as np
import pytest

import kernelkit as kk
import backends.cuda.runtime as runtime
from backends.cuda import CUDABackend
from backends.cuda.launch import BLOCK
from backends.cuda.target import PTXTarget

REASON = CUDABackend.unavailable_reason()
ON_HOST_DRIVER = getattr(runtime, "HOST_DRIVER", False)
needs_gpu = pytest.mark.skipif(REASON is not None, reason=f"no GPU to run on: {REASON}")


@kk.kernel
def reverse_plus_one(y, x: kk.Const):
    """Each work-item reads what another block of the previous launch wrote."""
    i = kk.index(kk.Global)
    y[i] = x[len(x) - 1 - i] + 1


@kk.kernel
def add_one(y):
    i = kk.index(kk.Global)
    y[i] = y[i] + 1


def attributes_of(kernel, backend) -> int:
    """The launch attributes of `kernel`'s one launch block on `backend`: 1 where it is
    launched to overlap the kernel before it."""
    (prepared,) = (p for key, p in kernel._specializations.items() if key[0] is backend)
    assert prepared.compiled.info["dependent_launch"] is (BLOCK.unpack_from(
        prepared.launch.block)[-1] == 1)
    return BLOCK.unpack_from(prepared.launch.block)[-1]


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
    assert attributes_of(reverse_plus_one, gpu) == int(PTXTarget(gpu.arch).dependent_launch)
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
    assert (attributes_of(reverse_plus_one, gpu), attributes_of(plain_kernel, gpu)) == (1, 0)
    if ON_HOST_DRIVER:
        assert launch_kinds(host_driver, seen) == [("launch_ex", {6: 1}), "launch"] * 50


@needs_gpu
def test_copies_memsets_and_another_streams_work_between_such_kernels_keep_their_order():
    """Between kernels that overlap their neighbours: a copy from the host, a copy on the
    device, a strided copy (a copy kernel), a new zeroed array, and a kernel on another
    backend's stream; each kernel reads what other blocks, or the work before, wrote."""
    gpu, other = CUDABackend(), CUDABackend()
    n = 1 << 22
    step = reverse_plus_one(gpu, 256)
    host = np.arange(n, dtype=np.float32)
    a, b = kk.zeros(gpu, np.float32, n), kk.zeros(gpu, np.float32, n)
    wide = kk.zeros(gpu, np.float32, (n, 2))
    for _ in range(3):
        kk.copyto(a, host)
        step(b, a, ndrange=n)            # b = host reversed, + 1
        kk.copyto(a, b)
        step(b, a, ndrange=n)            # b = host + 2
        add_one(other, 256)(b, ndrange=n)
        step(a, b, ndrange=n)            # a = host reversed, + 4
        kk.copyto(wide[:, 1], a)
        kk.copyto(b, wide[:, 1])
        step(a, b, ndrange=n)            # a = host + 5
        zeros = kk.zeros(gpu, np.float32, n)
        step(b, zeros, ndrange=n)        # b = 1
        step(zeros, a, ndrange=n)        # zeros = host reversed, + 6
        np.testing.assert_array_equal(kk.to_numpy(b), np.ones(n, np.float32))
        np.testing.assert_array_equal(kk.to_numpy(zeros), host[::-1] + 6)


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
