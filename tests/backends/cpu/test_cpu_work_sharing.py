"""Launches led by the launching thread and shared natively with the awake workers
(`backends/cpu/work_sharing.py`): every group runs once, in the order of the stream,
beside queued and inline launches, from several Python threads at once, and with
workers of a backend that allows more threads than the launching one; the mailbox
hands out each group of a launch once, at any size, and no worker touches a launch
after its leader returned; a Ctrl-C anywhere leaves the device usable."""
import random
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import kernelkit as kk
from backends.cpu import runtime
from backends.cpu.work_sharing import LED_NS, PROBED_LEADS, PROBED_NS, Mailbox, Ran

MID = 40_000        # a launch of tens of microseconds: led, once the kernel is measured
BIG = 400_000
MODULUS = 1_000_003


@kk.kernel
def step(a, k):
    i = kk.index(kk.Global)
    a[i] = (a[i] * 3 + k + i % 7) % MODULUS


def expected_after(steps, n):
    a = np.zeros(n, np.int64)
    for k in steps:
        a = (a * 3 + k + np.arange(n) % 7) % MODULUS
    return a


def counting_leads(monkeypatch, device) -> list:
    """[how many launches the native policy led: posted in the mailbox]. Meanwhile idle
    workers watch the mailbox without timing out (on a loaded machine they may not run
    for longer than they normally watch, and the launches would not be led), and every
    launch a worker could take is led whatever its kernel's estimate (the first
    measurements on a loaded machine can be a hundred times too long)."""
    count = [0]
    words = device.mailbox.words
    calls = device.mailbox.calls()
    for name in ("launch", "launch_if_same"):
        if getattr(calls, name) is None:
            continue

        def counting(*args, native=getattr(calls, name)):
            posts = words.sequence
            ran = native(*args)
            count[0] += ran in (Ran.RAN, Ran.LED_BESIDE) and words.sequence != posts
            return ran
        monkeypatch.setattr(calls, name, counting)
    monkeypatch.setattr(runtime, "_SERVE_NS", 10**13)
    monkeypatch.setattr(words, "joined_ns", 10**13)
    return count


def send_back(monkeypatch, device) -> None:
    """Undo the test's patches; the workers of `device` go back to their normal watch."""
    monkeypatch.undo()
    with device.condition:
        device.submissions[0] += 1
        device.condition.notify_all()


@pytest.fixture
def led_count(monkeypatch):
    """See `counting_leads`; the device has started a worker."""
    count = counting_leads(monkeypatch, runtime._device)
    backend = kk.CPU(threads=2)
    step(backend, 256)(np.zeros(BIG, np.int64), 0, ndrange=BIG)   # queued: starts one
    kk.synchronize(backend)
    yield count
    send_back(monkeypatch, runtime._device)


def test_led_launches_run_every_group_once_in_stream_order(led_count):
    backend = kk.CPU(threads=2)
    a = np.zeros(MID, np.int64)
    steps = list(range(300))
    for k in steps:
        step(backend, 256)(a, k, ndrange=MID)
        if k % 50 == 0:
            kk.synchronize(backend)
    kk.synchronize(backend)
    np.testing.assert_array_equal(a, expected_after(steps, MID))
    assert led_count[0] > 200


def test_led_queued_and_inline_launches_interleave_in_order(led_count):
    backend = kk.CPU(threads=2)
    sizes = [MID, BIG, 100, MID, MID, BIG, 7, MID] * 6
    arrays = {n: np.zeros(n, np.int64) for n in set(sizes)}
    steps = {n: [] for n in arrays}
    for k, n in enumerate(sizes):
        step(backend, 64)(arrays[n], k, ndrange=n)
        steps[n].append(k)
        # a launch reading what the one before wrote, over the other arrays' sizes
        step(backend, 64)(arrays[n], k + 1, ndrange=n)
        steps[n].append(k + 1)
        if k % 3 == 0:
            kk.synchronize(backend)   # an idle device: the next launch may be led
    kk.synchronize(backend)
    for n, array in arrays.items():
        np.testing.assert_array_equal(array, expected_after(steps[n], n))
    assert led_count[0] > 0


def test_threads_launching_at_once_each_get_their_own_results(led_count):
    errors = []

    def stream(seed):
        try:
            backend = kk.CPU(threads=2)
            a = np.zeros(MID + seed, np.int64)
            steps = [seed * 1000 + k for k in range(120)]
            for k in steps:
                step(backend, 128)(a, k, ndrange=len(a))
                if k % 2:
                    kk.synchronize(backend)
            kk.synchronize(backend)
            np.testing.assert_array_equal(a, expected_after(steps, len(a)))
        except BaseException as error:  # reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=stream, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors[0]
    assert led_count[0] > 0


@kk.kernel
def step_past_the_end(a, k):   # the last work-item writes one past the end
    i = kk.index(kk.Global)
    a[i + 1] = (a[i] * 3 + k + i % 7) % MODULUS


@kk.kernel
def step_and_say(a, k):
    i = kk.index(kk.Global)
    a[i] = (a[i] * 3 + k + i % 7) % MODULUS
    if i == 0:
        kk.print("said", k)


def test_led_launches_beside_checked_failing_and_printing_ones_from_other_threads(
        led_count, capfd):
    capfd.readouterr()
    errors = []

    def led():
        backend = kk.CPU(threads=2)
        a = np.zeros(MID, np.int64)
        for k in range(150):
            step(backend, 256)(a, k, ndrange=MID)
            if k % 3 == 0:
                kk.synchronize(backend)
        kk.synchronize(backend)
        np.testing.assert_array_equal(a, expected_after(range(150), MID))

    def checked():
        backend = kk.CPU(threads=2, debug=True)
        a = np.zeros(MID, np.int64)
        failed = 0
        for k in range(30):
            try:
                if k % 5 == 4:
                    step_past_the_end(backend, 256)(a, k, ndrange=MID)
                else:
                    step(backend, 256)(a, k, ndrange=MID)
                kk.synchronize(backend)
            except IndexError:
                failed += 1
        assert failed == 6

    def printing():
        backend = kk.CPU(threads=4)
        a = np.zeros(MID, np.int64)
        for k in range(60):
            step_and_say(backend, 256)(a, k, ndrange=MID)
        kk.synchronize(backend)
        np.testing.assert_array_equal(a, expected_after(range(60), MID))

    def run(body):
        try:
            body()
        except BaseException as error:  # reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(body,)) for body in (led, checked, printing)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors[0]
    kk.synchronize(kk.CPU())
    said = capfd.readouterr().out.split("\n")
    assert sorted(line for line in said if line) == sorted(f"said {k}" for k in range(60))
    assert led_count[0] > 0


def test_a_backend_of_fewer_threads_leads_beside_workers_of_one_of_more(led_count):
    wide, narrow = kk.CPU(threads=4), kk.CPU(threads=2)
    a, b = np.zeros(BIG, np.int64), np.zeros(MID, np.int64)
    step(wide, 256)(a, 1, ndrange=BIG)      # starts three workers
    kk.synchronize(wide)
    for k in range(100):
        step(narrow, 256)(b, k, ndrange=MID)
        kk.synchronize(narrow)
    np.testing.assert_array_equal(b, expected_after(range(100), MID))
    assert led_count[0] > 50


# -- the mailbox on its own: a group function that records what it was handed -------------

RECORDER = """
define void @kernelkit_test_record_range(ptr %record, i64 %first, i64 %end) {
  %count.at = load ptr, ptr %record
  %ranges.slot = getelementptr ptr, ptr %record, i64 1
  %ranges = load ptr, ptr %ranges.slot
  %index = atomicrmw add ptr %count.at, i64 1 seq_cst
  %at = mul i64 %index, 2
  %first.at = getelementptr i64, ptr %ranges, i64 %at
  store i64 %first, ptr %first.at
  %end.index = add i64 %at, 1
  %end.at = getelementptr i64, ptr %ranges, i64 %end.index
  store i64 %end, ptr %end.at
  ret void
}
"""


@pytest.fixture(scope="module")
def record_range() -> int:
    from kernelkit.compiler.native import host_functions
    return host_functions(RECORDER, {})["kernelkit_test_record_range"]


class Served:
    """A mailbox served by `helpers` threads of this test, until `stop`."""

    def __init__(self, helpers: int):
        self.mailbox = Mailbox()
        self.submissions = np.zeros(1, np.int64)
        self.mailbox.serve(self.submissions.ctypes.data, 0, 1)   # compiles the functions
        self.serving = threading.Barrier(helpers + 1)
        self.threads = [threading.Thread(target=self.serve, daemon=True)
                        for _ in range(helpers)]
        for thread in self.threads:
            thread.start()
        self.serving.wait()

    def serve(self):
        self.serving.wait()
        while not self.mailbox.serve(self.submissions.ctypes.data, 0, 10**13):
            pass

    def stop(self):
        self.submissions[0] = 1
        for thread in self.threads:
            thread.join()


def lead_and_check(served: Served, record_range: int, groups: int, chunk: int, helpers: int,
                   first: int = 0):
    """Lead groups [first, groups) of the recording function; check that the ranges it
    was called on are those groups once, in claims of at most a share of the groups
    (guided) or `chunk`, whichever is larger. Returns the launch's call counter
    (a caller checks that nothing calls it later), its calls, and the groups the leader
    ran."""
    most = (groups - first) // chunk + 3
    count = np.zeros(1, np.int64)
    ranges = np.full((most, 2), -1, np.int64)
    record = np.array([count.ctypes.data, ranges.ctypes.data], np.uint64).tobytes()
    ran = served.mailbox.lead(served.mailbox.key(record_range), record, groups, chunk,
                              helpers, first)
    calls = int(count[0])
    assert 1 <= calls <= most
    handed = sorted(map(tuple, ranges[:calls].tolist()))
    assert handed[0][0] == first and handed[-1][1] == groups
    assert all(previous[1] == following[0] for previous, following in zip(handed, handed[1:]))
    largest = max(chunk, (groups - first) // (2 * (helpers + 1)))
    assert all(0 < end - start <= largest for start, end in handed)
    assert 0 <= ran <= groups - first
    return count, calls, ran


@pytest.mark.parametrize("groups, chunk", [
    (2, 1), (3, 1), (2, 5), (1000, 1), (1000, 7), (1000, 10**6), (2**31 - 1, 2**27),
    (2**31 - 1, 2**31 - 2), (2**31 - 1, 2**40)])
def test_the_mailbox_hands_out_every_group_once_at_any_size(record_range, groups, chunk):
    served = Served(helpers=2)
    try:
        for _ in range(20):
            lead_and_check(served, record_range, groups, chunk, helpers=2)
    finally:
        served.stop()


@pytest.mark.parametrize("first, groups, chunk", [
    (1, 2, 1), (5, 1000, 7), (999, 1000, 1), (300, 1000, 10**6), (2**31 - 3, 2**31 - 1, 1),
    (10, 2**31 - 1, 2**27)])
def test_a_led_range_runs_each_of_its_groups_once(record_range, first, groups, chunk):
    # A queued launch is led a range at a time (`_Device.run_a_chunk`).
    served = Served(helpers=2)
    try:
        for _ in range(20):
            lead_and_check(served, record_range, groups, chunk, helpers=2, first=first)
    finally:
        served.stop()


def test_a_led_range_holds_at_least_one_group_below_two_to_the_31():
    for first, groups in [(5, 5), (6, 5), (-1, 5), (0, 2**31)]:
        with pytest.raises(ValueError, match="at least one"):
            Mailbox().lead(b"", b"", groups, 1, 1, first=first)


def test_queued_launches_are_shared_natively_and_run_every_group_once(monkeypatch):
    # A queued launch whose time is known is led by the thread that takes it, its groups
    # shared natively with the workers and the thread that waits (no Python between
    # claims). Launches follow each other in order, each group once.
    backend = kk.CPU(threads=2)
    shared = []
    calls, words = runtime._device.mailbox.calls(), runtime._device.mailbox.words

    def counting(*args, share=calls.share):
        led = share(*args)
        shared.append(led >= 0)
        return led
    monkeypatch.setattr(calls, "share", counting)
    for policy in ("led_ns", "joined_ns", "inline_ns"):   # none run or led by its
        monkeypatch.setattr(words, policy, 0)             # launcher: all queued
    a = np.zeros(BIG, np.int64)
    launch = step(backend, 256)
    steps = range(40)
    for k in steps:
        launch(a, k, ndrange=BIG)
    kk.synchronize(backend)
    assert np.array_equal(a, expected_after(steps, BIG))
    assert any(shared)


def test_a_launch_is_handed_out_in_a_few_claims_per_thread(record_range):
    # Guided: a claim takes a share of the groups left (at least the chunk), so a launch
    # of 1000 groups in chunks of one takes a few dozen claims, not a thousand (each
    # moves a cache line between the cores).
    served = Served(helpers=2)
    try:
        for _ in range(20):
            _, calls, _ = lead_and_check(served, record_range, 1000, 1, helpers=2)
            assert calls <= 60
    finally:
        served.stop()


def on_cpu(cpu: int, work) -> threading.Thread:
    """A started thread bound to `cpu` that runs `work()`."""
    import os

    def bound():
        os.sched_setaffinity(threading.get_native_id(), {cpu})
        work()
    thread = threading.Thread(target=bound)
    thread.start()
    return thread


def watching_seconds(nanoseconds: int) -> float:
    """Seconds spent watching an empty mailbox for `nanoseconds`."""
    submissions = np.zeros(1, np.int64)
    start = time.perf_counter()
    Mailbox().serve(submissions.ctypes.data, 0, nanoseconds)
    return time.perf_counter() - start


needs_affinity = pytest.mark.skipif(
    not hasattr(__import__("os"), "sched_setaffinity"),
    reason="binding a thread to a CPU needs os.sched_setaffinity (Linux)")


@needs_affinity
def test_a_watching_worker_gives_a_busy_core_back():
    # Beside a thread busy in native code on the same core, a watching worker gives the
    # core away every few microseconds, and the time it gave away counts as watched: it
    # stops about as soon as alone. (Were only the time it ran counted, it would watch
    # in slivers between the other's slices of milliseconds for hundreds of times as
    # long, and slow that thread all the while.)
    import hashlib
    import os
    cpu = min(os.sched_getaffinity(0))
    Mailbox().serve(np.zeros(1, np.int64).ctypes.data, 0, 1)   # compiled
    nanoseconds = 30_000_000
    alone, beside = [], []
    on_cpu(cpu, lambda: alone.append(watching_seconds(nanoseconds))).join()
    stop = threading.Event()
    data = bytes(8 << 20)

    def hog():   # hashing a large buffer runs without the GIL
        while not stop.is_set():
            hashlib.sha256(data).digest()
    hogging = on_cpu(cpu, hog)
    try:
        on_cpu(cpu, lambda: beside.append(watching_seconds(nanoseconds))).join()
    finally:
        stop.set()
        hogging.join()
    assert beside[0] < 3 * alone[0], (alone, beside)


@needs_affinity
def test_a_worker_on_the_core_of_the_leader_is_kept_off_it_until_it_sleeps(monkeypatch):
    # A watching worker says which core it runs on. Led launches that it does not join
    # from the leader's core mean it waits for that core, where the system may leave it
    # for seconds: the device keeps it on the other cores while it watches, and lets it
    # run anywhere again once it goes to sleep.
    import os
    allowed = os.sched_getaffinity(0)
    if len(allowed) < 2:
        pytest.skip("one CPU: no other core to move a worker to")
    device = runtime._Device()
    monkeypatch.setattr(runtime, "_device", device)
    monkeypatch.setattr(runtime, "_SERVE_NS", 10**13)   # the worker keeps watching
    cpu = runtime._sched_getcpu()
    try:
        os.sched_setaffinity(0, {cpu})
        device.wake(2)
        deadline = time.monotonic() + 30
        while not device.mailbox.words.watching and time.monotonic() < deadline:
            time.sleep(0.001)
        worker = device.workers[0].native_id
        os.sched_setaffinity(worker, {cpu})        # on the leader's core, as if placed there
        os.sched_setaffinity(worker, allowed)
        while device.mailbox.words.core != cpu and time.monotonic() < deadline:
            time.sleep(0.001)
        assert device.mailbox.words.core == cpu    # it says so within a few microseconds
        device.separate()
        assert processor(worker) != cpu
        assert os.sched_getaffinity(worker) == allowed - {cpu}
        while device.mailbox.words.core == -1 and time.monotonic() < deadline:
            time.sleep(0.001)
        assert device.mailbox.words.core not in (cpu, -1)   # it says where it runs now
        # Asleep, it may run anywhere again.
        monkeypatch.setattr(runtime, "_SERVE_NS", 1000)
        with device.condition:
            device.submissions[0] += 1             # it looks again, with a short watch
        while device.sleeping == 0 and time.monotonic() < deadline:
            time.sleep(0.001)
        assert device.sleeping == 1
        assert os.sched_getaffinity(worker) == allowed
    finally:
        os.sched_setaffinity(0, allowed)
        send_back(monkeypatch, device)


def processor(thread: int) -> int:
    """The CPU a thread of this process last ran on."""
    with open(f"/proc/self/task/{thread}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[36])


@needs_affinity
def test_threads_spinning_on_one_core_let_each_other_run():
    # A thread that waits for a word (the native spin wait) and a watching worker share
    # one core; the worker returns (its submissions word changed) and changes the word.
    # Each spinning thread gives the core away every few microseconds, so the waiter is
    # done in well under a millisecond, not after the scheduler's slices of milliseconds.
    # (Other processes on that core can take it for longer: one quick attempt of ten
    # shows the yielding works.)
    import os
    cpu = min(os.sched_getaffinity(0))
    spin = Mailbox().calls().spin
    for attempt in range(10):
        word, submissions = np.zeros(1, np.int64), np.zeros(1, np.int64)
        watching, done = threading.Event(), []

        def worker():
            mailbox = Mailbox()
            watching.set()
            mailbox.serve(submissions.ctypes.data, 0, 10**12)
            word[0] = 1

        def waiter():
            watching.wait()
            start = time.perf_counter()
            submissions[0] = 1
            spin(word.ctypes.data, 0, 10**11)
            done.append(time.perf_counter() - start)
        threads = [on_cpu(cpu, worker), on_cpu(cpu, waiter)]
        for thread in threads:
            thread.join()
        if done[0] < 1e-3:
            break
    assert done[0] < 1e-3, done


def test_no_helper_calls_a_launch_after_its_leader_returned(record_range):
    # Many small launches in a row, each with a record of its own, helpers joining
    # late and refused: a stale helper would add a call to an earlier launch's counter.
    served = Served(helpers=3)
    try:
        finished = []
        helped = 0   # groups the helpers ran: on a loaded machine they may come late
        deadline = time.monotonic() + 10
        while len(finished) < 3000 or (not helped and time.monotonic() < deadline):
            groups = random.randint(2, 40)
            count, calls, ran = lead_and_check(served, record_range, groups, 1,
                                               helpers=1 + len(finished) % 3)
            finished.append((count, calls))
            helped += groups - ran
        time.sleep(0.01)
    finally:
        served.stop()
    assert [int(count[0]) for count, _ in finished] == [calls for _, calls in finished]
    assert helped > 0


# -- the device ----------------------------------------------------------------------------

@kk.kernel
def wait_for_flag(flag, spins, seen):
    i = kk.index(kk.Global)
    while kk.atomic_add(flag, 0, 0) == 0 and kk.atomic_add(spins, 0, 1) < SPINS:
        pass
    seen[i] = kk.atomic_add(flag, 0, 0)


@kk.kernel
def raise_flag(flag):
    kk.atomic_add(flag, 0, 1)


SPINS = 50_000_000


def test_a_launch_another_thread_makes_while_one_is_led_runs_beside_it(led_count, monkeypatch):
    # A led launch is in no queue (as one run inline): a launch another thread makes
    # meanwhile runs at once. Here the led launch waits for that one; held back until
    # the led one ended, it would let the led one spin until its spins ran out.
    device = runtime._device
    backend = kk.CPU(threads=2)
    n = 4096
    flag, spins, seen = np.ones(1, np.int64), np.zeros(1, np.int64), np.zeros(n, np.int64)
    for _ in range(3):   # measured with the flag raised: a launch of tens of microseconds
        wait_for_flag(backend, 64)(flag, spins, seen, ndrange=n)
    kk.synchronize(backend)
    flag[0] = 0
    # (a fast launch leads through `launch_if_same`, which checks its arguments first)
    calls = device.mailbox.calls()
    launches = {name: getattr(calls, name) for name in ("launch", "launch_if_same")
                if getattr(calls, name) is not None}
    others = []

    def beside_another_launch(name):
        def launch(*args):
            for each, function in launches.items():
                monkeypatch.setattr(calls, each, function)
            others.append(threading.Thread(target=lambda: (
                time.sleep(0.05), raise_flag(backend, 1)(flag, ndrange=1))))
            others[0].start()
            return launches[name](*args)
        return launch

    for name in launches:
        monkeypatch.setattr(calls, name, beside_another_launch(name))
    led = led_count[0]
    wait_for_flag(backend, 64)(flag, spins, seen, ndrange=n)
    assert led_count[0] == led + 1
    others[0].join()
    kk.synchronize(backend)
    assert spins[0] < SPINS and (seen == 1).all()


def test_only_one_thread_leads_at_a_time(record_range):
    # A second leader is refused at once, and runs nothing (`leader` says one leads).
    served = Served(helpers=1)
    try:
        mailbox = served.mailbox
        mailbox.words.leader = 1
        count = np.zeros(1, np.int64)
        ranges = np.full((4, 2), -1, np.int64)
        record = np.array([count.ctypes.data, ranges.ctypes.data], np.uint64).tobytes()
        assert mailbox.lead(mailbox.key(record_range), record, 10, 1, 1) == -1
        assert count[0] == 0 and mailbox.words.leader == 1
        mailbox.words.leader = 0
        lead_and_check(served, record_range, 10, 1, helpers=1)
        assert mailbox.words.leader == 0
    finally:
        served.stop()


def test_the_waking_thread_goes_on_once_a_woken_worker_watches(monkeypatch):
    # It waits awake and without the GIL (a woken worker needs it to reach `serve`), and
    # only until one watches.
    device = runtime._Device()
    monkeypatch.setattr(runtime, "_device", device)
    monkeypatch.setattr(runtime, "_SERVE_NS", 1000)
    try:
        device.wake(2)    # starts the worker: it watches briefly and sleeps
        deadline = time.monotonic() + 30
        while device.sleeping < 1 and time.monotonic() < deadline:
            time.sleep(0.001)
        assert device.sleeping == 1
        monkeypatch.setattr(runtime, "_SERVE_NS", 10**13)
        monkeypatch.setattr(runtime, "_WAKE_NS", 10**11)   # however loaded the machine
        device.wake(2)
        assert device.mailbox.words.watching == 1
    finally:
        send_back(monkeypatch, device)


@kk.kernel
def small_step(a, k):   # `step`, measured only by the launches of the test below
    i = kk.index(kk.Global)
    a[i] = (a[i] * 3 + k + i % 7) % MODULUS


def launch_until_led(kernel, backend, a, count, led=20) -> list:
    """Launch `kernel` step by step over `a`, synchronizing after each, until `led` of the
    launches were led (`count`) or 10 s passed; the steps launched."""
    steps = []
    deadline = time.monotonic() + 10
    while count[0] < led and time.monotonic() < deadline:
        kernel(backend, 256)(a, len(steps), ndrange=len(a))
        steps.append(len(steps))
        kk.synchronize(backend)
    return steps


def test_launches_too_small_to_be_queued_start_the_workers_that_share_them(monkeypatch):
    # A device whose launches were all small enough to run on the calling thread has
    # started no worker; a burst of them starts the workers and is led from then on.
    device = runtime._Device()
    monkeypatch.setattr(runtime, "_device", device)
    # (however long a noisy machine makes them look: none is queued, which starts workers)
    monkeypatch.setattr(runtime, "_FIRST_LAUNCH_NS", 10**10)
    monkeypatch.setattr(device.mailbox.words, "inline_ns", 10**13)
    count = counting_leads(monkeypatch, device)
    try:
        backend = kk.CPU(threads=2)
        n = 12_000    # under the size whose first launch is queued (`_INLINE_ITEMS`)
        a = np.zeros(n, np.int64)
        steps = launch_until_led(small_step, backend, a, count)
        assert count[0] >= 20
        np.testing.assert_array_equal(a, expected_after(steps, n))
    finally:
        send_back(monkeypatch, device)


def test_the_native_calls_are_compiled_on_a_thread_never_by_the_launching_one(monkeypatch):
    # A Ctrl-C while llvmlite frees what it made can have it free the same memory twice
    # (the process aborts); only the main thread sees Ctrl-C, and it launches.
    from backends.cpu import work_sharing
    callers = []
    compiled = work_sharing._compiled

    def compiling():
        callers.append(threading.current_thread())
        return compiled()
    monkeypatch.setattr(work_sharing, "_compiled", compiling)
    device = runtime._Device()
    monkeypatch.setattr(runtime, "_device", device)
    count = counting_leads(monkeypatch, device)
    try:
        backend = kk.CPU(threads=2)
        step(backend, 256)(np.zeros(BIG, np.int64), 0, ndrange=BIG)   # queued: starts one
        a = np.zeros(MID, np.int64)
        steps = launch_until_led(step, backend, a, count)
        assert count[0] >= 20
        assert callers and threading.main_thread() not in callers
        np.testing.assert_array_equal(a, expected_after(steps, MID))
    finally:
        send_back(monkeypatch, device)


@kk.kernel
def loop_long(a, rounds):
    i = kk.index(kk.Global)
    x = a[i]
    for r in range(rounds):
        x = (x * 3 + r + i % 7) % MODULUS
    a[i] = x


def test_a_launch_of_milliseconds_is_queued_so_that_the_caller_goes_on_meanwhile(
        monkeypatch):
    # Before work sharing such a launch was queued and the caller went on (to prepare the
    # next launch, say) while the workers ran it; led, the caller would wait for it.
    backend = kk.CPU(threads=2)
    n = 50_000
    a = np.zeros(n, np.int64)
    launch = loop_long(backend, 256)
    rounds = 4
    for _ in range(4):   # rounds for about 10 ms on two threads
        start = time.perf_counter()
        launch(a, rounds, ndrange=n)
        kk.synchronize(backend)
        rounds = max(rounds, int(rounds * 10e-3 / (time.perf_counter() - start)))
    (prepared,) = [prepared for key, prepared in loop_long._specializations.items()
                   if key[0] is backend]
    monkeypatch.setattr(prepared, "nanoseconds_per_group", 5e6 / (n // 256 + 1))  # 5 ms
    launch(a, rounds, ndrange=n)
    queued = len(runtime._device.queue)
    kk.synchronize(backend)
    assert queued == 1


INTERRUPTED = textwrap.dedent("""
    import random
    import signal
    import time

    import numpy as np
    import kernelkit as kk
    from backends.cpu import runtime

    @kk.kernel
    def step(a, k):
        i = kk.index(kk.Global)
        a[i] = (a[i] * 3 + k + i % 7) % 1_000_003

    device = runtime._device
    backend = kk.CPU(threads=2)
    a = np.zeros(40_000, np.int64)
    for k in range(20):
        step(backend, 256)(a, k, ndrange=len(a))
        kk.synchronize(backend)
    runtime._SERVE_NS = 10**13   # the workers watch the mailbox all along
    device.mailbox.words.joined_ns = 10**13
    with device.condition:
        device.submissions[0] += 1
        device.condition.notify_all()

    def interrupt(*_):   # as Ctrl-C does, at whatever bytecode the main thread is
        raise KeyboardInterrupt
    signal.signal(signal.SIGALRM, interrupt)
    for trial in range(TRIALS):
        try:
            signal.setitimer(signal.ITIMER_REAL, random.uniform(1e-6, 1e-3))
            while True:
                step(backend, 256)(a, trial, ndrange=len(a))
                kk.synchronize(backend)
        except KeyboardInterrupt:
            pass
        heads = [type(launch).__name__ for launch in device.queue]
        if heads or device.condition._is_owned():
            print("wedged after", trial, "interrupts:", heads, "lock held:",
                  device.condition._is_owned(), flush=True)
            raise SystemExit(1)
    kk.synchronize(backend)
    print("usable after", TRIALS, "interrupts", flush=True)
    """)


def test_ctrl_c_anywhere_in_a_loop_of_led_launches_leaves_the_device_usable(tmp_path):
    # A KeyboardInterrupt can surface at any bytecode of the main thread; none may leave
    # the head of a led launch in the queue (every synchronize would then hang) or the
    # device's lock held (the workers would wait for it forever).
    script = tmp_path / "child.py"
    script.write_text(INTERRUPTED.replace("TRIALS", "600"))
    child = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           timeout=120)
    assert child.returncode == 0, child.stdout + child.stderr[-3000:]
    assert "usable after 600 interrupts" in child.stdout


@pytest.mark.parametrize("kernel", [step, step_and_say])
@pytest.mark.parametrize("same", [True, False], ids=["same-arguments", "new-arguments"])
def test_a_probed_launch_near_the_line_runs_on_the_calling_thread_alone(led_count, monkeypatch,
                                                                      capfd, kernel, same):
    # Led, the hand-over to the workers is part of its time; a launch that should run
    # inline would look long enough to lead from then on. (With the arguments packed
    # last, the fast launcher's native call decides; with others, `run_groups`'s.)
    device = runtime._device
    backend = kk.CPU(threads=2)
    a = np.zeros(MID, np.int64)
    launch = kernel(backend, 256)
    steps = [1, 1] if same else [0]
    for k in steps:   # the general launch, then the one that packs the record
        launch(a, k, ndrange=MID)
    kk.synchronize(backend)
    prepared = prepared_for(kernel, backend)
    groups = -(-MID // 256)
    near = 1.5 * LED_NS / groups                   # between leading and twice that
    monkeypatch.setattr(prepared, "nanoseconds_per_group", near)
    prepared.state.leads = PROBED_LEADS - 1        # the next is probed
    led, posts = led_count[0], device.mailbox.words.sequence
    capfd.readouterr()
    answers = launch_answers(monkeypatch)
    launch(a, 1, ndrange=MID)
    kk.synchronize(backend)
    assert answers == [("launch_if_same" if same and native() else "launch", Ran.RAN)]
    # (the mailbox's sequence counts the posts: a lead opens and closes it)
    assert led_count[0] == led and device.mailbox.words.sequence == posts
    assert prepared.state.leads == PROBED_LEADS
    if kernel is step_and_say:   # what it printed is out once synchronized
        assert "said 1" in capfd.readouterr().out
    assert prepared.nanoseconds_per_group != near   # timed on this thread alone
    launch(a, 1, ndrange=MID)                        # the next one is led
    kk.synchronize(backend)
    assert device.mailbox.words.sequence == posts + 2 and led_count[0] == led + 1
    np.testing.assert_array_equal(a, expected_after(steps + [1, 1], MID))


def prepared_for(kernel, backend):
    (prepared,) = [prepared for key, prepared in kernel._specializations.items()
                   if key[0] is backend]
    return prepared


def native() -> bool:
    """Whether fast launches compare their arguments natively here."""
    return runtime._device.mailbox.calls().launch_if_same is not None


def launch_answers(monkeypatch) -> list:
    """[(name, answer)] of the native launch calls (`launch`, `launch_if_same`) from now
    on."""
    calls = runtime._device.mailbox.calls()
    answers = []
    for name in ("launch", "launch_if_same"):
        if getattr(calls, name) is None:
            continue

        def answering(*args, function=getattr(calls, name), name=name):
            answer = function(*args)
            answers.append((name, answer))
            return answer
        monkeypatch.setattr(calls, name, answering)
    return answers


@kk.kernel
def bump(a):
    i = kk.index(kk.Global)
    a[i] = a[i] + 1


def test_a_short_fast_launch_folds_its_time_into_the_estimate(led_count, monkeypatch):
    backend = kk.CPU(threads=2)
    a = np.zeros(1024, np.int64)
    launch = bump(backend, 256)
    for _ in range(2):   # the general launch, then the one that packs the record
        launch(a, ndrange=1024)
    prepared = prepared_for(bump, backend)
    long = 0.9 * LED_NS / 4   # run here, and far longer than it takes
    prepared.nanoseconds_per_group = long
    answers = launch_answers(monkeypatch)
    launch(a, ndrange=1024)
    assert answers == [("launch_if_same" if native() else "launch", Ran.RAN)]
    assert 0.75 * long < prepared.nanoseconds_per_group < 0.85 * long   # 3/4 old, 1/4 new
    tiny = 1e-9                             # and far shorter: one run counts 4 times it
    prepared.nanoseconds_per_group = tiny
    launch(a, ndrange=1024)
    assert prepared.nanoseconds_per_group == pytest.approx(1.75 * tiny)
    for _ in range(10):                     # slow runs in a row move it much
        launch(a, ndrange=1024)
    assert prepared.nanoseconds_per_group > 100 * tiny
    kk.synchronize(backend)
    np.testing.assert_array_equal(a, np.full(1024, 14))


def test_a_led_fast_launch_counts_its_leads_and_is_timed(led_count, monkeypatch):
    device = runtime._device
    backend = kk.CPU(threads=2)
    a = np.zeros(MID, np.int64)
    launch = step(backend, 256)
    for _ in range(2):   # the general launch, then the one that packs the record
        launch(a, 1, ndrange=MID)
    kk.synchronize(backend)
    prepared = prepared_for(step, backend)
    groups = -(-MID // 256)
    slow = 4 * PROBED_NS / groups                   # led, never probed
    prepared.nanoseconds_per_group = slow
    prepared.state.leads = 0
    posts, led = device.mailbox.words.sequence, led_count[0]
    answers = launch_answers(monkeypatch)
    launch(a, 1, ndrange=MID)
    assert answers == [("launch_if_same" if native() else "launch", Ran.RAN)] or \
        answers == [("launch_if_same" if native() else "launch", Ran.LED_BESIDE)]
    assert prepared.state.leads == 1 and led_count[0] == led + 1
    assert prepared.nanoseconds_per_group != slow and device.mailbox.words.sequence == posts + 2


def test_a_launch_behind_a_queued_one_waits_for_it_and_is_then_led(led_count, monkeypatch):
    # Queued behind a long launch, every launch after it would be handed out in Python
    # (a program's reverse pass once copied a fresh array, its first touch slow, and then
    # ran its two hundred short launches through the queue, 20% slower).
    device = runtime._device
    backend = kk.CPU(threads=2)
    a, b = np.zeros(MID, np.int64), np.zeros(BIG, np.int64)
    short, long = step(backend, 256), loop_long(backend, 256)
    for _ in range(2):   # measured, and each packed by its fast launcher
        short(a, 1, ndrange=MID)
        long(b, 1, ndrange=BIG)
    kk.synchronize(backend)
    monkeypatch.setattr(device.mailbox.words, "joined_ns", 2_000_000)
    monkeypatch.setattr(prepared_for(loop_long, backend), "nanoseconds_per_group",
                        1e7 / (BIG // 256))     # 10 ms: queued
    monkeypatch.setattr(prepared_for(step, backend), "nanoseconds_per_group",
                        4 * PROBED_NS / (MID // 256))   # led, never probed
    answers = launch_answers(monkeypatch)
    long(b, 100, ndrange=BIG)   # (tens of milliseconds: queued still when the next comes)
    short(a, 1, ndrange=MID)
    queued_after = len(device.queue)
    assert [answer for _, answer in answers] in (
        [Ran.LEFT, Ran.BEHIND, Ran.RAN], [Ran.LEFT, Ran.BEHIND, Ran.LED_BESIDE]), answers
    assert answers[-1][0] == "launch"   # asked again natively, once the queue ran
    assert queued_after == 0
    kk.synchronize(backend)
    np.testing.assert_array_equal(a, expected_after([1, 1, 1], MID))
