"""Other libraries' arrays in host memory on the CPU backend: anything whose DLPack device
is the CPU (a PyTorch CPU tensor) or that has NumPy's array interface is a kernel
argument, belongs to the CPU backend, and comes out of kk.to_numpy, all without a copy:
what a kernel writes is in the library's array. "Device array" is said of device memory
only, with a hint that works. The libraries are stood in for by small classes over NumPy
arrays that speak only one of the protocols."""
import numpy as np
import pytest

import kernelkit as kk


class DLPackOnly:
    """An array that speaks only DLPack, over a NumPy array's memory."""

    def __init__(self, array, device=(1, 0), refusal=None):
        self.array, self.device, self.refusal = array, device, refusal

    def __dlpack__(self, **options):
        if self.refusal is not None:
            raise self.refusal
        return self.array.__dlpack__(**options)

    def __dlpack_device__(self):
        return self.device


class LegacyDLPackOnly(DLPackOnly):
    """A producer older than DLPack 1.0, whose __dlpack__ takes only a stream."""

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__(stream=stream)


class ArrayInterfaceOnly:
    """An array that speaks only NumPy's array interface (and keeps its memory alive)."""

    def __init__(self, array):
        self.array = array

    @property
    def __array_interface__(self):
        return self.array.__array_interface__


@kk.kernel
def saxpy(y, a, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = a * x[i] + y[i]


@pytest.fixture
def cpu():
    return kk.make_backend("cpu")


def test_an_array_of_a_producer_older_than_dlpack_1_is_read_but_never_written(cpu):
    # Such a producer cannot say whether its memory may be written (a JAX array's may
    # not): it is taken as read-only, as NumPy takes it.
    y, x = np.ones(40, np.float32), np.arange(40, dtype=np.float32)
    saxpy(cpu, 16)(y, 2.0, LegacyDLPackOnly(x), ndrange=40)
    kk.synchronize(cpu)
    np.testing.assert_array_equal(y, 2 * np.arange(40) + 1)
    with pytest.raises(kk.LaunchError, match="read-only"):
        saxpy(cpu, 16)(LegacyDLPackOnly(y), 2.0, x, ndrange=40)
    assert not kk.to_numpy(LegacyDLPackOnly(y)).flags.writeable


@pytest.mark.parametrize("wrap", [DLPackOnly, ArrayInterfaceOnly])
def test_a_host_array_of_another_library_is_a_kernel_argument_the_kernel_writes_in_place(
        cpu, wrap):
    y, x = np.ones(40, np.float32), np.arange(40, dtype=np.float32)
    strided = np.zeros(80, np.float32)[::2]     # read through its strides
    saxpy(cpu, 16)(wrap(y), 2.0, wrap(x), ndrange=40)
    saxpy(cpu, 16)(wrap(strided), 3.0, wrap(x), ndrange=40)
    kk.synchronize(cpu)
    np.testing.assert_array_equal(y, 2 * np.arange(40) + 1)
    np.testing.assert_array_equal(strided, 3 * np.arange(40))


def test_host_arrays_of_one_library_with_other_dtypes_get_kernels_of_their_own(cpu):
    results = []
    for dtype in (np.float32, np.float64, np.float32):
        y = np.zeros(8, dtype)
        saxpy(cpu, 8)(DLPackOnly(y), 1.5, DLPackOnly(np.arange(8, dtype=dtype)), ndrange=8)
        results.append(y)
    kk.synchronize(cpu)
    for y in results:
        np.testing.assert_array_equal(y, 1.5 * np.arange(8))


@pytest.mark.parametrize("wrap", [DLPackOnly, ArrayInterfaceOnly])
def test_to_numpy_to_backend_get_backend_copyto_and_zeros_like_take_host_arrays_in_place(wrap):
    memory = np.arange(6, dtype=np.int32).reshape(2, 3)
    array = wrap(memory)
    assert kk.get_backend(array) is kk.make_backend("cpu")
    assert np.shares_memory(kk.to_backend(kk.make_backend("cpu"), array), memory)
    host = kk.to_numpy(array)
    host[1, 2] = 50
    assert memory[1, 2] == 50
    zeros = kk.zeros_like(array)
    assert (type(zeros), zeros.dtype, zeros.shape) == (np.ndarray, np.int32, (2, 3))
    kk.copyto(array, np.full((2, 3), 7))
    np.testing.assert_array_equal(memory, np.full((2, 3), 7))
    target = np.zeros((2, 3), np.int32)
    kk.copyto(target, array)
    np.testing.assert_array_equal(target, memory)


@pytest.mark.parametrize("wrap", [DLPackOnly, ArrayInterfaceOnly])
def test_a_host_array_its_library_calls_read_only_is_taken_only_for_a_const_parameter(
        cpu, wrap):
    memory = np.arange(8, dtype=np.float32)
    memory.flags.writeable = False
    y = np.zeros(8, np.float32)
    saxpy(cpu, 8)(y, 1.0, wrap(memory), ndrange=8)
    kk.synchronize(cpu)
    np.testing.assert_array_equal(y, memory)
    with pytest.raises(kk.LaunchError, match="argument 'y' is read-only"):
        saxpy(cpu, 8)(wrap(memory), 1.0, y, ndrange=8)


def test_a_host_array_whose_library_refuses_to_share_it_is_a_launch_error_saying_why(cpu):
    refused = DLPackOnly(np.zeros(8, np.float32),
                         refusal=RuntimeError("cannot export a tensor that requires grad"))
    with pytest.raises(kk.LaunchError, match=r"argument 'y' is an array in host memory that "
                                             r"its library refuses to share: RuntimeError: "
                                             r"cannot export a tensor that requires grad"):
        saxpy(cpu, 8)(refused, 1.0, np.zeros(8, np.float32), ndrange=8)


def test_an_array_in_device_memory_is_called_a_device_array_with_a_hint_that_works(cpu):
    # DLPack device type 10 (ROCm): memory that no installed backend reads
    gpu = DLPackOnly(np.zeros(8, np.float32), device=(10, 0))
    with pytest.raises(kk.LaunchError) as info:
        saxpy(cpu, 8)(gpu, 1.0, np.zeros(8, np.float32), ndrange=8)
    message = str(info.value)
    assert "argument 'y' is a device array (DLPack device (10, 0))" in message
    assert "kk.to_numpy" not in message      # no installed backend could copy it
    assert "with the library that made it (PyTorch: y.cpu(), CuPy: y.get())" in message
    with pytest.raises(kk.BackendError, match=r"type DLPackOnly: it is a device array "
                                              r"\(DLPack device \(10, 0\)\)"):
        kk.to_numpy(gpu)


def test_a_device_array_a_backend_owns_is_named_with_a_host_copy_and_its_backend(cpu,
                                                                                  monkeypatch):
    import kernelkit.backend
    gpu = DLPackOnly(np.zeros(8, np.float32), device=(2, 0))
    owner = kernelkit.backend.get_backend
    monkeypatch.setattr(kernelkit.backend, "get_backend",
                        lambda array: "a GPU backend" if array is gpu else owner(array))
    with pytest.raises(kk.LaunchError) as written:
        saxpy(cpu, 8)(gpu, 1.0, np.zeros(8, np.float32), ndrange=8)
    with pytest.raises(kk.LaunchError) as read:
        saxpy(cpu, 8)(np.zeros(8, np.float32), 1.0, gpu, ndrange=8)
    assert ("argument 'y' is a device array (DLPack device (2, 0)); the CPU backend runs on "
            "host memory: pass a host copy, host = kk.to_numpy(y), then copy the kernel's "
            "results back with kk.copyto(y, host); or launch the kernel on the backend that "
            "owns it, saxpy(kk.get_backend(y), ...)") in str(written.value)
    assert "host = kk.to_numpy(x); or launch" in str(read.value)    # x is only read


def test_a_pytorch_cpu_tensor_is_a_kernel_argument_and_comes_out_of_to_numpy_in_place(cpu):
    torch = pytest.importorskip("torch")
    y, x = torch.ones(16, dtype=torch.float32), torch.arange(16, dtype=torch.float32)
    saxpy(cpu, 8)(y, 2.0, x, ndrange=16)
    kk.synchronize(cpu)
    assert y.tolist() == [2 * i + 1.0 for i in range(16)]
    kk.to_numpy(y)[0] = -1
    assert kk.get_backend(y) is cpu and y[0].item() == -1


class FreshCopyEachTime:
    """An array interface that hands out memory of its own making each time it is asked
    (as PIL's images do): only the view a launch made keeps that memory alive."""

    def __init__(self, n):
        self.n = n

    @property
    def __array_interface__(self):
        return {"shape": (self.n,), "typestr": "<f8", "version": 3,
                "data": np.full(self.n, 7.0).tobytes()}


@kk.kernel
def mean_of_repeated_reads(y, x: kk.Const):
    i = kk.index(kk.Global)
    total = 0.0
    for _ in range(50):
        total += x[i]
    y[i] = total / 50


def test_a_queued_launch_keeps_the_memory_an_array_interface_handed_out(cpu):
    n = 1 << 18
    results = []
    for _ in range(3):
        y = np.zeros(n)
        mean_of_repeated_reads(kk.CPU(threads=2), 1024)(y, FreshCopyEachTime(n), ndrange=n)
        scribbled = [np.full(n, -1.0).tobytes() for _ in range(4)]  # reuses freed memory
        results.append(y)
        del scribbled
    kk.synchronize(cpu)
    for y in results:
        np.testing.assert_array_equal(y, 7.0)
