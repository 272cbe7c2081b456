"""Ctrl-C during a long kernel on the CPU backend: the launch (run on the calling thread)
or kk.synchronize (waiting for queued launches) raises KeyboardInterrupt within a
couple of seconds, not when the kernel ends; the interrupted work is abandoned (the
interrupt says so), and the backend runs the next launch as usual."""
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

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
