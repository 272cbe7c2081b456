"""Ctrl-C during a long kernel on the CPU backend: the launch (run on the calling thread)
or kk.synchronize (waiting for queued launches) raises KeyboardInterrupt within
milliseconds, not when the kernel ends; the interrupted work is abandoned (the
interrupt says so), and the backend runs the next launch as usual. A kernel polls a
process-wide count of interrupts (`backends/cpu/interrupts.py`) between work-groups and
regions and at its loops' back edges, so a launch whose earlier runs were short (the
runtime then runs it in one call) and a work-item that never ends stop too."""
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from backends.cpu import interrupts

CHILD = textwrap.dedent("""
    import sys
    import time

    import numpy as np
    import kernelkit as kk

    @kk.kernel
    def slow(out, iterations):
        i = kk.index(kk.Global)
        total = 0.0
        for k in range(iterations):
            total = total * 0.999 + k
        out[i] = total

    @kk.kernel
    def fill_with_index(a):
        i = kk.index(kk.Global)
        a[i] = i + 1

    threads = int(sys.argv[1])
    backend = kk.CPU(threads=threads)
    n, iterations = 1 << 14, 1 << 20   # about half a minute of work on two cores
    out = np.zeros(n)
    kk.code_llvm(slow, backend, out, iterations, ndrange=n, workgroupsize=16)  # compiled now
    print("started", flush=True)
    try:
        slow(backend, 16)(out, iterations, ndrange=n)
        kk.synchronize(backend)
        print("finished", flush=True)
    except KeyboardInterrupt as interrupt:
        print("interrupted:", " ".join(getattr(interrupt, "__notes__", [])), flush=True)
    a = np.zeros(1000, np.int64)
    fill_with_index(backend, 100)(a, ndrange=1000)
    kk.synchronize(backend)
    assert (a == np.arange(1, 1001)).all(), a
    print("launched again", flush=True)
    """)


def lines_of(stream) -> queue.Queue:
    """The lines a child prints, read on a thread, so that a wait for one can time out."""
    lines = queue.Queue()

    def read():
        for line in stream:
            lines.put(line)
        lines.put("")

    threading.Thread(target=read, daemon=True).start()
    return lines


@pytest.mark.parametrize("threads", [1, 2], ids=["launch on the calling thread",
                                                  "synchronize"])
def test_ctrl_c_during_a_long_kernel_interrupts_it_within_seconds_and_the_backend_goes_on(
        tmp_path, threads):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    child = subprocess.Popen([sys.executable, str(script), str(threads)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = lines_of(child.stdout)
        assert lines.get(timeout=120).strip() == "started"
        time.sleep(0.5)   # well inside the kernel
        os.kill(child.pid, signal.SIGINT)
        sent = time.monotonic()
        try:
            line = lines.get(timeout=10)
        except queue.Empty:
            line = "(nothing within 10 s)"
        waited = time.monotonic() - sent
        assert line.startswith("interrupted:"), line
        assert waited < 3, f"KeyboardInterrupt came {waited:.1f} s after Ctrl-C"
        assert "'slow'" in line and "abandoned" in line
        assert lines.get(timeout=60).strip() == "launched again"
        assert child.wait(timeout=60) == 0, child.stderr.read()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


ENDLESS = textwrap.dedent("""
    import os
    import signal
    import sys
    import time

    import numpy as np
    import kernelkit as kk

    @kk.kernel
    def halve_and_add(y, trips):
        i = kk.index(kk.Global)
        x = y[i]
        for k in range(trips):
            x = x * 0.5 + 1.0
        y[i] = x

    @kk.kernel
    def count_up(y, limit):
        i = kk.index(kk.Global)
        x = y[i]
        while x < limit:      # past 2**53, x + 1 is x: with limit inf it never ends
            x = x + 1.0
        y[i] = x

    case = sys.argv[1]
    backend = kk.CPU()
    kernel, items, cheap, endless = {
        "long launch": (halve_and_add, 4096, 4, 10**12),
        "runaway work-item": (count_up, 1, 3.0, float("inf")),
    }[case]
    launch = kernel(backend, 64)
    y = np.zeros(items)
    launch(y, cheap, ndrange=items)      # a cheap run first: the estimate says short
    kk.synchronize(backend)
    print("running", flush=True)
    try:
        launch(y, endless, ndrange=items)
        kk.synchronize(backend)
    except KeyboardInterrupt:
        print("interrupted", time.perf_counter(), flush=True)
    # An interrupt while Python code runs cuts no later launch short.
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)
    except KeyboardInterrupt:
        pass
    y = np.zeros(items)
    launch(y, cheap, ndrange=items)
    kk.synchronize(backend)
    expected = 2 - 2 * 0.5 ** cheap if kernel is halve_and_add else cheap
    print("after", bool(np.all(y == expected)), flush=True)
""")


def interrupted_after(case: str, tmp_path: Path) -> tuple[float, list[str]]:
    """Run the child on `case`, interrupt it while its endless launch runs; the seconds
    from SIGINT to the KeyboardInterrupt in the child, and the child's lines after it."""
    script = tmp_path / "child.py"
    script.write_text(ENDLESS)
    root = Path(__file__).resolve().parents[3]
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(root)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    child = subprocess.Popen([sys.executable, str(script), case], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=environment)
    try:
        assert child.stdout.readline().strip() == "running", child.stderr.read()
        time.sleep(0.5)   # well into the launch
        sent = time.perf_counter()
        child.send_signal(signal.SIGINT)
        try:
            out, err = child.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{case}: still running 60 s after SIGINT")
        assert child.returncode == 0, err
        words = out.split()
        assert words[:1] == ["interrupted"], out + err
        return float(words[1]) - sent, words[2:]
    finally:
        child.kill()
        child.wait()


@pytest.mark.skipif(not sys.platform.startswith("linux"),
                    reason="the native SIGINT handler is installed on Linux only")
@pytest.mark.parametrize("case", ["long launch", "runaway work-item"])
def test_ctrl_c_ends_an_endless_launch_at_once_and_later_launches_run_whole(case, tmp_path):
    latency, after = interrupted_after(case, tmp_path)
    # Within milliseconds on an idle machine (the clocks of two processes are one
    # clock here: CLOCK_MONOTONIC); the bound leaves room for a loaded one.
    assert latency < 0.5, latency
    assert after == ["after", "True"]


LOOPS = """kernel @loops(y, n) -> void file "<test>" {
^bb0(%0: array<f64, 1, C>, %1: int):
  %2 = const 0 : int
  %3 = const 1 : int
  %4 = const 8 : int
  br ^bb1(%2)
^bb1(%5: int):
  %6 = lt %5, %4 : bool
  cbr %6, ^bb2(), ^bb3(%2)
^bb2():
  %7 = add %5, %3 : int
  br ^bb1(%7)
^bb3(%8: int):
  %9 = lt %8, %1 : bool
  cbr %9, ^bb4(), ^bb5()
^bb4():
  %10 = add %8, %3 : int
  br ^bb3(%10)
^bb5():
  ret
}
"""


def test_a_loop_of_a_constant_trip_count_is_not_polled_and_one_of_n_trips_is():
    from kernelkit.ir.parser import parse_module
    function = parse_module(LOOPS).kernel
    entry, constant_header, constant_body, counted_header, counted_body, end = \
        function.blocks
    assert interrupts.polled_back_edges(function) == {(counted_body, counted_header)}
