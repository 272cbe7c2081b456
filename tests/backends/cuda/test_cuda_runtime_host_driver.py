"""Without a GPU, the CUDA runtime's own logic still runs in the test suite: the GPU
runtime tests, the launch-error tests and the array tests are run through it on
`host_driver`, a stand-in for the driver over host memory whose launches run the CPU
build of the same kernel (see host_driver.py for what that does and does not prove)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

import backends.cuda.runtime as runtime
from backends.cuda import CUDABackend

REASON = CUDABackend.unavailable_reason()
try:
    from cuda.bindings import driver  # noqa: F401 - its types and enums serve the stand-in
    BINDINGS = None
except ImportError as error:
    BINDINGS = f"cuda-python is not installed ({error}); pip install -e '.[cuda]'"


HERE = Path(__file__).parent
HOST_DRIVER_TESTS = ["tests/backends/cuda/test_cuda_runtime.py",
                     "tests/errors/test_launch_errors.py",
                     "tests/lang/test_arrays_and_indexing.py"]


@pytest.mark.skipif(REASON is None, reason="a GPU runs these tests for real here")
@pytest.mark.skipif(BINDINGS is not None, reason=str(BINDINGS))
@pytest.mark.skipif(getattr(runtime, "HOST_DRIVER", False),
                    reason="already on the host driver")
def test_the_runtime_logic_on_a_host_memory_driver():
    """Without a GPU, the GPU runtime tests, the launch-error tests and the array tests run
    through the CUDA runtime on `host_driver` (device memory is host memory, a launch runs
    the CPU build of the kernel): copies, views, packing, debug records and errors."""
    root = HERE.parents[2]
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(HERE), str(root), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "host_driver",
                             "-p", "no:cacheprovider", *HOST_DRIVER_TESTS],
                            cwd=root, env=environment, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    summary = result.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary, summary
