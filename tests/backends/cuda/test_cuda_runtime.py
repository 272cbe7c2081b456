"""The CUDA backend on a GPU: device arrays (allocation, copies in every direction, views),
CuPy arrays and PyTorch tensors in and out without copies (CUDA array interface and
DLPack), stream order, and the errors: host arrays passed to GPU launches and the other
way round, out of memory, a failed launch reported on synchronize with the kernel's name.

Every test here needs a GPU and is skipped with the reason where there is none (the
kernels of the whole suite still compile for sm_80 and sm_90 there)."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import kernelkit as kk
from backends.cuda import CUDABackend

import backends.cuda.runtime as runtime

REASON = CUDABackend.unavailable_reason()
ON_HOST_DRIVER = getattr(runtime, "HOST_DRIVER", False)
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"no GPU to run on: {REASON}")

DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
          np.uint64, np.float16, np.float32, np.float64]


@pytest.fixture(scope="module")
def gpu():
    return kk.make_backend("cuda")


@kk.kernel
def saxpy(y, a, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = a * x[i] + y[i]


@kk.kernel
def add_one(y):
    i = kk.index(kk.Global)
    y[i] = y[i] + 1


# --- arrays --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_zeros_ones_and_round_trips_for_every_dtype(gpu, dtype):
    host = (np.arange(1, 38) % 5).astype(dtype).reshape(37)
    device = kk.to_backend(gpu, host)
    assert device.shape == host.shape and device.dtype == host.dtype
    assert device.strides == host.strides
    np.testing.assert_array_equal(kk.to_numpy(device), host)
    np.testing.assert_array_equal(kk.to_numpy(kk.zeros(gpu, dtype, (3, 5))),
                                  np.zeros((3, 5), dtype))
    np.testing.assert_array_equal(kk.to_numpy(kk.ones(gpu, dtype, 1001)), np.ones(1001, dtype))


def test_empty_arrays_allocate_copy_and_launch_nothing(gpu):
    empty = kk.zeros(gpu, np.float32, (0, 4))
    assert kk.to_numpy(empty).shape == (0, 4)
    add_one(gpu, 64)(kk.zeros(gpu, np.float32, 0), ndrange=0)
    kk.synchronize(gpu)


def test_get_backend_finds_the_backend_of_an_array(gpu):
    array = kk.zeros(gpu, np.float32, 4)
    assert kk.get_backend(array) is gpu
    assert kk.get_backend(array[1:].T) is gpu


def test_copyto_in_every_direction_with_contiguous_and_strided_arrays(gpu):
    host = np.arange(5 * 9, dtype=np.float64).reshape(5, 9)
    device = kk.zeros(gpu, np.float64, (5, 9))
    kk.copyto(device, host)                                   # host -> device
    np.testing.assert_array_equal(kk.to_numpy(device), host)
    back = np.zeros_like(host)
    kk.copyto(back, device)                                   # device -> host
    np.testing.assert_array_equal(back, host)
    other = kk.zeros(gpu, np.float64, (5, 9))
    kk.copyto(other, device)                                  # device -> device
    np.testing.assert_array_equal(kk.to_numpy(other), host)
    transposed = kk.zeros(gpu, np.float64, (9, 5))
    kk.copyto(transposed.T, device)                           # into a strided view
    np.testing.assert_array_equal(kk.to_numpy(transposed), host.T)
    kk.copyto(transposed[::2], host.T[::2] * 2)               # host -> strided view
    expected = host.T.copy()
    expected[::2] *= 2
    np.testing.assert_array_equal(kk.to_numpy(transposed), expected)
    strided = np.zeros((5, 3))
    kk.copyto(strided, device[:, ::3])                        # strided view -> host
    np.testing.assert_array_equal(strided, host[:, ::3])
    np.testing.assert_array_equal(kk.to_numpy(device[::-1, 1::4]), host[::-1, 1::4])


def test_to_backend_moves_arrays_between_the_cpu_and_the_gpu(gpu):
    cpu = kk.make_backend("cpu")
    host = np.arange(12, dtype=np.int32).reshape(3, 4)
    on_gpu = kk.to_backend(gpu, host)
    assert kk.to_backend(gpu, on_gpu) is on_gpu
    back = kk.to_backend(cpu, on_gpu.T)
    assert isinstance(back, np.ndarray)
    np.testing.assert_array_equal(back, host.T)
    np.testing.assert_array_equal(kk.to_backend(cpu, [1, 2]), [1, 2])


def test_copyto_refuses_other_shapes_conversions_and_read_only_destinations(gpu):
    with pytest.raises(kk.BackendError, match="read-only"):
        kk.copyto(np.frombuffer(bytes(16), np.float32), kk.ones(gpu, np.float32, 4))
    with pytest.raises(kk.BackendError, match="shape"):
        kk.copyto(kk.zeros(gpu, np.float32, 4), np.zeros(5, np.float32))
    with pytest.raises(kk.BackendError, match="do not convert"):
        kk.copyto(kk.zeros(gpu, np.float32, 4), kk.zeros(gpu, np.float64, 4))


def test_launches_are_asynchronous_and_stream_ordered(gpu):
    n = 1 << 20
    y = kk.zeros(gpu, np.float32, n)
    for _ in range(50):
        add_one(gpu, 256)(y, ndrange=n)
    host = np.zeros(n, np.float32)
    kk.copyto(host, y)
    np.testing.assert_array_equal(host, np.full(n, 50, np.float32))


def test_a_view_much_taller_than_a_grid_axis_copies(gpu):
    # 70000 rows: more than CUDA's 65535 groups along any grid axis but x.
    host = np.arange(70000 * 2, dtype=np.float32).reshape(70000, 2)
    wide = kk.zeros(gpu, np.float32, (70000, 5))
    kk.copyto(wide[:, 1:3], host)
    np.testing.assert_array_equal(kk.to_numpy(wide[:, 1:3]), host)
    np.testing.assert_array_equal(kk.to_numpy(wide[:, 0]), np.zeros(70000, np.float32))


def test_two_backends_on_one_gpu_see_each_others_writes_in_order(gpu):
    other = CUDABackend(device=gpu.device)
    n = 1 << 22
    y = kk.zeros(gpu, np.float32, n)           # gpu's array, written on other's stream
    for _ in range(20):
        add_one(other, 256)(y, ndrange=n)
    add_one(gpu, 256)(y, ndrange=n)            # queued on gpu's stream after them
    np.testing.assert_array_equal(kk.to_numpy(y), np.full(n, 21, np.float32))
    z = kk.zeros(other, np.float32, n)
    for _ in range(20):
        add_one(gpu, 256)(z, ndrange=n)
    host = np.empty(n, np.float32)
    kk.copyto(host, z)                          # through other, the owner
    np.testing.assert_array_equal(host, np.full(n, 20, np.float32))


@pytest.mark.skipif(not ON_HOST_DRIVER, reason="reads what the host stand-in for the driver "
                                               "was asked; on a GPU the test above checks it")
def test_a_launch_with_another_backends_array_orders_both_streams(gpu):
    import host_driver
    other = CUDABackend(device=gpu.device)
    y = kk.zeros(gpu, np.float32, 64)
    add_one(other, 64)(y, ndrange=64)            # compiled and loaded: now count
    host_driver.calls.clear()
    add_one(other, 64)(y, ndrange=64)
    waits = [call for call in host_driver.calls if call[0] == "wait"]
    assert waits == [("wait", other.stream_handle), ("wait", gpu.stream_handle)]


@pytest.mark.skipif(not ON_HOST_DRIVER, reason="checks the host stand-in for the driver")
def test_the_stand_in_refuses_what_the_driver_refuses(gpu):
    import threading

    import host_driver
    from cuda.bindings import driver
    seen = len(host_driver.problems)
    results = []
    thread = threading.Thread(target=lambda: results.append(driver.cuStreamCreate(0)[0]))
    thread.start()
    thread.join()
    assert results == [driver.CUresult.CUDA_ERROR_INVALID_CONTEXT]   # none current there
    y = kk.zeros(gpu, np.float32, 4)
    host = np.empty(8, np.float32)
    assert driver.cuMemcpyDtoH(host.ctypes.data, y.pointer, host.nbytes)[0] == \
        driver.CUresult.CUDA_ERROR_INVALID_VALUE   # 32 bytes from a 16-byte allocation
    # Memory allocated in the order of one stream, set on another with nothing between.
    one, two = driver.cuStreamCreate(0)[1], driver.cuStreamCreate(0)[1]
    error, pointer = driver.cuMemAllocAsync(64, one)
    assert not error and not driver.cuMemsetD8Async(pointer, 1, 64, two)[0]  # a race
    _, event = driver.cuEventCreate(0)
    driver.cuEventRecord(event, two)
    driver.cuStreamWaitEvent(one, event, 0)   # the free waits for the memset: no race
    assert not driver.cuMemFreeAsync(pointer, one)[0]
    for handle in (one, two):
        driver.cuStreamDestroy(handle)
    driver.cuEventDestroy(event)
    names = [name for name, _ in host_driver.problems[seen:]]
    assert names == ["cuStreamCreate", "cuMemcpyDtoH", "a memset of 64 x 1 bytes"], names
    assert "nothing (an event, a synchronize) orders the two" in host_driver.problems[-1][1]
    del host_driver.problems[seen:]


@kk.kernel
def add_two(y):
    i = kk.index(kk.Global)
    y[i] += 2


@pytest.mark.skipif(not ON_HOST_DRIVER, reason="a GPU's driver loads our cubins; the host "
                                               "stand-in can refuse them")
def test_a_cubin_the_driver_refuses_is_replaced_by_ptx_it_compiles(gpu, monkeypatch):
    import host_driver
    monkeypatch.setattr(host_driver, "refuse_cubins", True)
    y = kk.zeros(gpu, np.float32, 100)
    add_two(gpu, 64)(y, ndrange=100)
    np.testing.assert_array_equal(kk.to_numpy(y), np.full(100, 2, np.float32))


def test_launches_from_another_thread_run_on_the_same_gpu(gpu):
    import threading
    y = kk.zeros(gpu, np.float32, 1000)
    errors = []

    def work():
        try:
            for _ in range(10):
                add_one(gpu, 128)(y, ndrange=1000)
            kk.synchronize(gpu)
        except Exception as error:  # reported below, in the test's thread
            errors.append(error)
    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert not errors, errors
    np.testing.assert_array_equal(kk.to_numpy(y), np.full(1000, 10, np.float32))


@kk.kernel
def fill(y, value):
    i = kk.index(kk.Global)
    y[i] = value


def test_one_kernel_launched_from_several_threads_at_once_keeps_each_launchs_arguments(gpu):
    """Each launch's record is its own (the driver copies it during the call): threads
    launching one kernel with different arrays and values do not mix them up."""
    import threading
    count, threads = 20, 4
    arrays = [[kk.zeros(gpu, np.int64, 333) for _ in range(count)] for _ in range(threads)]
    fill(gpu, 64)(arrays[0][0], 0, ndrange=333)   # compiled before the threads start
    start, errors = threading.Barrier(threads), []

    def work(t):
        try:
            start.wait()
            for k in range(count):
                fill(gpu, 64)(arrays[t][k], t * 1000 + k, ndrange=333)
        except Exception as error:  # reported below, in the test's thread
            errors.append(error)
    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert not errors, errors
    for t in range(threads):
        for k in range(count):
            np.testing.assert_array_equal(kk.to_numpy(arrays[t][k]), t * 1000 + k)


def test_the_native_launch_call_refuses_anything_but_a_packed_record(gpu):
    y = kk.zeros(gpu, np.float32, 8)
    add_one(gpu, 8)(y, ndrange=8)
    (prepared,) = (p for key, p in add_one._specializations.items()
                   if key[0] is gpu and key[1] == (8,))
    with pytest.raises(TypeError):
        prepared.launch.go("not a record")
    invalid_value = 1   # a record of another size launches nothing
    assert prepared.launch.go(b"\x01\0\0\0" * 3) == invalid_value
    kk.synchronize(gpu)
    np.testing.assert_array_equal(kk.to_numpy(y), np.ones(8, np.float32))


class Interface:
    """Another library's array, as the CUDA array interface shows it."""

    def __init__(self, array, read_only=False):
        self.array = array
        interface = dict(array.__cuda_array_interface__)
        interface["data"] = (array.pointer, read_only)
        self.__cuda_array_interface__ = interface


class DLPackOnly:
    """Another library's array that speaks only DLPack (as JAX's do)."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None, max_version=None):
        return self.array.__dlpack__(stream=stream, max_version=max_version)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_arrays_of_other_libraries_by_either_protocol_are_arguments(gpu):
    x = kk.to_backend(gpu, np.arange(100, dtype=np.float32))
    y = kk.ones(gpu, np.float32, 100)
    saxpy(gpu, 64)(Interface(y), 2.0, DLPackOnly(x), ndrange=100)
    np.testing.assert_array_equal(kk.to_numpy(y), 2 * np.arange(100) + 1)
    assert kk.get_backend(Interface(y)) is gpu
    np.testing.assert_array_equal(kk.to_numpy(DLPackOnly(x)), np.arange(100))


def test_the_host_reads_another_librarys_array_after_every_backend_that_wrote_it(gpu):
    other = CUDABackend(device=gpu.device)
    y = kk.zeros(gpu, np.float32, 1000)
    for _ in range(5):
        add_one(other, 128)(Interface(y), ndrange=1000)   # queued on other's stream
    np.testing.assert_array_equal(kk.to_numpy(Interface(y)), np.full(1000, 5, np.float32))


def test_another_librarys_array_dropped_after_a_launch_lives_until_the_launch_ran(gpu):
    import gc
    import weakref
    other = CUDABackend(device=gpu.device)
    dropped = Interface(kk.zeros(gpu, np.float32, 64))
    alive = weakref.ref(dropped)
    add_one(other, 64)(dropped, ndrange=64)
    del dropped
    gc.collect()   # nothing of ours refers to the array: the launch must keep it
    assert alive() is not None
    kk.synchronize(gpu)   # where its free would be queued
    assert alive() is not None
    kk.synchronize(other)   # the launch ran on memory still allocated (the stand-in checks)
    gc.collect()
    assert alive() is None   # and then it is let go


def test_a_read_only_array_of_another_library_is_only_taken_for_a_const_parameter(gpu):
    x = Interface(kk.to_backend(gpu, np.arange(8, dtype=np.float32)), read_only=True)
    y = kk.zeros(gpu, np.float32, 8)
    saxpy(gpu, 8)(y, 1.0, x, ndrange=8)        # x is kk.Const: fine
    np.testing.assert_array_equal(kk.to_numpy(y), np.arange(8))
    with pytest.raises(kk.LaunchError, match=r"argument 'y' is read-only.*kk.Const"):
        saxpy(gpu, 8)(x, 1.0, y, ndrange=8)
    add_one(gpu, 8)(y, ndrange=8)              # a writable array compiles add_one first
    seen = kk.to_backend(gpu, x)                # a view of the read-only memory, no copy
    assert seen.pointer == x.array.pointer and seen.__cuda_array_interface__["data"][1]
    with pytest.raises(kk.LaunchError, match=r"argument 'y' is read-only"):
        add_one(gpu, 8)(seen, ndrange=8)


# --- errors --------------------------------------------------------------------------


def test_a_numpy_array_passed_to_a_gpu_launch_names_the_argument_and_the_fix(gpu):
    y = kk.zeros(gpu, np.float32, 8)
    with pytest.raises(kk.LaunchError, match=r"argument 'x' is a NumPy array.*kk.to_backend"):
        saxpy(gpu, 8)(y, 2.0, np.ones(8, np.float32), ndrange=8)


def test_a_gpu_array_passed_to_a_cpu_launch_names_the_argument_and_the_fix(gpu):
    cpu = kk.make_backend("cpu")
    with pytest.raises(kk.LaunchError, match=r"argument 'x' is a device array.*kk.to_numpy"):
        saxpy(cpu, 8)(np.zeros(8, np.float32), 2.0, kk.ones(gpu, np.float32, 8), ndrange=8)


def test_out_of_memory_is_an_error_with_the_size_asked_for(gpu):
    with pytest.raises(MemoryError, match=r"out of memory.*shape \(1125899906842624,\)"):
        kk.allocate(gpu, np.uint8, 1 << 50)
    assert kk.to_numpy(kk.ones(gpu, np.int32, 3)).tolist() == [1, 1, 1]


def run_wild_pointer_script(tmp_path, failing: str, wait: str = "", before: str = "") -> str:
    """Run `before`, launch a kernel through a wild pointer, `wait` (without asking
    kernelkit), then run `failing`, which must raise a LaunchError naming that kernel,
    and check that the GPU context cannot be used any more. In a process of its own: an
    illegal address ends the context for good (on the host stand-in for the driver too, which fails such a
    launch the same way). Returns what the script printed."""
    script = "import host_driver\n" if ON_HOST_DRIVER else ""
    script += textwrap.dedent("""
        import numpy as np
        import kernelkit as kk
        from backends.cuda.array import CUDAArray

        @kk.kernel
        def write_through_a_wild_pointer(y):
            i = kk.index(kk.Global)
            y[i] = 1.0

        gpu = kk.make_backend("cuda")
        good = kk.zeros(gpu, np.float32, 256)
        wild = CUDAArray(gpu, 64, (1 << 20,), np.float32)
        {before}
        write_through_a_wild_pointer(gpu, 256)(wild, ndrange=1 << 20)
        {wait}
        try:
            {failing}
        except kk.LaunchError as error:
            print("ERROR:", error)
        try:
            kk.zeros(gpu, np.float32, 4)
        except kk.BackendError as error:
            print("AFTER:", error)
    """).format(wait=wait, failing=failing, before=before)
    path = tmp_path / "wild_pointer.py"   # a file: kernels are read from their source
    path.write_text(script)
    root = Path(__file__).parents[3]
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(root), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                            env=environment, timeout=120)
    assert result.returncode == 0, result.stderr
    printed = result.stdout
    assert "ERROR: a launch of kernel 'write_through_a_wild_pointer'" in printed
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in printed
    assert "AFTER:" in printed and "new process" in printed
    return printed


def test_a_failed_launch_is_reported_on_synchronize_with_the_kernel_name(tmp_path):
    assert "(reported by" in run_wild_pointer_script(tmp_path, "kk.synchronize(gpu)")


def test_a_failed_launch_found_by_the_next_launch_names_the_kernel_that_failed(tmp_path):
    """The driver may report a kernel's failure at the next launch rather than at a
    synchronize: the error names the kernel that failed, and the context is lost."""
    printed = run_wild_pointer_script(
        tmp_path, "write_through_a_wild_pointer(gpu, 256)(good, ndrange=256)",
        wait="from cuda.bindings import driver as cu\n"
             "while cu.cuStreamQuery(gpu._stream_handle)[0] == "
             "cu.CUresult.CUDA_ERROR_NOT_READY: pass")
    assert "(reported by launching kernel 'write_through_a_wild_pointer')" in printed


def test_a_failed_launch_found_by_a_fast_launch_names_the_kernel_that_failed(tmp_path):
    """As above, where the next launch takes the fast path (the same launcher, arguments
    and ndrange as a launch before)."""
    printed = run_wild_pointer_script(
        tmp_path, "again(good, ndrange=256)",
        before=textwrap.dedent("""
            general = gpu.launch
            def counted(*arguments):
                print("GENERAL LAUNCH")
                general(*arguments)
            gpu.launch = counted
            again = write_through_a_wild_pointer(gpu, 256)
            again(good, ndrange=256)
            kk.synchronize(gpu)"""),
        wait="from cuda.bindings import driver as cu\n"
             "while cu.cuStreamQuery(gpu._stream_handle)[0] == "
             "cu.CUresult.CUDA_ERROR_NOT_READY: pass")
    assert "(reported by launching kernel 'write_through_a_wild_pointer')" in printed
    # the first launch of `again` and the wild one (a new ndrange) only
    assert printed.count("GENERAL LAUNCH") == 2


def test_a_backend_for_a_gpu_that_does_not_exist_says_how_many_there_are():
    with pytest.raises(kk.BackendError, match="there is no GPU 99"):
        CUDABackend(device=99)


# --- other libraries' arrays ---------------------------------------------------------


def test_our_arrays_export_the_cuda_array_interface_and_dlpack(gpu):
    array = kk.to_backend(gpu, np.arange(12, dtype=np.float32).reshape(3, 4))
    interface = array.__cuda_array_interface__
    assert interface["data"][0] == array.pointer and interface["version"] == 3
    assert array.__dlpack_device__() == (2, gpu.device)
    capsule = array.__dlpack__(stream=-1, max_version=(1, 0))
    assert "dltensor_versioned" in repr(capsule)


def test_cupy_arrays_go_in_and_out_without_copies(gpu):
    cupy = pytest.importorskip("cupy")
    x = cupy.arange(1000, dtype=cupy.float32)
    y = cupy.ones(1000, dtype=cupy.float32)
    saxpy(gpu, 128)(y, 2.0, x, ndrange=1000)          # CuPy arrays as arguments
    kk.synchronize(gpu)
    np.testing.assert_array_equal(cupy.asnumpy(y), 2 * np.arange(1000) + 1)
    ours = kk.to_backend(gpu, np.arange(10, dtype=np.int64))
    seen = cupy.asarray(ours)                          # ours into CuPy (CAI)
    assert seen.data.ptr == ours.pointer
    seen += 1
    np.testing.assert_array_equal(kk.to_numpy(ours), np.arange(10) + 1)
    through_dlpack = cupy.from_dlpack(ours)
    assert through_dlpack.data.ptr == ours.pointer
    view = kk.to_backend(gpu, x[::2])                  # CuPy into ours, no copy
    assert view.pointer == x.data.ptr and view.strides == (8,)
    assert kk.get_backend(x) is gpu
    np.testing.assert_array_equal(kk.to_numpy(x[::100]), np.arange(0, 1000, 100))


def test_pytorch_tensors_go_in_and_out_without_copies(gpu):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA here")
    x = torch.arange(1000, dtype=torch.float32, device="cuda")
    y = torch.ones(1000, dtype=torch.float32, device="cuda")
    saxpy(gpu, 128)(y, 2.0, x, ndrange=1000)
    kk.synchronize(gpu)
    np.testing.assert_array_equal(y.cpu().numpy(), 2 * np.arange(1000) + 1)
    ours = kk.to_backend(gpu, np.arange(10, dtype=np.float64))
    seen = torch.from_dlpack(ours)
    assert seen.data_ptr() == ours.pointer
    seen.mul_(3)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(kk.to_numpy(ours), np.arange(10) * 3)
    transposed = torch.arange(12, dtype=torch.int32, device="cuda").reshape(3, 4).T
    np.testing.assert_array_equal(kk.to_numpy(transposed), np.arange(12).reshape(3, 4).T)


def test_a_tensor_that_requires_grad_is_refused_with_the_producers_reason(gpu):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA here")
    x = torch.ones(8, device="cuda", requires_grad=True)
    # PyTorch's reason (either protocol's) says to detach the tensor.
    with pytest.raises(kk.LaunchError, match=r"argument 'x' \(Tensor\) cannot be seen as a "
                                             r"GPU array: .*require.*detach\(\)"):
        saxpy(gpu, 8)(kk.zeros(gpu, np.float32, 8), 2.0, x, ndrange=8)

