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


def copy_launches(monkeypatch) -> list:
    """The dtypes of the copy kernel's launches from now on (`CPU._copy_in_parallel`)."""
    from kernelkit.lang.kernel import Launcher
    launched = []
    original = Launcher.launch

    def counting(self, args, ndrange, workgroupsize):
        if self.kernel.name == "copy_words":
            launched.append(args[0].dtype)
        return original(self, args, ndrange, workgroupsize)
    monkeypatch.setattr(Launcher, "launch", counting)
    return launched


def test_a_large_copy_is_shared_by_the_threads_word_for_word(monkeypatch):
    launched = copy_launches(monkeypatch)
    rng = np.random.default_rng(3)
    for dtype, n in ((np.float32, BIG), (np.float64, BIG + 1), (np.float16, BIG + 1),
                     (np.int8, 3 * BIG + 1), (np.complex64, BIG // 2)):
        source = rng.integers(0, 255, n * np.dtype(dtype).itemsize,
                              dtype=np.uint8).view(dtype).reshape(-1)
        if np.dtype(dtype).kind == "f":   # nan payloads and -0.0 come across as they are
            source[:3] = np.array([np.nan, -0.0, np.inf], dtype)
        destination = np.zeros_like(source)
        kk.copyto(destination, source)
        assert destination.tobytes() == source.tobytes()   # once it returns
    assert launched == [np.dtype("u8"), np.dtype("u8"), np.dtype("u2"), np.dtype("u1"),
                        np.dtype("u8")]
    read_only = np.arange(BIG, dtype=np.float64).reshape(1000, -1)
    read_only.flags.writeable = False
    destination = np.empty_like(read_only)
    kk.copyto(destination, read_only)
    np.testing.assert_array_equal(destination, read_only)
    assert len(launched) == 6


def test_copies_numpy_does_better_are_left_to_it(monkeypatch):
    launched = copy_launches(monkeypatch)
    a = np.arange(BIG, dtype=np.float64)
    kk.copyto(a[1:], a[:-1])               # overlapping: NumPy copies as if through a buffer
    np.testing.assert_array_equal(a[1:], np.arange(BIG - 1, dtype=np.float64))
    b = np.zeros((2, BIG), np.float32)
    kk.copyto(b[:, ::2], np.ones((2, BIG // 2), np.float32))   # strided
    kk.copyto(b, np.arange(BIG, dtype=np.float64))           # converted and broadcast
    small = np.zeros(1000)
    kk.copyto(small, np.ones(1000))
    assert b[0, -1] == BIG - 1 and small.sum() == 1000
    kk.copyto(kk.CPU(threads=1).zeros(np.float64, BIG), a)   # (the shared backend copies)
    assert launched == [np.dtype("u8")]
