"""Launches led by the launching thread and shared natively with the awake workers
(`backends/cpu/work_sharing.py`): every group runs once, in the order of the stream,
beside queued and inline launches, from several Python threads at once, and with
workers of a backend that allows more threads than the launching one."""
import threading

import numpy as np
import pytest

import kernelkit as kk
from backends.cpu import runtime

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


@pytest.fixture
def led_count(monkeypatch):
    """How many launches `_Device.lead` ran. Meanwhile idle workers watch the mailbox
    without timing out (on a loaded machine they may not run for longer than they
    normally watch, and the launches would not be led); afterwards they are sent back
    to their normal watch."""
    device = runtime._device
    count = [0]
    lead = device.lead

    def counting(*args):
        led = lead(*args)
        count[0] += led
        return led
    monkeypatch.setattr(device, "lead", counting)
    monkeypatch.setattr(runtime, "_SERVE_CYCLES", 10**13)
    yield count
    monkeypatch.undo()
    with device.condition:
        device.submissions[0] += 1
        device.condition.notify_all()


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
