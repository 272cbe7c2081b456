"""A CPU kernel that crashes the process (an out-of-bounds write without bounds checks)
leaves a message on stderr naming the kernel and suggesting KERNELKIT_DEBUG=1, and the
process still dies by the signal, after Python's faulthandler has had its say where it
is enabled."""
import os
import signal
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent("""
    import sys

    import numpy as np
    import kernelkit as kk

    @kk.kernel
    def write_far_away(a):
        i = kk.index(kk.Global)
        a[i + (1 << 40)] = 1.0

    threads, n = int(sys.argv[1]), int(sys.argv[2])
    a = np.zeros(n)
    write_far_away(kk.CPU(threads=threads), 64)(a, ndrange=n)
    kk.synchronize(kk.CPU(threads=threads))
    print("no crash")
    """)


@pytest.mark.parametrize("threads, n, options", [
    (1, 64, []),                                   # on the calling thread
    (2, 1 << 20, ["-X", "faulthandler"]),          # queued, with Python's faulthandler
], ids=["calling thread", "queued, with faulthandler"])
def test_a_crashing_kernel_is_named_on_stderr_with_the_debug_hint(tmp_path, threads, n,
                                                                  options):
    script = tmp_path / "crash.py"
    script.write_text(CHILD)
    environment = dict(os.environ, KERNELKIT_DEBUG="0")
    result = subprocess.run([sys.executable, *options, str(script), str(threads), str(n)],
                            capture_output=True, text=True, timeout=120, env=environment)
    assert result.returncode == -signal.SIGSEGV, (result.returncode, result.stderr[-3000:])
    assert "no crash" not in result.stdout
    assert f"kernel 'write_far_away' ({script}:" in result.stderr, result.stderr[-3000:]
    assert "KERNELKIT_DEBUG=1" in result.stderr
    if options:
        assert "Fatal Python error: Segmentation fault" in result.stderr, result.stderr[-3000:]
