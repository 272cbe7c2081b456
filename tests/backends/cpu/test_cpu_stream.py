"""The CPU backend's stream: launches run in submission order across worker threads
without the caller synchronizing in between; the thread count never changes results;
errors and printed output of queued launches surface at kk.synchronize."""
import threading

import numpy as np
import pytest

import kernelkit as kk
from backends.cpu import runtime
from backends.cpu.work_sharing import Ran, State

BIG = 200_000          # far above the size that runs inline on the calling thread


@pytest.fixture(scope="module")
def two_threads():
    return kk.CPU(threads=2)


@kk.kernel
def shift_in_bit(a, bit):
    i = kk.index(kk.Global)
    a[i] = a[i] * 2 + bit


def test_fifty_dependent_launches_run_in_submission_order(two_threads):
    a = np.zeros(BIG, np.int64)
    bits = [int(k % 3 == 0) for k in range(50)]
    for bit in bits:
        shift_in_bit(two_threads, 256)(a, bit, ndrange=BIG)
    kk.synchronize(two_threads)
    expected = int("".join(map(str, bits)), 2)
    np.testing.assert_array_equal(a, np.full(BIG, expected, np.int64))


@kk.kernel
def group_mixing(out, x: kk.Const):
    i = kk.index(kk.Global)
    local = kk.index(kk.Local)
    group = kk.index(kk.Group)
    tile = kk.localmem(np.float64, 128)
    tile[local] = x[i]
    kk.synchronize()
    out[i] = tile[127 - local] * 0.5 + group + kk.sin(x[i])


def test_one_and_two_threads_give_identical_results_for_many_work_groups(two_threads):
    x = np.random.default_rng(0).standard_normal(128 * 3000)
    results = []
    for backend in (kk.CPU(threads=1), two_threads):
        out = np.zeros_like(x)
        group_mixing(backend, 128)(out, x, ndrange=x.size)
        kk.synchronize(backend)
        results.append(out)
    np.testing.assert_array_equal(results[0], results[1])
    groups = np.arange(x.size) // 128
    mirrored = x.reshape(-1, 128)[:, ::-1].ravel()
    np.testing.assert_allclose(results[0], mirrored * 0.5 + groups + np.sin(x), rtol=1e-12)


@kk.kernel
def fill_with_index(a):
    i = kk.index(kk.Global)
    a[i] = i + 1


@kk.kernel
def copy_last(out, a: kk.Const):
    out[0] = a[a.shape[0] - 1]


def test_tiny_launch_after_a_queued_big_launch_sees_its_result(two_threads):
    a = np.zeros(BIG, np.int64)
    out = np.zeros(1, np.int64)
    fill_with_index(two_threads, 1024)(a, ndrange=BIG)
    copy_last(two_threads, 1)(out, a, ndrange=1)
    kk.synchronize(two_threads)
    assert out[0] == BIG
    np.testing.assert_array_equal(a, np.arange(1, BIG + 1))


@kk.kernel
def read_next(y, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = x[i + 1]


def test_index_error_in_a_queued_launch_surfaces_at_synchronize_and_the_backend_recovers():
    debug = kk.CPU(threads=2, debug=True)
    x = np.arange(BIG, dtype=np.float64)
    y = np.zeros(BIG)
    read_next(debug, 1000)(y, x, ndrange=BIG)          # queued: does not raise here
    with pytest.raises(IndexError, match=r"(?s)read_next.*index 200000 is out of bounds"):
        kk.synchronize(debug)
    kk.synchronize(debug)                              # the error is reported once
    a = np.zeros(BIG, np.int64)
    fill_with_index(debug, 1000)(a, ndrange=BIG)
    kk.synchronize(debug)
    np.testing.assert_array_equal(a, np.arange(1, BIG + 1))


@kk.kernel
def print_first(a):
    i = kk.index(kk.Global)
    if i == 0:
        kk.print("first element", a[0])


def test_print_in_a_queued_launch_is_flushed_by_synchronize(two_threads, capfd):
    capfd.readouterr()
    a = np.full(BIG, 7, np.int32)
    print_first(two_threads, 1024)(a, ndrange=BIG)
    kk.synchronize(two_threads)
    assert capfd.readouterr().out == "first element 7\n"


def test_print_in_an_inline_launch_is_flushed_by_synchronize(two_threads, capfd):
    capfd.readouterr()
    a = np.full(4, 3, np.int32)
    print_first(two_threads, 4)(a, ndrange=4)
    kk.synchronize(two_threads)
    assert capfd.readouterr().out == "first element 3\n"


def test_a_queued_launch_runs_on_the_workers_while_the_caller_does_not_wait(two_threads):
    import time
    a = np.zeros(BIG, np.int64)
    fill_with_index(two_threads, 1000)(a, ndrange=BIG)
    deadline = time.monotonic() + 30
    while a[-1] != BIG and time.monotonic() < deadline:
        time.sleep(0.001)
    assert a[-1] == BIG
    kk.synchronize(two_threads)
    np.testing.assert_array_equal(a, np.arange(1, BIG + 1))


def test_one_thread_backend_runs_each_launch_before_the_launch_returns():
    a = np.zeros(BIG, np.int64)
    fill_with_index(kk.CPU(threads=1), 1000)(a, ndrange=BIG)
    np.testing.assert_array_equal(a, np.arange(1, BIG + 1))


def test_a_launch_measured_to_be_short_runs_on_the_calling_thread(monkeypatch):
    backend = kk.CPU(threads=2)
    a = np.zeros(BIG, np.int64)
    launcher = fill_with_index(backend, 1000)
    launcher(a, ndrange=BIG)
    kk.synchronize(backend)
    (prepared,) = [prepared for key, prepared in fill_with_index._specializations.items()
                   if key[0] is backend]
    answers = []   # the native policy's answers (`work_sharing.Ran`)
    calls = runtime._device.mailbox.calls()
    for name in ("launch", "launch_if_same"):
        if getattr(calls, name) is not None:
            def answering(*args, native=getattr(calls, name)):
                answers.append(native(*args))
                return answers[-1]
            monkeypatch.setattr(calls, name, answering)
    monkeypatch.setattr(prepared, "nanoseconds_per_group", 0.0)
    launcher(a, ndrange=BIG)               # unmeasured and above the item threshold: threads
    kk.synchronize(backend)
    assert answers == [Ran.LEFT]
    assert prepared.nanoseconds_per_group > 0
    monkeypatch.setattr(prepared, "nanoseconds_per_group", 1.0)
    launcher(a, ndrange=BIG)               # estimated at 200 ns: on the calling thread
    assert answers[-1] == Ran.RAN and not runtime._device.queue
    np.testing.assert_array_equal(a, np.arange(1, BIG + 1))
    monkeypatch.setattr(prepared, "nanoseconds_per_group", 1e9)
    launcher(a, ndrange=BIG)               # estimated at 200 s: threads
    assert answers[-1] == Ran.LEFT
    kk.synchronize(backend)


@kk.kernel
def count_up(a):
    i = kk.index(kk.Global)
    a[i] += 1


def test_a_kernel_is_not_measured_slower_while_a_python_thread_holds_the_gil(monkeypatch):
    # A thread that ran a queued chunk waits for the GIL when it comes back from it (up
    # to Python's 5 ms switch interval beside a thread busy in Python); the chunk's
    # time leaves that wait out, or every later launch of the kernel would be planned
    # as if it were a hundred times longer.
    import backends.cpu.runtime as runtime
    backend = kk.CPU(threads=2)
    a = np.zeros(BIG, np.int64)
    launcher = count_up(backend, 256)
    for _ in range(5):
        launcher(a, ndrange=BIG)
        kk.synchronize(backend)
    (prepared,) = [prepared for key, prepared in count_up._specializations.items()
                   if key[0] is backend]
    quiet = prepared.nanoseconds_per_group
    busy = threading.Event()

    def hold_the_gil():
        while not busy.is_set():
            pass
    holder = threading.Thread(target=hold_the_gil)
    holder.start()
    try:
        # Queued, in chunks, however short it was measured
        for policy in ("led_ns", "joined_ns", "inline_ns"):
            monkeypatch.setattr(runtime._device.mailbox.words, policy, 0)
        for _ in range(20):
            launcher(a, ndrange=BIG)
            kk.synchronize(backend)
    finally:
        busy.set()
        holder.join()
    np.testing.assert_array_equal(a, np.full(BIG, 25))
    assert prepared.nanoseconds_per_group < 10 * quiet, (quiet, prepared.nanoseconds_per_group)


def test_the_native_spin_wait_sees_a_new_submission_or_gives_up():
    spin = runtime._device.mailbox.calls().spin
    word = np.array([7], np.int64)
    assert spin(word.ctypes.data, 6, 10**12) == 7       # already different: at once
    assert spin(word.ctypes.data, 7, 1000) == 7         # unchanged: gives up after 1 us


@kk.kernel
def saxpy(y, a, x: kk.Const):
    i = kk.index(kk.Global)
    y[i] = a * x[i] + y[i]


def test_launches_on_a_new_backend_each_time_run_in_order_on_a_bounded_pool_of_threads():
    """Every CPU backend runs on the same cores: launches on separate backends are
    ordered as launches on one, and share one pool of worker threads."""
    import threading
    n = 1 << 20
    x, y = np.ones(n, np.float32), np.zeros(n, np.float32)
    before = threading.active_count()
    for _ in range(100):
        saxpy(kk.CPU(threads=4), 256)(y, 2.0, x, ndrange=n)
    kk.synchronize(kk.CPU(threads=4))
    assert threading.active_count() - before <= 3
    np.testing.assert_array_equal(y, np.full(n, 200, np.float32))


def test_a_kernel_launched_on_a_new_backend_each_time_keeps_a_bounded_number_of_them():
    from kernelkit.lang.kernel import MAX_SPECIALIZATIONS
    y, x = np.zeros(4, np.float32), np.ones(4, np.float32)
    for _ in range(MAX_SPECIALIZATIONS + 20):
        saxpy(kk.CPU(threads=1), 4)(y, 1.0, x, ndrange=4)
    kk.synchronize(kk.CPU(threads=1))
    assert len(saxpy._specializations) <= MAX_SPECIALIZATIONS
    np.testing.assert_array_equal(y, np.full(4, MAX_SPECIALIZATIONS + 20, np.float32))


@kk.kernel
def long_sums(out, steps):
    """Few work-items, each looping long: a first launch worth every thread."""
    i = kk.index(kk.Global)
    total = 0.0
    for k in range(steps):
        total += kk.sin(k * 0.001 + i)
    out[i] = total


def test_a_first_launch_of_few_long_work_items_goes_to_the_threads_after_its_first_group(
        monkeypatch):
    # Unmeasured and below the item threshold: its first group runs on the calling
    # thread, measures the kernel, and the other groups go to the threads.
    import backends.cpu.runtime as runtime
    backend = kk.CPU(threads=2)
    submitted = []
    original = runtime._Device.submit
    monkeypatch.setattr(runtime._Device, "submit", lambda device, launch: (
        submitted.append((launch.first, launch.groups)), original(device, launch)))
    out = np.zeros(64)
    long_sums(backend, 1)(out, 100_000, ndrange=64)
    kk.synchronize(backend)
    assert submitted == [(1, 64)]
    k = np.arange(100_000) * 0.001
    np.testing.assert_allclose(out, [np.sin(k + i).sum() for i in range(64)], rtol=1e-9)


def test_a_first_launch_of_few_short_work_items_stays_on_the_calling_thread(monkeypatch):
    import backends.cpu.runtime as runtime
    backend = kk.CPU(threads=2)
    submitted = []
    monkeypatch.setattr(runtime._Device, "submit", lambda device, launch: submitted.append(
        launch))
    out = np.zeros(64)
    long_sums(backend, 1)(out, 3, ndrange=64)
    kk.synchronize(backend)
    assert submitted == []
    np.testing.assert_allclose(out, [np.sin(np.arange(3) * 0.001 + i).sum() for i in range(64)],
                               rtol=1e-12)


RECORD_GROUPS = """
define void @kernelkit_test_record_groups(ptr %record, i64 %first, i64 %end) {
  %slots = load ptr, ptr %record
  store i64 %first, ptr %slots
  %end.slot = getelementptr i64, ptr %slots, i64 1
  store i64 %end, ptr %end.slot
  ret void
}
"""


def test_group_numbers_past_two_to_the_31_reach_the_group_function_whole():
    import ctypes
    import struct

    from kernelkit.compiler.native import host_functions
    entry = host_functions(RECORD_GROUPS, {})["kernelkit_test_record_groups"]
    mailbox = runtime._device.mailbox
    slots, running = np.zeros(2, np.int64), np.zeros(1, np.int64)
    record = struct.pack("=Q", slots.ctypes.data)
    state = State(running=running.ctypes.data)
    for first, end in [(0, 5), (2**31 - 2, 2**31 - 1), (2**31 - 1, 2**31), (2**40, 2**40 + 1)]:
        assert mailbox.calls().run(mailbox.key(entry), record, first, end,
                                   ctypes.addressof(state)) == end - first
        assert slots.tolist() == [first, end]

