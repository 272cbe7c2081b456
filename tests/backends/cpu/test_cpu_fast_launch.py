"""Launches through a launcher's fast path on the CPU (`CPU.fast_launcher`): a one-axis
launch whose arguments are of the kinds the kernel was last launched with (NumPy arrays
of the same dtype, dimensions, layout and writability; scalars of the same type), over
an ndrange it was launched over before, skips the general `launch`. Everything else
takes the general launch, with its results and errors. Each test runs twice: with the
arguments compared natively (`argument_checks`, in the call that runs the launch) and in Python (where the interpreter's object layout is not known)."""
import dataclasses
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kernelkit as kk
from backends.cpu import argument_checks, runtime
from backends.cpu.work_sharing import Ran
from launch_paths import count_general_launches


@pytest.fixture(autouse=True, params=["native", "python"])
def native_answers(request, monkeypatch):
    """Whether the native checks found the arguments the same, in the test's order (a
    list), or None where the arguments are compared in Python."""
    if request.param == "python":
        monkeypatch.setattr(argument_checks, "LAYOUT", None)
        return None
    if argument_checks.LAYOUT is None:
        pytest.skip("this interpreter's object layout is not known here")
    calls = runtime._device.mailbox.calls()
    answers = []

    def checking(*args, native=calls.launch_if_same):
        answer = native(*args)
        answers.append(answer != Ran.DIFFERS)
        return answer
    monkeypatch.setattr(calls, "launch_if_same", checking)
    return answers


@pytest.fixture
def cpu():
    return kk.CPU()


@pytest.fixture
def general_launches(cpu, monkeypatch):
    return count_general_launches(cpu, monkeypatch)


@kk.kernel
def add_one(y):
    i = kk.index(kk.Global)
    y[i] = y[i] + 1


@kk.kernel
def scaled_add(y, a, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = a * x[i] + y[i]


class HostBuffer:
    """Another library's host array, as the array interface shows it."""

    def __init__(self, array):
        self.array = array
        self.__array_interface__ = array.__array_interface__


def test_repeated_launches_skip_the_general_launch_and_all_run(cpu, general_launches,
                                                               native_answers):
    y = np.zeros(1000, np.float32)
    launch = add_one(cpu, 128)
    for _ in range(10):
        launch(y, ndrange=1000)
    for _ in range(10):             # a new launcher each time, as a loop body writes it
        add_one(cpu, 128)(y, ndrange=1000)
    kk.synchronize(cpu)
    assert general_launches == [(1000,)]
    if native_answers is not None:   # the launch that packed is followed by matches only
        assert len(native_answers) >= 17 and all(native_answers)
    np.testing.assert_array_equal(y, np.full(1000, 20, np.float32))


def test_other_kinds_of_arguments_and_ndranges_take_the_general_launch(cpu, general_launches):
    launch = scaled_add(cpu, 64)
    x = np.arange(100, dtype=np.float32)
    y = np.zeros(100, np.float32)
    launch(y, 2.0, x, ndrange=100)
    launch(y, 2.0, x, ndrange=100)                          # fast
    assert len(general_launches) == 1
    y64 = np.zeros(100)
    launch(y64, 2.0, np.arange(100.0), ndrange=100)         # another dtype
    launch(y, 3, x, ndrange=100)                            # an int for the float
    launch(y, 2.0, x, ndrange=50)                           # a new ndrange: general once,
    launch(y, 2.0, x, ndrange=50)                           # then fast
    strided = np.zeros(200, np.float32)
    launch(strided[::2], 2.0, x, ndrange=100)               # another layout
    launch(HostBuffer(y), 2.0, x, ndrange=100)              # another library's array
    launch(y, 2.0, x, ndrange=0)                            # nothing to run
    assert general_launches == [(100,), (100,), (100,), (50,), (100,), (100,), (0,)]
    launch(y, 2.0, x, ndrange=100)                          # fast again
    kk.synchronize(cpu)
    assert len(general_launches) == 7
    np.testing.assert_array_equal(y, np.arange(100) * np.where(np.arange(100) < 50, 15, 11))
    np.testing.assert_array_equal(y64, 2 * np.arange(100))
    np.testing.assert_array_equal(strided[::2], 2 * np.arange(100))
    np.testing.assert_array_equal(strided[1::2], 0)


@kk.kernel
def reciprocal(y, a):
    i = kk.index(kk.Global)
    y[i] = 1.0 / a


def test_a_new_scalar_each_launch_stays_on_the_fast_path_with_its_own_value(
        cpu, general_launches, native_answers):
    y, x = np.zeros(100, np.float32), np.ones(100, np.float32)
    launch = scaled_add(cpu, 64)
    for step in range(1, 21):
        launch(y, np.float32(step / 4), x, ndrange=100)   # a new object every launch
    kk.synchronize(cpu)
    assert general_launches == [(100,)]
    np.testing.assert_array_equal(y, np.full(100, sum(step / 4 for step in range(1, 21))))
    signs = np.zeros(8)
    flip = reciprocal(cpu, 8)
    for a, expected in ((0.0, np.inf), (-0.0, -np.inf), (0.0, np.inf), (2.0, 0.5)):
        flip(signs, a, ndrange=8)     # -0.0 == 0.0, but packs (and divides) apart
        kk.synchronize(cpu)
        np.testing.assert_array_equal(signs, np.full(8, expected))
    assert general_launches == [(100,), (8,)]
    if native_answers is not None:
        assert all(native_answers)


@kk.kernel
def scaled_add_2d(y, a, x: kk.Const):
    i, j = kk.index(kk.Global, kk.NTuple)
    y[i, j] = a * x[i, j] + y[i, j]


@kk.kernel
def group_corner(y, a):
    i, j = kk.index(kk.Global, kk.NTuple)
    li, lj = kk.index(kk.Local, kk.NTuple)
    y[i, j] = y[i, j] + a * (li * 100 + lj)


def test_two_dimensional_launches_with_static_groups_take_the_fast_path(cpu, general_launches,
                                                                        native_answers):
    y, x = np.zeros((32, 48), np.float32), np.ones((32, 48), np.float32)
    launch = scaled_add_2d(cpu, (16, 16))     # run regrouped: its groups are not observed
    for step in range(10):
        launch(y, np.float32(step), x, ndrange=(32, 48))
    corners = np.zeros((16, 12))
    observed = group_corner(cpu, (8, 4))      # run in its own groups
    for step in range(10):
        observed(corners, float(step), ndrange=(16, 12))
    kk.synchronize(cpu)
    assert general_launches == [(32, 48), (16, 12)]
    np.testing.assert_array_equal(y, np.full((32, 48), 45))
    local = np.add.outer(np.arange(16) % 8 * 100, np.arange(12) % 4)
    np.testing.assert_array_equal(corners, 45 * local)
    launch(y, np.float32(1), x, ndrange=(16, 48))           # a new ndrange: general once
    for wrong in (48, (32, [48]), (32, -1)):                # refused, as before
        with pytest.raises(kk.LaunchError):
            launch(y, np.float32(1), x, ndrange=wrong)
    kk.synchronize(cpu)
    assert general_launches[2:] == [(16, 48)]


@kk.kernel
def copy_grid(y, x: kk.Const):
    i, j = kk.index(kk.Global, kk.NTuple)
    y[i, j] = x[i, j]


def test_a_regrouped_launcher_given_arrays_of_another_dtype_copies_them_exactly(cpu):
    # The fast launcher of the regrouped version of the int8 kernel is asked first with
    # int16 arrays: it must send them to the general launch, not pack them for int8.
    # (Each dtype launched once, as the test of every dtype does, then again.)
    launch = copy_grid(cpu, (4, 4))
    for dtype in (np.int8, np.int16, np.uint64, np.int8, np.int16, np.uint64):
        host = np.arange(99, dtype=dtype).reshape(9, 11) * 3
        y = np.zeros((9, 11), dtype)
        launch(y, host, ndrange=(9, 11))
        kk.synchronize(cpu)
        np.testing.assert_array_equal(y, host)


@dataclasses.dataclass(frozen=True)
class Coefficients:
    a: np.float32
    b: float


@kk.kernel
def affine(y, c, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = c.a * x[i] + c.b


def test_a_new_dataclass_of_new_numbers_each_launch_takes_the_fast_path(cpu, general_launches,
                                                                        native_answers):
    y, x = np.zeros(64, np.float32), np.arange(64, dtype=np.float32)
    launch = affine(cpu, 32)
    for step in range(1, 11):
        launch(y, Coefficients(np.float32(step), step / 2), x, ndrange=64)
        kk.synchronize(cpu)
        np.testing.assert_array_equal(y, step * x + np.float32(step / 2))
    assert general_launches == [(64,)]
    if native_answers is not None:
        assert all(native_answers)


@kk.kernel
def scalars_only(a, b):
    i = kk.index(kk.Global)
    c = a * b + i


def test_a_kernel_of_scalars_only_takes_the_fast_path(cpu, general_launches, native_answers):
    launch = scalars_only(cpu, 8)
    for step in range(5):
        launch(np.float32(step), 2.0 + step, ndrange=16)
    kk.synchronize(cpu)
    assert general_launches == [(16,)]


def test_an_array_for_a_scalar_after_fast_launches_is_refused_by_name(cpu):
    y = np.zeros(16)
    flip = reciprocal(cpu, 8)
    flip(y, 2.0, ndrange=16)
    flip(y, 4.0, ndrange=16)
    with pytest.raises(kk.KernelkitError):
        flip(y, y, ndrange=16)
    kk.synchronize(cpu)
    np.testing.assert_array_equal(y, np.full(16, 0.25))


def test_after_fast_launches_a_read_only_array_is_still_refused_where_the_kernel_writes(
        cpu, general_launches):
    launch = add_one(cpu, 32)
    y = np.zeros(64, np.float32)
    launch(y, ndrange=64)
    launch(y, ndrange=64)
    frozen = np.zeros(64, np.float32)
    frozen.flags.writeable = False
    with pytest.raises(kk.LaunchError, match="read-only"):
        launch(frozen, ndrange=64)
    with pytest.raises(kk.LaunchError, match="takes 1 arguments"):
        launch(y, y, ndrange=64)
    kk.synchronize(cpu)
    np.testing.assert_array_equal(y, 2)
    np.testing.assert_array_equal(frozen, 0)


def test_fast_launches_large_enough_for_the_threads_run_on_them(cpu, general_launches):
    n = 1 << 20
    y = np.zeros(n, np.float32)
    launch = add_one(cpu, 256)
    for _ in range(3):
        launch(y, ndrange=n)
    kk.synchronize(cpu)
    assert general_launches == [(n,)]
    np.testing.assert_array_equal(y, 3)


def test_a_debug_backend_checks_every_launch_on_the_general_path(monkeypatch):
    checked = kk.CPU(debug=True)
    general_launches = count_general_launches(checked, monkeypatch)
    y = np.zeros(8, np.float32)
    launch = add_one(checked, 8)
    for _ in range(3):
        launch(y, ndrange=8)
    with pytest.raises(IndexError):
        launch(y, ndrange=9)
        kk.synchronize(checked)
    kk.synchronize(checked)
    assert general_launches == [(8,)] * 3 + [(9,)]


def test_an_array_resized_in_place_between_fast_launches_is_packed_anew(cpu, general_launches,
                                                                        native_answers):
    launch = add_one(cpu, 32)
    y = np.zeros(64, np.float32)
    launch(y, ndrange=64)
    launch(y, ndrange=64)
    kk.synchronize(cpu)
    y.resize(4096, refcheck=False)      # no reference kept: NumPy lets it move the data
    launch(y, ndrange=64)               # fast: packed again, at the new address
    launch(y, ndrange=64)
    kk.synchronize(cpu)
    assert general_launches == [(64,)]
    if native_answers is not None:   # the resized array, once (then packed anew)
        assert native_answers[-2:] == [False, True] and native_answers.count(False) == 1
    np.testing.assert_array_equal(y[:64], 4)
    np.testing.assert_array_equal(y[64:], 0)


def test_two_arrays_swapped_from_launch_to_launch_are_packed_once_each(
        cpu, general_launches, native_answers, monkeypatch):
    packs = []
    packing_function = runtime.packing_function

    def counted(*args, **options):
        pack = packing_function(*args, **options)

        def packing(*fields):
            packs.append(fields[1][0])
            return pack(*fields)
        return packing
    monkeypatch.setattr(runtime, "packing_function", counted)
    launch = scaled_add(cpu, 64)
    x = np.arange(100, dtype=np.float32)
    u, v = np.zeros(100, np.float32), np.ones(100, np.float32)
    for _ in range(10):
        launch(u, 2.0, x, ndrange=100)
        launch(v, 2.0, x, ndrange=100)
    kk.synchronize(cpu)
    assert general_launches == [(100,)]
    np.testing.assert_array_equal(u, 20 * x)
    np.testing.assert_array_equal(v, 1 + 20 * x)
    if native_answers is not None:   # the general launch's, then one record each, kept
        assert [id(array) for array in packs] == [id(u), id(v), id(u)]


FIRST_LAUNCHES = textwrap.dedent("""
    import numpy as np
    import kernelkit as kk
    from backends.cpu import runtime

    @kk.kernel
    def add_one(y):
        i = kk.index(kk.Global)
        y[i] = y[i] + 1

    mailbox = runtime._device.mailbox
    print("before:", mailbox._compiling is None)
    backend = kk.CPU()
    print("with the backend:", mailbox._compiling is not None)
    y = np.zeros(1000, np.float32)
    launch = add_one(backend, 128)
    for _ in range(3):
        launch(y, ndrange=1000)
    kk.synchronize(backend)
    print("then:", y.min(), y.max())
""")


def test_the_native_calls_compile_while_the_first_kernel_does(tmp_path):
    # The native calls a launch makes take as long to compile as a small kernel: they
    # are compiled on a thread of their own from the backend's creation on.
    script = tmp_path / "first.py"
    script.write_text(FIRST_LAUNCHES)
    environment = dict(os.environ, KERNELKIT_CACHE_DIR=str(tmp_path / "cache"))
    child = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           timeout=120, env=environment)
    assert child.returncode == 0, child.stdout + child.stderr[-3000:]
    assert "before: True" in child.stdout
    assert "with the backend: True" in child.stdout
    assert "then: 3.0 3.0" in child.stdout
