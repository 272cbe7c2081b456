"""Launches through a launcher's fast path (`CUDABackend.fast_launcher`): a one-axis launch
whose arguments are of the kinds the kernel was last launched with, over an ndrange it
was launched over before, skips the general `launch`. What it must keep: the results,
the other kinds of arguments (which take the general launch), printing, bounds checks,
and the errors of the general launch. A failed launch the fast path finds is tested with
the other failed launches in test_cuda_runtime.py."""
from types import SimpleNamespace

import numpy as np
import pytest

import kernelkit as kk
from launch_paths import count_general_launches
import backends.cuda.runtime as runtime
from backends.cuda import CUDABackend

REASON = CUDABackend.unavailable_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"no GPU to run on: {REASON}")


@pytest.fixture(scope="module")
def gpu():
    return kk.make_backend("cuda")


@pytest.fixture
def general_launches(gpu, monkeypatch):
    return count_general_launches(gpu, monkeypatch)


@kk.kernel
def add_one(y):
    i = kk.index(kk.Global)
    y[i] = y[i] + 1


@kk.kernel
def scaled_add(y, a, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = a * x[i] + y[i]


@kk.kernel
def greet_from_item_two(x: kk.Const):
    i = kk.index(kk.Global)
    if i == 2:
        kk.print("hello from", i)


@kk.kernel
def fill(y, a):
    i = kk.index(kk.Global)
    y[i] = a


@kk.kernel
def write_one_at(y, offset):
    i = kk.index(kk.Global)
    y[i + offset] = 1.0


class Interface:
    """Another library's array, as the CUDA array interface shows it."""

    def __init__(self, array):
        self.array = array
        self.__cuda_array_interface__ = array.__cuda_array_interface__


def test_repeated_launches_skip_the_general_launch_and_all_run(gpu, general_launches):
    y = kk.zeros(gpu, np.float32, 1000)
    launch = add_one(gpu, 128)
    for _ in range(10):
        launch(y, ndrange=1000)
    for _ in range(10):             # a new launcher each time, as a loop body writes it
        add_one(gpu, 128)(y, ndrange=1000)
    assert general_launches == [(1000,)]
    np.testing.assert_array_equal(kk.to_numpy(y), np.full(1000, 20, np.float32))


def test_other_arguments_and_ndranges_take_the_general_launch(gpu, general_launches):
    launch = scaled_add(gpu, 64)
    x = kk.to_backend(gpu, np.arange(100, dtype=np.float32))
    y = kk.zeros(gpu, np.float32, 100)
    launch(y, 2.0, x, ndrange=100)
    launch(y, 2.0, x, ndrange=100)                          # fast
    assert len(general_launches) == 1
    y64 = kk.zeros(gpu, np.float64, 100)
    launch(y64, 2.0, kk.to_backend(gpu, np.arange(100.0)), ndrange=100)   # another dtype
    launch(y, 3, x, ndrange=100)                            # an int for the float
    launch(y, 2.0, x, ndrange=50)                           # a new ndrange: general once,
    launch(y, 2.0, x, ndrange=50)                           # then fast
    other = CUDABackend(device=gpu.device)
    z = kk.zeros(other, np.float32, 100)
    launch(z, 2.0, x, ndrange=100)                          # another backend's array
    launch(Interface(y), 2.0, x, ndrange=100)               # another library's array
    launch(y, 2.0, x, ndrange=0)                            # nothing to run
    assert general_launches == [(100,), (100,), (100,), (50,), (100,), (100,), (0,)]
    launch(y, 2.0, x, ndrange=100)                          # fast again
    assert len(general_launches) == 7
    expected = np.arange(100) * np.where(np.arange(100) < 50, 15, 11)
    np.testing.assert_array_equal(kk.to_numpy(y), expected)
    np.testing.assert_array_equal(kk.to_numpy(y64), 2 * np.arange(100))
    np.testing.assert_array_equal(kk.to_numpy(z), 2 * np.arange(100))


def test_a_fast_launch_packs_again_whatever_changed_since_the_last_one(gpu, general_launches):
    launch = scaled_add(gpu, 32)
    x = kk.to_backend(gpu, np.arange(96, dtype=np.float32))
    y, other = kk.zeros(gpu, np.float32, 96), kk.zeros(gpu, np.float32, 96)
    launch(y, 1.0, x, ndrange=96)
    launch(y, 1.0, x, ndrange=64)
    for a in (1.0, 2.0, 3.0):        # a new scale each time
        launch(y, a, x, ndrange=96)
    launch(other, 3.0, x, ndrange=96)  # another array
    launch(y, 3.0, x, ndrange=64)      # another ndrange, launched over before
    launch(y, 3.0, x, ndrange=96)
    assert general_launches == [(96,), (64,)]
    expected = np.arange(96) * np.where(np.arange(96) < 64, 1 + 1 + 6 + 3 + 3, 1 + 6 + 3)
    np.testing.assert_array_equal(kk.to_numpy(y), expected)
    np.testing.assert_array_equal(kk.to_numpy(other), 3 * np.arange(96))


def test_a_fast_launch_tells_minus_zero_from_zero(gpu, general_launches):
    y = kk.zeros(gpu, np.float32, 16)
    launch = fill(gpu, 16)
    signs = []
    for a in (0.0, -0.0, -0.0, 0.0):   # equal, but not the same bits
        launch(y, a, ndrange=16)
        signs.append(bool(np.signbit(kk.to_numpy(y)).all()))
    assert signs == [False, True, True, False]
    assert general_launches == [(16,)]


def test_every_fast_launch_packs_the_scalars_it_is_given(gpu, general_launches, monkeypatch):
    # Users pass a new time step or coefficient each launch: nothing is kept by identity.
    packs = []
    prepare = gpu.prepare

    def counting_prepare(compiled, argtypes, ndim):
        prepared = prepare(compiled, argtypes, ndim)
        finish = prepared.finish
        prepared.finish = lambda *fields: packs.append(fields) or finish(*fields)
        return prepared

    monkeypatch.setattr(gpu, "prepare", counting_prepare)
    y = kk.zeros(gpu, np.float64, 40)
    launch = kk.kernel(scaled_add.function)(gpu, 8)   # a kernel prepared here
    x = kk.to_backend(gpu, np.ones(40))
    launch(y, 0.5, x, ndrange=40)
    for a in (0.5, 0.25, 0.25, 2.0, -1.0):
        launch(y, a, x, ndrange=40)   # fast: each packs its own scalar
    assert len(general_launches) == 1 and len(packs) == 5
    np.testing.assert_array_equal(kk.to_numpy(y), np.full(40, 2.5))


def test_a_first_launch_with_another_librarys_array_leaves_the_fast_path_to_later_ones(
        gpu, general_launches):
    y = kk.zeros(gpu, np.float32, 64)
    add_one(gpu, 32)(Interface(y), ndrange=64)   # the same argument key as y's
    for _ in range(5):
        add_one(gpu, 32)(y, ndrange=64)
    assert general_launches == [(64,)]
    np.testing.assert_array_equal(kk.to_numpy(y), np.full(64, 6, np.float32))


def test_after_fast_launches_bad_launches_raise_the_general_errors(gpu, general_launches):
    launch = scaled_add(gpu, 64)
    x = kk.to_backend(gpu, np.arange(100, dtype=np.float32))
    y = kk.zeros(gpu, np.float32, 100)
    launch(y, 2.0, x, ndrange=99)       # an ndrange no other test launches scaled_add over
    launch(y, 2.0, x, ndrange=99)
    assert general_launches == [(99,)]
    with pytest.raises(kk.LaunchError, match=r"kernel 'scaled_add' takes 3 arguments"):
        launch(y, 2.0, ndrange=99)
    with pytest.raises(kk.LaunchError, match=r"kernel 'scaled_add': ndrange must be positive"):
        launch(y, 2.0, x, ndrange=-99)
    with pytest.raises(kk.LaunchError, match=r"argument 'x' is a NumPy array"):
        launch(y, 2.0, np.arange(100, dtype=np.float32), ndrange=99)
    np.testing.assert_array_equal(kk.to_numpy(y), np.where(np.arange(100) < 99,
                                                           4 * np.arange(100), 0))


def test_a_kernel_that_prints_prints_for_every_fast_launch(gpu, general_launches, capfd,
                                                          monkeypatch):
    x = kk.zeros(gpu, np.float32, 4)
    launch = greet_from_item_two(gpu, 4)
    launch(x, ndrange=4)
    kk.synchronize(gpu)
    capfd.readouterr()
    flushes = []
    flush = runtime._libc.fflush
    monkeypatch.setattr(runtime, "_libc", SimpleNamespace(
        fflush=lambda stream: flushes.append(stream) or flush(stream)))
    for _ in range(3):
        launch(x, ndrange=4)
    kk.synchronize(gpu)      # flushes C's stdout, where the device's printf writes
    assert len(general_launches) == 1 and flushes == [None]
    assert capfd.readouterr().out == "hello from 2\n" * 3


def test_an_out_of_bounds_write_in_a_fast_launch_is_reported_on_synchronize(gpu, monkeypatch):
    debug = CUDABackend(device=gpu.device, debug=True)
    general_launches = count_general_launches(debug, monkeypatch)
    y = kk.zeros(debug, np.float32, 8)
    launch = write_one_at(debug, 8)
    launch(y, 0, ndrange=8)
    kk.synchronize(debug)
    launch(y, 1, ndrange=8)        # the same kinds of arguments: the fast path
    with pytest.raises(IndexError, match=r"(?s)write_one_at.*index 8 .*shape \(8,\)"):
        kk.synchronize(debug)
    assert general_launches == [(8,)]
    np.testing.assert_array_equal(kk.to_numpy(y), np.ones(8, np.float32))
