"""CUDAArray's metadata without a GPU: views (slices, integers, `...`, None, transpose,
reshape) give the pointer, shape and strides NumPy gives for the same view of the same
memory; the CUDA array interface and foreign arrays' interfaces are read as the protocol
says; nothing converts to NumPy implicitly."""
import numpy as np
import pytest

from backends.cuda.array import CUDAArray, foreign_key, foreign_kind, view_of_foreign


def host_and_device(shape, dtype=np.float64):
    """A host array, and a CUDAArray describing the same memory (no backend: the
    metadata is all that is checked)."""
    host = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
    return host, CUDAArray(None, host.ctypes.data, host.shape, host.dtype, owner=host)


def address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def assert_same_view(device: CUDAArray, host: np.ndarray):
    assert device.shape == host.shape
    assert device.strides == host.strides
    assert device.dtype == host.dtype
    if host.size:
        assert device.pointer == address(host)
    assert device.is_c_contiguous == host.flags.c_contiguous
    assert device.size == host.size and device.nbytes == host.nbytes and device.ndim == host.ndim


VIEWS = [
    ("1d", (41,), lambda a: a[::2]),
    ("1d", (41,), lambda a: a[3:30:3]),
    ("1d", (41,), lambda a: a[::-1]),
    ("1d", (41,), lambda a: a[-5:]),
    ("1d", (41,), lambda a: a[40:0:-7]),
    ("1d", (41,), lambda a: a[50:60]),
    ("1d", (41,), lambda a: a[7, ...]),
    ("2d", (5, 9), lambda a: a.T),
    ("2d", (5, 9), lambda a: a[:, 1:]),
    ("2d", (5, 9), lambda a: a[1:4, ::2]),
    ("2d", (5, 9), lambda a: a[::-1, :]),
    ("2d", (5, 9), lambda a: a[2]),
    ("2d", (5, 9), lambda a: a[-1, ::-3]),
    ("2d", (5, 9), lambda a: a[..., 3]),
    ("2d", (5, 9), lambda a: a[None, 1:3, None]),
    ("3d", (4, 6, 5), lambda a: a[:, ::2, 1:]),
    ("3d", (4, 6, 5), lambda a: a.transpose(1, 0, 2)),
    ("3d", (4, 6, 5), lambda a: a.transpose((2, 0, 1))[1:]),
    ("3d", (4, 6, 5), lambda a: a[1, ..., ::2]),
    ("3d", (4, 6, 5), lambda a: a.reshape(24, 5)),
    ("3d", (4, 6, 5), lambda a: a.reshape(-1)),
    ("3d", (4, 6, 5), lambda a: a.reshape((2, -1, 3))[1]),
    ("3d", (4, 6, 5), lambda a: a[1:3].reshape(60)),
]


@pytest.mark.parametrize("shape,view", [(s, v) for _, s, v in VIEWS],
                         ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(VIEWS)])
def test_a_view_has_the_pointer_shape_and_strides_numpy_gives(shape, view):
    host, device = host_and_device(shape)
    assert_same_view(view(device), view(host))


def test_an_integer_for_every_axis_is_a_zero_dimensional_view_not_a_copy():
    host, device = host_and_device((5, 9))
    element = device[2, -1]
    assert element.shape == () and element.pointer == address(host[2, -1:])


def test_a_view_keeps_the_owner_alive_and_len_is_the_first_extent():
    host, device = host_and_device((6, 4))
    view = device[1:][::2].T
    assert view.owner is host
    assert len(device) == 6 and len(view) == 4


@pytest.mark.parametrize("index,error", [
    ((0, 0, 0), "too many indices"),
    (7, "out of bounds for axis 0 with size 6"),
    ((slice(None), -5), "out of bounds for axis 1 with size 4"),
    (([1, 2],), "integers, slices"),
    ((Ellipsis, Ellipsis), "single ellipsis"),
])
def test_indexing_errors_say_what_is_wrong(index, error):
    _, device = host_and_device((6, 4))
    with pytest.raises(IndexError, match=error):
        device[index]


def test_reshape_needs_the_same_size_and_a_contiguous_array():
    _, device = host_and_device((6, 4))
    with pytest.raises(ValueError, match="cannot reshape an array of size 24 into shape"):
        device.reshape(5, 5)
    with pytest.raises(ValueError, match="C-contiguous"):
        device.T.reshape(24)


def test_nothing_converts_to_numpy_implicitly():
    _, device = host_and_device((3,))
    with pytest.raises(TypeError, match="kk.to_numpy"):
        np.asarray(device)
    with pytest.raises(TypeError, match="kk.to_numpy"):
        bool(device)
    assert "CUDAArray(shape=(3,), dtype=float64" in repr(device)


def test_the_cuda_array_interface_is_version_3_with_strides_only_when_not_c_contiguous():
    host, device = host_and_device((5, 9), np.float32)
    interface = device.__cuda_array_interface__
    assert interface["version"] == 3
    assert interface["shape"] == (5, 9) and interface["typestr"] == "<f4"
    assert interface["data"] == (address(host), False)
    assert interface["strides"] is None
    assert device.T.__cuda_array_interface__["strides"] == host.T.strides


def test_a_read_only_view_says_so_in_its_interface_and_its_views_stay_read_only():
    host, _ = host_and_device((4,))
    device = CUDAArray(None, host.ctypes.data, (4,), host.dtype, owner=host, readonly=True)
    assert device.__cuda_array_interface__["data"] == (address(host), True)
    assert device[1:].readonly and device[1:].key[-1] == "read-only"


def test_a_view_a_kernel_cannot_take_has_a_key_of_its_own():
    host = np.zeros(16, np.uint8)
    odd = CUDAArray(None, host.ctypes.data, (5,), np.float32, strides=(3,), owner=host)
    assert odd.fields is None and "unaligned strides" in odd.key


class ForeignCAI:
    """What CuPy or Numba show: an object with a CUDA array interface."""

    def __init__(self, host, strides=True, stream=None, mask=None):
        self.host = host
        self.__cuda_array_interface__ = {
            "shape": host.shape, "typestr": host.dtype.str, "data": (address(host), False),
            "strides": host.strides if strides else None, "version": 3, "stream": stream,
            "mask": mask}


def test_an_array_interface_is_seen_as_a_view_of_the_same_memory():
    host = np.arange(45, dtype=np.int16).reshape(5, 9)[:, ::2]
    foreign = ForeignCAI(host)
    assert foreign_kind(foreign) == "cai"
    view = view_of_foreign(None, foreign, "cai", None, "x")
    assert_same_view(view, host)
    assert view.owner is foreign
    assert foreign_key(foreign, "cai") == view.key == ("cuda", np.dtype(np.int16), 2, False)
    contiguous = ForeignCAI(np.zeros((3, 4), np.float32), strides=False)
    assert foreign_key(contiguous, "cai") == ("cuda", np.dtype(np.float32), 2, True)


def test_a_masked_array_interface_is_refused():
    foreign = ForeignCAI(np.zeros(3), mask=object())
    with pytest.raises(Exception, match="masked"):
        view_of_foreign(None, foreign, "cai", None, "x")


def test_host_arrays_are_not_taken_for_gpu_arrays():
    assert foreign_kind(np.zeros(3)) is None
    assert foreign_kind(memoryview(b"abc")) is None
    assert foreign_kind(3.0) is None


class ForeignDLPack:
    """A producer speaking DLPack from a device the CUDA backend can read (here the memory
    is a host array described as CUDA-host memory, so that no GPU is needed)."""

    def __init__(self, host, device_type=3):
        self.host = host
        self.device_type = device_type
        self.streams = []

    def __dlpack_device__(self):
        return (self.device_type, 0)

    def __dlpack__(self, stream=None, max_version=None):
        from backends.cuda import dlpack
        self.streams.append(stream)
        return dlpack.export_capsule(self, address(self.host), self.host.shape,
                                     tuple(s // self.host.itemsize for s in self.host.strides),
                                     self.host.dtype, (self.device_type, 0),
                                     versioned=max_version is not None)


def test_a_dlpack_producer_on_a_gpu_is_seen_as_a_view_of_the_same_memory():
    host = np.arange(24, dtype=np.float32).reshape(4, 6).T
    foreign = ForeignDLPack(host)
    assert foreign_kind(foreign) == "dlpack"
    view = view_of_foreign(None, foreign, "dlpack", 1234, "x")
    assert_same_view(view, host)
    assert foreign.streams == [1234]
    assert foreign_kind(ForeignDLPack(host, device_type=1)) is None  # host memory: not ours
