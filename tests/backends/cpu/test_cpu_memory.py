"""Host memory on the CPU backend: NumPy arrays belong to it, move to it without a copy,
and kk.copyto copies into them after the launches that write them."""
import numpy as np

import kernelkit as kk

BIG = 2_000_000


def test_get_backend_of_a_numpy_array_is_the_shared_cpu_backend():
    backend = kk.get_backend(np.zeros(3))
    assert isinstance(backend, kk.CPU)
    assert backend is kk.get_backend(np.ones((2, 2), np.int8))
    assert backend is kk.make_backend("cpu")


def test_to_backend_of_a_numpy_array_is_the_same_object():
    cpu = kk.CPU(threads=1)
    array = np.arange(5.0)
    assert kk.to_backend(cpu, array) is array
    assert kk.to_numpy(array) is array


def test_zeros_ones_and_allocate_give_numpy_arrays_of_the_dtype_and_shape():
    cpu = kk.CPU(threads=1)
    zeros = kk.zeros(cpu, np.float32, (2, 3))
    ones = kk.ones(cpu, np.int16, 4)
    empty = kk.allocate(cpu, np.uint8, (5,))
    assert (zeros.dtype, zeros.shape, zeros.sum()) == (np.float32, (2, 3), 0)
    assert (ones.dtype, ones.shape, ones.sum()) == (np.int16, (4,), 4)
    assert (empty.dtype, empty.shape) == (np.uint8, (5,))


def test_copyto_copies_between_numpy_arrays_and_converts_the_dtype():
    source = np.arange(6, dtype=np.int32).reshape(2, 3)
    destination = np.zeros((2, 3), np.float64)
    kk.copyto(destination, source)
    np.testing.assert_array_equal(destination, source)
    assert destination.dtype == np.float64


@kk.kernel
def fill_with_index(a):
    i = kk.index(kk.Global)
    a[i] = i + 1


def test_copyto_copies_what_a_launch_on_the_shared_backend_wrote():
    backend = kk.make_backend("cpu")
    source = np.zeros(BIG, np.int64)
    fill_with_index(backend, 1024)(source, ndrange=BIG)
    destination = np.empty_like(source)
    kk.copyto(destination, source)
    np.testing.assert_array_equal(destination, np.arange(1, BIG + 1))


def test_copyto_copies_what_a_launch_on_a_new_cpu_backend_wrote():
    backend = kk.CPU()
    source = np.zeros(BIG, np.int64)
    fill_with_index(backend, 1024)(source, ndrange=BIG)
    destination = np.empty_like(source)
    kk.copyto(destination, source)
    kk.synchronize(backend)
    np.testing.assert_array_equal(destination, np.arange(1, BIG + 1))
