"""DLPack both ways, checked against NumPy (which speaks DLPack for host memory): the
structs, the capsule names of DLPack 0.x and 1.x, strides, dtypes, read-only flags, and
who keeps the memory alive until when."""
import ctypes
import gc
import weakref

import numpy as np
import pytest

from backends.cuda import dlpack


class Owner:
    """Stands in for the array whose memory is exported."""

    def __init__(self, host):
        self.host = host


class Exporter:
    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        return self.capsule

    def __dlpack_device__(self):
        return (dlpack.CPU, 0)


def export(host: np.ndarray, versioned: bool, read_only=False):
    owner = Owner(host)
    capsule = dlpack.export_capsule(owner, host.ctypes.data, host.shape,
                                    tuple(s // host.itemsize for s in host.strides),
                                    host.dtype, (dlpack.CPU, 0), versioned, read_only)
    return owner, capsule


@pytest.mark.parametrize("versioned", [False, True], ids=["dlpack-0.8", "dlpack-1.0"])
@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint16, np.int32, np.uint64,
                                   np.float16, np.float32, np.float64])
def test_numpy_reads_an_exported_tensor_with_its_strides_and_dtype(versioned, dtype):
    base = (np.arange(60) % 7).astype(dtype).reshape(5, 12)
    host = base[1:, ::3].T
    owner, capsule = export(host, versioned)
    seen = np.from_dlpack(Exporter(capsule))
    assert seen.dtype == host.dtype and seen.shape == host.shape
    assert seen.strides == host.strides
    np.testing.assert_array_equal(seen, host)
    assert seen.__array_interface__["data"][0] == host.ctypes.data


def test_the_exporter_stays_alive_until_the_consumer_lets_go():
    owner, capsule = export(np.arange(8.0), versioned=True)
    alive = weakref.ref(owner)
    seen = np.from_dlpack(Exporter(capsule))
    del owner, capsule
    gc.collect()
    assert alive() is not None
    seen[3] = 42.0  # a DLPack 1.0 tensor that is not read-only is writable
    assert alive().host[3] == 42.0
    del seen
    gc.collect()
    assert alive() is None


@pytest.mark.parametrize("versioned", [False, True], ids=["dlpack-0.8", "dlpack-1.0"])
def test_a_capsule_nobody_consumed_releases_its_tensor(versioned):
    owner, capsule = export(np.arange(3.0), versioned=versioned)
    alive = weakref.ref(owner)
    del owner, capsule
    gc.collect()
    assert alive() is None


def test_a_capsule_dropped_while_an_exception_is_raised_keeps_the_exception():
    """As when a consumer written in C fails after taking the capsule: it sets its error,
    then drops the capsule, whose destructor runs with the error set."""
    from kernelkit.compiler.native import host_functions, python_api
    fail_and_drop = ctypes.PYFUNCTYPE(None, ctypes.py_object, ctypes.c_char_p, ctypes.c_void_p)(
        host_functions("""
            declare void @PyErr_SetString(ptr, ptr)
            declare void @Py_DecRef(ptr)
            define void @fail_and_drop(ptr %type, ptr %message, ptr %object) {
              call void @PyErr_SetString(ptr %type, ptr %message)
              call void @Py_DecRef(ptr %object)
              ret void
            }""", python_api("PyErr_SetString", "Py_DecRef"))["fail_and_drop"])
    owner, capsule = export(np.arange(3.0), versioned=True)
    alive = weakref.ref(owner)
    address = id(capsule)
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(capsule))
    del owner, capsule  # the reference taken above is now the last one
    with pytest.raises(ValueError, match="the consumer failed"):
        fail_and_drop(ValueError, b"the consumer failed", address)
    gc.collect()
    assert alive() is None


def test_a_read_only_export_is_read_only_for_the_consumer():
    _, capsule = export(np.arange(3.0), versioned=True, read_only=True)
    assert not np.from_dlpack(Exporter(capsule)).flags.writeable


@pytest.mark.parametrize("max_version", [None, (1, 0)], ids=["dlpack-0.8", "dlpack-1.0"])
def test_importing_numpy_tensors_gives_their_memory_strides_and_dtype(max_version):
    host = np.arange(40, dtype=np.int16).reshape(4, 10)[:, ::-3]
    capsule = host.__dlpack__() if max_version is None else host.__dlpack__(max_version=max_version)
    tensor = dlpack.import_capsule(capsule)
    assert tensor.pointer == host.__array_interface__["data"][0]
    assert tensor.shape == host.shape
    assert tuple(s * 2 for s in tensor.strides) == host.strides
    assert tensor.dtype == np.int16 and tensor.device_type == dlpack.CPU
    with pytest.raises(BufferError):  # a consumed capsule cannot be consumed again
        dlpack.import_capsule(capsule)


def test_an_imported_tensor_holds_the_producers_memory_until_it_is_collected():
    host = np.arange(5.0)
    producer = weakref.ref(host)
    tensor = dlpack.import_capsule(host.__dlpack__(max_version=(1, 0)))
    del host
    gc.collect()
    assert producer() is not None
    del tensor
    gc.collect()
    assert producer() is None


def test_types_kernels_do_not_have_are_named_not_guessed():
    tensor = dlpack.import_capsule(np.zeros(3, np.complex64).__dlpack__())
    assert tensor.dtype is None and "code 5" in tensor.dtype_text
