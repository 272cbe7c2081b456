"""Without a GPU, the CUDA runtime still runs in the test suite: every test that runs on
the CUDA backend (each kernel test's CUDA case, the GPU runtime tests), the launch-error
tests and the array tests run again on `host_driver`, a stand-in for the driver library
below cuda-python's bindings, over host memory, asynchronous like a GPU, whose launches
run the CPU build of the same kernel (see host_driver.py for what that does and does not
prove)."""
import os
import shutil
import subprocess
import sys
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


@pytest.mark.skipif(REASON is None, reason="a GPU runs these tests for real here")
@pytest.mark.skipif(BINDINGS is not None, reason=str(BINDINGS))
@pytest.mark.skipif(shutil.which(os.environ.get("CC") or "cc") is None,
                    reason="the stand-in libcuda.so.1 is built with a C compiler: cc, or $CC")
@pytest.mark.skipif(getattr(runtime, "HOST_DRIVER", False),
                    reason="already on the host driver")
def test_the_cuda_tests_on_a_host_memory_driver():
    """Every CUDA test case, the launch-error tests and the array tests, through the CUDA
    runtime and cuda-python's bindings on `host_driver` (device memory is host memory,
    work runs when it is waited for, a launch runs the CPU build of the kernel), which
    fails a test that makes a call the real driver would refuse."""
    root = HERE.parents[2]
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(HERE), str(root), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "host_driver",
                             "-p", "no:cacheprovider", "tests", "-k", SELECTION],
                            cwd=root, env=environment, capture_output=True, text=True,
                            timeout=1200)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    summary = result.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary, summary
