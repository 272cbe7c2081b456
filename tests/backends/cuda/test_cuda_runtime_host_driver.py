"""Without a GPU, the CUDA runtime still runs in the test suite: the tests that exercise
what the runtime does (the GPU runtime tests, the launch-error and array tests, the
language tests' CUDA cases with arguments of every kind, and the CUDA cases of the AD
launch, program and struct tests) run again on `host_driver`, a stand-in for the driver
library below cuda-python's bindings, over host memory, asynchronous like a GPU, whose
launches run the CPU build of the same kernel (see host_driver.py for what that does and
does not prove). Tests whose CUDA cases add only arithmetic (the math functions, the 3x3
decompositions, the fuzzer's kernels, the algorithms) are left out: every test compiles
its kernels for CUDA, and their CPU builds run in the CPU cases; a GPU runs them all."""
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import backends.cuda.runtime as runtime
from backends.cuda import CUDABackend

REASON = CUDABackend.unavailable_reason()
try:
    from cuda.bindings import driver  # noqa: F401 - the bindings run over the stand-in
    BINDINGS = None
except ImportError as error:
    BINDINGS = f"cuda-python is not installed ({error}); pip install -e '.[cuda]'"


HERE = Path(__file__).parent
SELECTION = "cuda or launch_errors or arrays_and_indexing"
PATHS = ["tests/backends/cuda", "tests/errors", "tests/lang", "tests/ad/test_ad_kernels.py",
         "tests/ad/test_ad_program.py", "tests/ad/test_ad_struct_arguments.py",
         "tests/runtime"]
LEFT_OUT = ["tests/lang/test_arithmetic.py", "tests/lang/test_linear_algebra_3x3.py",
            "tests/lang/test_vectors_differential.py"]
NOT_RUN = [
    (REASON is None, "a GPU runs these tests for real here"),
    (BINDINGS is not None, str(BINDINGS)),
    (shutil.which(os.environ.get("CC") or "cc") is None,
     "the stand-in libcuda.so.1 is built with a C compiler: cc, or $CC"),
    (getattr(runtime, "HOST_DRIVER", False), "already on the host driver"),
]
_run: dict = {}   # the run under way: its process and the file its output goes to


def start() -> None:
    """Start the run on the host driver (once), in a process of its own: the suite's
    conftest starts it as soon as the tests are collected, so that it runs beside them
    (on another core) rather than after them."""
    if _run or any(condition for condition, _ in NOT_RUN):
        return
    root = HERE.parents[2]
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(HERE), str(root), os.environ.get("PYTHONPATH", "")]))
    output = tempfile.TemporaryFile("w+")   # a file, not a pipe: nothing waits to be read
    _run["output"] = output
    _run["process"] = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "host_driver", "-p", "no:cacheprovider",
         *PATHS, *(f"--ignore={path}" for path in LEFT_OUT), "-k", SELECTION], cwd=root,
        env=environment, stdout=output,
        stderr=subprocess.STDOUT, text=True)


def stop() -> None:
    """End the run if it is still going (the suite stopped before its test)."""
    process = _run.get("process")
    if process is not None and process.poll() is None:
        process.kill()
        process.wait()


@pytest.mark.skipif(any(condition for condition, _ in NOT_RUN),
                    reason="; ".join(reason for condition, reason in NOT_RUN if condition))
def test_the_cuda_tests_on_a_host_memory_driver():
    """The CUDA cases of the runtime's tests (`PATHS`), the launch-error tests and the
    array tests, through the CUDA runtime and cuda-python's bindings on `host_driver` (device memory is host memory,
    work runs when it is waited for, a launch runs the CPU build of the kernel), which
    fails a test that makes a call the real driver would refuse."""
    start()
    process, output = _run["process"], _run["output"]
    try:
        process.wait(timeout=1200)
    finally:
        stop()
    output.seek(0)
    lines = output.read()
    output.close()
    assert process.returncode == 0, lines[-8000:]
    summary = lines.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary, summary
